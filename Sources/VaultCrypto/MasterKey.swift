import Crypto
import _CryptoExtras

/// Key-derivation settings of an account, as prelogin and the token response report them.
///
/// Every derivation checks ``validate()`` first, so a prelogin answer, a stored account or an
/// import with absurd settings gets a clear error instead of a crash or an hours-long derivation.
public enum KdfConfig: Sendable, Hashable, Codable, CustomStringConvertible {
    /// PBKDF2-HMAC-SHA256 (wire `kdf: 0`).
    case pbkdf2(iterations: Int)
    /// Argon2id version 0x13 (wire `kdf: 1`); memory in MiB.
    case argon2id(iterations: Int, memoryMiB: Int, parallelism: Int)

    /// The PBKDF2 iteration counts accepted (Bitwarden's prelogin minimum to its maximum).
    public static let pbkdf2Iterations = 5_000...2_000_000
    /// Below this many PBKDF2 iterations Bitwarden warns that the account is weak.
    public static let pbkdf2RecommendedIterations = 600_000
    /// The Argon2id iteration counts accepted.
    public static let argon2Iterations = 2...10
    /// The Argon2id memory sizes accepted, in MiB.
    public static let argon2MemoryMiB = 16...1_024
    /// The Argon2id parallelism accepted.
    public static let argon2Parallelism = 1...16

    /// Bitwarden's minimum accepted PBKDF2 iteration count.
    public static let pbkdf2MinimumIterations = pbkdf2Iterations.lowerBound
    /// Bitwarden's default for new accounts.
    public static let pbkdf2DefaultIterations = 600_000
    /// The default: PBKDF2 with 600,000 iterations.
    public static let `default` = KdfConfig.pbkdf2(iterations: pbkdf2DefaultIterations)
    /// Bitwarden's web-vault defaults for new Argon2id accounts: 3 iterations, 64 MiB, parallelism 4.
    public static let argon2DefaultIterations = 3
    /// Argon2id memory of a new account, in MiB.
    public static let argon2DefaultMemoryMiB = 64
    /// Argon2id lanes of a new account.
    public static let argon2DefaultParallelism = 4
    /// The Argon2id settings of a new account in Bitwarden's web vault.
    public static let argon2idDefault = KdfConfig.argon2id(
        iterations: argon2DefaultIterations, memoryMiB: argon2DefaultMemoryMiB, parallelism: argon2DefaultParallelism)

    /// The wire `KdfType` number.
    public var kdfType: Int {
        switch self {
        case .pbkdf2: 0
        case .argon2id: 1
        }
    }

    /// Builds the config from the wire fields (`kdf`, `kdfIterations`, `kdfMemory`,
    /// `kdfParallelism`) and checks it with ``validate()``. Argon2id without memory or
    /// parallelism takes Bitwarden's defaults (64 MiB, 4).
    public init(kdfType: Int, iterations: Int, memoryMiB: Int? = nil, parallelism: Int? = nil) throws {
        switch kdfType {
        case 0:
            self = .pbkdf2(iterations: iterations)
        case 1:
            self = .argon2id(iterations: iterations, memoryMiB: memoryMiB ?? Self.argon2DefaultMemoryMiB,
                             parallelism: parallelism ?? Self.argon2DefaultParallelism)
        default:
            throw VaultCryptoError.unsupportedKdf("type \(kdfType) (known: 0 = PBKDF2-SHA256, 1 = Argon2id)")
        }
        try validate()
    }

    /// Throws ``VaultCryptoError/invalidKdfParameters(_:)`` naming the value and the accepted
    /// range when a setting is outside what Bitwarden accepts.
    public func validate() throws {
        func check(_ name: String, _ value: Int, _ range: ClosedRange<Int>, unit: String = "") throws {
            guard range.contains(value) else {
                throw VaultCryptoError.invalidKdfParameters(
                    "\(name) \(value)\(unit) is outside the accepted range \(range.lowerBound)–\(range.upperBound)\(unit)")
            }
        }
        switch self {
        case .pbkdf2(let iterations):
            try check("PBKDF2 iterations", iterations, Self.pbkdf2Iterations)
        case .argon2id(let iterations, let memory, let parallelism):
            try check("Argon2id iterations", iterations, Self.argon2Iterations)
            try check("Argon2id memory", memory, Self.argon2MemoryMiB, unit: " MiB")
            try check("Argon2id parallelism", parallelism, Self.argon2Parallelism)
        }
    }

    /// A warning for settings Bitwarden accepts but calls weak (PBKDF2 below 600,000
    /// iterations), or nil.
    public var weaknessWarning: String? {
        guard case .pbkdf2(let iterations) = self, iterations < Self.pbkdf2RecommendedIterations else { return nil }
        return "PBKDF2 with \(iterations) iterations is weak: Bitwarden recommends at least \(Self.pbkdf2RecommendedIterations) "
            + "(change it in the web vault under Settings → Security → Keys)"
    }

    /// The algorithm and its parameters, e.g. `"PBKDF2-SHA256 (600000 iterations)"` or
    /// `"Argon2id (3 iterations, 64 MiB, parallelism 4)"`.
    public var description: String {
        switch self {
        case .pbkdf2(let iterations): "PBKDF2-SHA256 (\(iterations) iterations)"
        case .argon2id(let i, let m, let p): "Argon2id (\(i) iterations, \(m) MiB, parallelism \(p))"
        }
    }
}

/// What a master-password hash is for (Bitwarden's `HashPurpose`): the iteration count of the
/// final PBKDF2 round.
public enum HashPurpose: Int, Sendable {
    /// Sent to the server at login (`password` of the token request).
    case serverAuthorization = 1
    /// Kept on the device to check the password offline.
    case localAuthorization = 2
}

/// The 32-byte master key derived from the master password and the account's salt (its email,
/// trimmed and lowercased). It never leaves the device; its stretched form unwraps the user key.
public struct MasterKey: Sendable, CustomStringConvertible {
    let key: SymmetricKey

    /// Derives the master key: PBKDF2-SHA256(password, salt = email trimmed and lowercased).
    public static func derive(password: String, email: String, kdf: KdfConfig) throws -> MasterKey {
        try derive(password: password, salt: salt(email: email), kdf: kdf)
    }

    /// The KDF salt: the salt prelogin named, or else the email trimmed and lowercased.
    public static func salt(email: String, preloginSalt: String? = nil) -> [UInt8] {
        Array((preloginSalt ?? email.trimmingWhitespace().lowercased()).utf8)
    }

    /// Derives the master key from an explicit salt (prelogin may return one). The settings are
    /// checked with ``KdfConfig/validate()`` before any work.
    ///
    /// - PBKDF2-SHA256(password, salt, iterations), 32 bytes.
    /// - Argon2id v0x13(password, SHA-256(salt), iterations, memory MiB × 1024 KiB, parallelism),
    ///   32 bytes, as Bitwarden derives it.
    public static func derive(password: String, salt: [UInt8], kdf: KdfConfig) throws -> MasterKey {
        try kdf.validate()
        switch kdf {
        case .pbkdf2(let iterations):
            do {
                let key = try KDF.Insecure.PBKDF2.deriveKey(
                    from: Array(password.utf8), salt: salt, using: .sha256,
                    outputByteCount: 32, unsafeUncheckedRounds: iterations)
                return MasterKey(key: key)
            } catch {
                throw VaultCryptoError.primitiveFailure("PBKDF2: \(error)")
            }
        case .argon2id(let iterations, let memoryMiB, let parallelism):
            let saltHash = Array(SHA256.hash(data: salt))
            let bytes = try Argon2id.hash(
                password: Array(password.utf8), salt: saltHash, iterations: iterations,
                memoryKiB: memoryMiB * 1024, parallelism: parallelism, outputByteCount: 32)
            return MasterKey(key: SymmetricKey(data: bytes))
        }
    }

    /// Creates a master key from its 32 raw bytes (tests and key-connector flows).
    public init(bytes: some Collection<UInt8>) throws {
        guard bytes.count == 32 else { throw VaultCryptoError.invalidKeyLength(expected: 32, actual: bytes.count) }
        key = SymmetricKey(data: Array(bytes))
    }

    init(key: SymmetricKey) { self.key = key }

    /// The raw 32 bytes. Key material.
    public func exportBytes() -> [UInt8] { key.withUnsafeBytes { Array($0) } }

    /// The stretched master key: HKDF-Expand(masterKey, "enc", 32) ‖ HKDF-Expand(masterKey, "mac", 32).
    public func stretched() -> SymmetricCryptoKey {
        key.withUnsafeBytes { prk in
            let enc = hkdfExpand(prk: prk, info: "enc", outputByteCount: 32)
            let mac = hkdfExpand(prk: prk, info: "mac", outputByteCount: 32)
            return try! SymmetricCryptoKey(bytes: enc + mac)
        }
    }

    /// The master-password hash: PBKDF2-SHA256(key = master key, salt = password, 1 or 2 rounds), base64.
    public func passwordHash(password: String, purpose: HashPurpose = .serverAuthorization) -> String {
        let hash = key.withUnsafeBytes { raw in
            try! KDF.Insecure.PBKDF2.deriveKey(
                from: Array(raw), salt: Array(password.utf8), using: .sha256,
                outputByteCount: 32, unsafeUncheckedRounds: purpose.rawValue)
        }
        return hash.withUnsafeBytes { Base64.encode($0) }
    }

    /// Unwraps the protected user key: type 2 with the stretched master key; a legacy type-0
    /// key with the unstretched master key as in Bitwarden's `decrypt_user_key`.
    public func decryptUserKey(_ protectedKey: EncString) throws -> SymmetricCryptoKey {
        switch protectedKey.type {
        case .aesCbc256HmacSha256B64:
            return try SymmetricCryptoKey(bytes: protectedKey.decrypt(key: stretched()))
        case .aesCbc256B64:
            return try SymmetricCryptoKey(bytes: protectedKey.decryptLegacy(aesKey: key))
        }
    }

    /// Protects a user key for storage on the server: type-2 EncString of its 64 bytes under
    /// the stretched master key.
    public func encryptUserKey(_ userKey: SymmetricCryptoKey, random: any RandomSource = SystemRandomSource()) -> EncString {
        EncString.encrypt(userKey.exportBytes(), key: stretched(), random: random)
    }

    /// Always `"MasterKey(<redacted>)"`, so the key never reaches a log.
    public var description: String { "MasterKey(<redacted>)" }
}

extension String {
    /// Trims ASCII and Unicode whitespace at both ends (Rust's `str::trim`).
    func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let last = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        return String(scalars[first...last])
    }
}
