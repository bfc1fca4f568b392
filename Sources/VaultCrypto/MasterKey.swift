import Crypto
import _CryptoExtras

/// Key-derivation settings of an account, as prelogin and the token response report them.
public enum KdfConfig: Sendable, Hashable, Codable, CustomStringConvertible {
    /// PBKDF2-HMAC-SHA256 (wire `kdf: 0`).
    case pbkdf2(iterations: Int)
    /// Argon2id (wire `kdf: 1`); memory in MiB. Not implemented by this build: deriving a key
    /// with it throws ``VaultCryptoError/unsupportedKdf(_:)``.
    case argon2id(iterations: Int, memoryMiB: Int, parallelism: Int)

    /// Bitwarden's minimum accepted PBKDF2 iteration count.
    public static let pbkdf2MinimumIterations = 5000
    /// Bitwarden's default for new accounts.
    public static let pbkdf2DefaultIterations = 600_000
    /// The default: PBKDF2 with 600,000 iterations.
    public static let `default` = KdfConfig.pbkdf2(iterations: pbkdf2DefaultIterations)

    /// The wire `KdfType` number.
    public var kdfType: Int {
        switch self {
        case .pbkdf2: 0
        case .argon2id: 1
        }
    }

    /// Builds the config from the wire fields (`kdf`, `kdfIterations`, `kdfMemory`, `kdfParallelism`).
    public init(kdfType: Int, iterations: Int, memoryMiB: Int? = nil, parallelism: Int? = nil) throws {
        switch kdfType {
        case 0:
            self = .pbkdf2(iterations: iterations)
        case 1:
            self = .argon2id(iterations: iterations, memoryMiB: memoryMiB ?? 64, parallelism: parallelism ?? 4)
        default:
            throw VaultCryptoError.unsupportedKdf("type \(kdfType)")
        }
    }

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
        let salt = Array(email.trimmingWhitespace().lowercased().utf8)
        return try derive(password: password, salt: salt, kdf: kdf)
    }

    /// Derives the master key from an explicit salt (prelogin may return one).
    public static func derive(password: String, salt: [UInt8], kdf: KdfConfig) throws -> MasterKey {
        switch kdf {
        case .pbkdf2(let iterations):
            guard iterations >= KdfConfig.pbkdf2MinimumIterations else {
                throw VaultCryptoError.invalidKdfParameters(
                    "PBKDF2 needs at least \(KdfConfig.pbkdf2MinimumIterations) iterations, got \(iterations)")
            }
            do {
                let key = try KDF.Insecure.PBKDF2.deriveKey(
                    from: Array(password.utf8), salt: salt, using: .sha256,
                    outputByteCount: 32, unsafeUncheckedRounds: iterations)
                return MasterKey(key: key)
            } catch {
                throw VaultCryptoError.primitiveFailure("PBKDF2: \(error)")
            }
        case .argon2id:
            throw VaultCryptoError.unsupportedKdf(kdf.description)
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
