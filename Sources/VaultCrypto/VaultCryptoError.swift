/// Errors from Bitwarden-compatible cryptography. Each message says what went wrong and what
/// the caller can do about it.
public enum VaultCryptoError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The text is not an EncString we can read.
    case invalidEncString(String)
    /// The bytes are not an encrypted file body (`EncArrayBuffer`) we can read.
    case invalidEncArrayBuffer(String)
    /// A key had the wrong number of bytes.
    case invalidKeyLength(expected: Int, actual: Int)
    /// The HMAC did not verify: the key is wrong or the data was altered.
    case authenticationFailed
    /// The EncString type cannot be used with this key (e.g. an unauthenticated type-0 string
    /// presented to a 64-byte key: Bitwarden refuses that downgrade).
    case wrongKeyType(String)
    /// AES-CBC decryption or its PKCS#7 padding failed.
    case decryptionFailed
    /// Decrypted bytes are not valid UTF-8.
    case invalidUTF8
    /// The account uses a key-derivation function this build does not implement.
    case unsupportedKdf(String)
    /// KDF parameters outside what Bitwarden accepts.
    case invalidKdfParameters(String)
    /// The underlying crypto library failed.
    case primitiveFailure(String)

    /// What went wrong and, where it helps, what to check, e.g. `"invalid key length: expected 64 bytes, got 32"`.
    public var description: String {
        switch self {
        case .invalidEncString(let reason):
            return "invalid EncString: \(reason)"
        case .invalidEncArrayBuffer(let reason):
            return "invalid encrypted file (EncArrayBuffer): \(reason)"
        case .invalidKeyLength(let expected, let actual):
            return "invalid key length: expected \(expected) bytes, got \(actual)"
        case .authenticationFailed:
            return "authentication failed (HMAC mismatch): wrong key, or the data was tampered with"
        case .wrongKeyType(let reason):
            return "wrong key type: \(reason)"
        case .decryptionFailed:
            return "decryption failed (bad padding): wrong key or corrupt ciphertext"
        case .invalidUTF8:
            return "decrypted bytes are not valid UTF-8"
        case .unsupportedKdf(let name):
            return "unsupported KDF \(name): VaultLog implements PBKDF2-SHA256 and Argon2id; check the server's prelogin answer or the stored account"
        case .invalidKdfParameters(let reason):
            return "invalid KDF parameters: \(reason)"
        case .primitiveFailure(let reason):
            return "crypto primitive failed: \(reason)"
        }
    }
}
