import Foundation
import Logging
import VaultCrypto

/// Which server the emulator imitates. The routes and shapes are shared; the flavour decides
/// the documented differences (`Docs/Emulator.md`).
public enum EmulatorFlavor: String, Sendable, Codable, CaseIterable, CustomStringConvertible {
    /// The official Bitwarden server: 404 for unknown or foreign ciphers, an absolute 1-second
    /// `lastKnownRevisionDate` tolerance, EncString validation with length limits, idempotent
    /// soft delete, dates with 7 fractional digits.
    case bitwarden
    /// Vaultwarden: 400 "Cipher doesn't exist", a one-directional ≥ 2 s stale check that ignores
    /// unparseable dates, no EncString validation, a repeated soft delete bumps `revisionDate`,
    /// dates with 6 fractional digits.
    case vaultwarden

    /// The raw value: `bitwarden` or `vaultwarden`.
    public var description: String { rawValue }
}

/// Everything that makes an emulator run reproducible, plus its few knobs.
///
/// Time, ids and randomness are injected: two emulators with the same configuration (same
/// seed, same clock) that receive the same requests produce the same ids, dates and tokens.
/// The one exception is the RSA key pair of ``BitwardenEmulator/createAccount(email:password:iterations:)``,
/// which BoringSSL generates from the system's randomness.
///
/// ```swift
/// let clock = ManualClock(Date(timeIntervalSince1970: 1_750_000_000))   // VaultLogTesting's clock
/// let emulator = BitwardenEmulator(configuration: EmulatorConfiguration(
///     flavor: .bitwarden, now: { clock.now }, random: SeededRandomSource(seed: 42)))
/// clock.advance(by: 3601)   // access tokens issued before are now expired
/// ```
public struct EmulatorConfiguration: Sendable {
    /// Which server's behaviour to imitate.
    public var flavor: EmulatorFlavor
    /// The server's clock: creation, revision and deletion dates and token expiry all read it.
    public var now: @Sendable () -> Date
    /// Randomness for ids, keys, IVs, tokens and latency jitter.
    public var random: any RandomSource
    /// Makes the id of a new account, cipher or folder; nil draws a version-4 UUID from ``random``.
    public var makeID: (@Sendable () -> String)?
    /// Lifetime of an access token (Bitwarden: 1 hour for every first-party client).
    public var tokenLifetime: TimeInterval
    /// Sliding lifetime of a refresh token (Bitwarden: 30 days for browser, desktop and CLI).
    public var refreshTokenLifetime: TimeInterval
    /// The token the `/admin/...` HTTP routes require in `X-Admin-Token`; nil disables them (404).
    public var adminToken: String?
    /// Where the emulator logs requests, faults and state changes. It never prints.
    public var logger: Logger
    /// Largest request body accepted (the `data` field alone may hold 500,000 characters).
    public var maximumBodyBytes: Int
    /// Largest attachment file accepted (100 MiB by default). An announcement
    /// (`POST …/attachment/v2`) with a larger `fileSize` gets 400, an upload whose file is larger
    /// gets 413. Upload requests may be this much larger than ``maximumBodyBytes``.
    public var maximumAttachmentBytes: Int

    /// Creates a configuration; every argument has a production-like default.
    public init(
        flavor: EmulatorFlavor = .bitwarden,
        now: @escaping @Sendable () -> Date = { Date() },
        random: any RandomSource = SystemRandomSource(),
        makeID: (@Sendable () -> String)? = nil,
        tokenLifetime: TimeInterval = 3600,
        refreshTokenLifetime: TimeInterval = 30 * 86_400,
        adminToken: String? = nil,
        logger: Logger = Logger(label: "vaultlog.emulator"),
        maximumBodyBytes: Int = 4 * 1024 * 1024,
        maximumAttachmentBytes: Int = 100 * 1024 * 1024
    ) {
        self.flavor = flavor
        self.now = now
        self.random = random
        self.makeID = makeID
        self.tokenLifetime = tokenLifetime
        self.refreshTokenLifetime = refreshTokenLifetime
        self.adminToken = adminToken
        self.logger = logger
        self.maximumBodyBytes = maximumBodyBytes
        self.maximumAttachmentBytes = maximumAttachmentBytes
    }
}

extension RandomSource {
    /// A uniformly distributed number in [0, 1).
    func unitInterval() -> Double {
        let raw = bytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Double(raw >> 11) / Double(UInt64(1) << 53)
    }

    /// URL-safe base64 of `count` random bytes, for opaque tokens.
    func tokenString(byteCount: Int = 32) -> String {
        Base64.encode(bytes(byteCount)).base64URL
    }
}

extension String {
    /// Standard base64 turned into the unpadded URL-safe alphabet (JWT's base64url).
    var base64URL: String {
        var bytes = utf8.map { $0 == UInt8(ascii: "+") ? UInt8(ascii: "-") : $0 == UInt8(ascii: "/") ? UInt8(ascii: "_") : $0 }
        while bytes.last == UInt8(ascii: "=") { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}
