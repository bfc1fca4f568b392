import Crypto
import Foundation

/// A Bitwarden "legacy" 64-byte symmetric key: AES-256-CBC key (bytes 0..<32) followed by the
/// HMAC-SHA256 key (bytes 32..<64). User keys, cipher keys and the stretched master key all have
/// this shape.
///
/// Key bytes live in `Crypto.SymmetricKey` storage (zeroed when released) and are never printed:
/// `description` is redacted.
///
/// ```swift
/// let userKey = SymmetricCryptoKey.generate()
/// let name = try EncString.encrypt("My bank", key: userKey)
/// let plain = try name.decryptString(key: userKey)
/// ```
public struct SymmetricCryptoKey: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// Byte length of the serialized key.
    public static let byteCount = 64

    /// The AES-256 encryption half.
    public let encryptionKey: SymmetricKey
    /// The HMAC-SHA256 authentication half.
    public let macKey: SymmetricKey
    /// ``macKey``'s HMAC key schedule, done once for every EncString under this key.
    let mac: KeyedHMACSHA256

    /// Creates a key from its 64 raw bytes (enc ‖ mac).
    public init(bytes: some Collection<UInt8>) throws {
        guard bytes.count == Self.byteCount else {
            throw VaultCryptoError.invalidKeyLength(expected: Self.byteCount, actual: bytes.count)
        }
        let array = Array(bytes)
        encryptionKey = SymmetricKey(data: array[0..<32])
        macKey = SymmetricKey(data: array[32..<64])
        mac = KeyedHMACSHA256(key: macKey)
    }

    /// Creates a key from two 32-byte halves.
    public init(encryptionKey: SymmetricKey, macKey: SymmetricKey) throws {
        guard encryptionKey.bitCount == 256 else {
            throw VaultCryptoError.invalidKeyLength(expected: 32, actual: encryptionKey.bitCount / 8)
        }
        guard macKey.bitCount == 256 else {
            throw VaultCryptoError.invalidKeyLength(expected: 32, actual: macKey.bitCount / 8)
        }
        self.encryptionKey = encryptionKey
        self.macKey = macKey
        mac = KeyedHMACSHA256(key: macKey)
    }

    /// Equal when both halves are (the cached key schedule follows from them).
    public static func == (a: SymmetricCryptoKey, b: SymmetricCryptoKey) -> Bool {
        a.encryptionKey == b.encryptionKey && a.macKey == b.macKey
    }

    /// Creates a key from the base64 of its 64 raw bytes.
    public init(base64: String) throws {
        guard let bytes = Base64.decode(base64) else {
            throw VaultCryptoError.invalidKeyLength(expected: Self.byteCount, actual: 0)
        }
        try self.init(bytes: bytes)
    }

    /// A fresh random key (a new user key or per-cipher key).
    public static func generate(using random: any RandomSource = SystemRandomSource()) -> SymmetricCryptoKey {
        // 64 bytes from the source always make a valid key.
        try! SymmetricCryptoKey(bytes: random.bytes(byteCount))
    }

    /// The 64 raw bytes (enc ‖ mac). Handle with care: this is key material.
    public func exportBytes() -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(64)
        encryptionKey.withUnsafeBytes { out.append(contentsOf: $0) }
        macKey.withUnsafeBytes { out.append(contentsOf: $0) }
        return out
    }

    /// Base64 of the 64 raw bytes, the form Bitwarden tools print. Key material.
    public func exportBase64() -> String { Base64.encode(exportBytes()) }

    /// Wraps another key (e.g. a per-cipher key) as a type-2 EncString of its 64 bytes.
    public func wrap(_ key: SymmetricCryptoKey, random: any RandomSource = SystemRandomSource()) -> EncString {
        EncString.encrypt(key.exportBytes(), key: self, random: random)
    }

    /// Unwraps a key wrapped by ``wrap(_:random:)`` (Bitwarden's `cipher.key`).
    public func unwrap(_ wrapped: EncString) throws -> SymmetricCryptoKey {
        try SymmetricCryptoKey(bytes: wrapped.decrypt(key: self))
    }

    /// Derives a 64-byte subkey with HKDF-Expand (SHA-256), using all 64 key bytes as the PRK
    /// and `info` as context. VaultLog seals its own data under such subkeys, so they never
    /// equal a key Bitwarden uses for vault data.
    public func derive(info: String) -> SymmetricCryptoKey {
        try! SymmetricCryptoKey(bytes: hkdfExpand(prk: exportBytes(), info: info, outputByteCount: 64))
    }

    /// Always `"SymmetricCryptoKey(<redacted>)"`, so the key never reaches a log.
    public var description: String { "SymmetricCryptoKey(<redacted>)" }
    /// The same redacted text as ``description``, so debuggers do not show the key either.
    public var debugDescription: String { description }
}

/// HKDF-Expand (RFC 5869, expand step only) with SHA-256, as Bitwarden uses it to stretch keys.
public func hkdfExpand(prk: some ContiguousBytes, info: String, outputByteCount: Int) -> [UInt8] {
    let key = HKDF<SHA256>.expand(pseudoRandomKey: prk, info: Array(info.utf8), outputByteCount: outputByteCount)
    return key.withUnsafeBytes { Array($0) }
}

/// Compares two byte sequences in time independent of where they differ.
@inlinable
public func constantTimeEquals(_ lhs: some Collection<UInt8>, _ rhs: some Collection<UInt8>) -> Bool {
    guard lhs.count == rhs.count else { return false }
    var difference: UInt8 = 0
    for (a, b) in zip(lhs, rhs) { difference |= a ^ b }
    return difference == 0
}

/// ``constantTimeEquals(_:_:)`` for bytes in memory, eight at a time (a fold compares a MAC per
/// event; the generic form walked a slice byte by byte, about 400 instructions for 32 bytes).
/// Reads every byte whatever differs.
public func constantTimeEquals(_ lhs: UnsafeRawBufferPointer, _ rhs: UnsafeRawBufferPointer) -> Bool {
    guard lhs.count == rhs.count else { return false }
    guard let l = lhs.baseAddress, let r = rhs.baseAddress else { return true }
    let words = lhs.count / 8
    var difference: UInt64 = 0
    for i in 0..<words {
        difference |= l.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self) ^ r.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self)
    }
    for i in (words * 8)..<lhs.count { difference |= UInt64(lhs[i] ^ rhs[i]) }
    return difference == 0
}
