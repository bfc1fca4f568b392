import VaultCrypto

/// Errors from reading, decrypting and encrypting vault items. Each message names the item and
/// field so the user knows what to look at.
public enum VaultModelError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A date string is not RFC 3339 with 0–7 fractional digits and `Z` or `±hh:mm`.
    case malformedDate(String, reason: String)
    /// One field of a cipher failed to decrypt. `field` is a path such as `login.password`
    /// or `fields[2].value`.
    case fieldDecryptionFailed(cipherID: String?, field: String, underlying: VaultCryptoError)
    /// A login URI was edited but its checksum still matches the old URI; Bitwarden clients
    /// would drop the URI. Encrypt with a `sha256` function so checksums are regenerated.
    case staleURIChecksum(cipherID: String?, field: String)

    /// What failed, naming the item (`<new>` before it has an id) and the field, and what to do.
    public var description: String {
        switch self {
        case .malformedDate(let text, let reason):
            return "malformed date \"\(text)\": \(reason); expected RFC 3339 like 2024-05-01T12:30:45.1234567Z"
        case .fieldDecryptionFailed(let cipherID, let field, let underlying):
            let detail: String
            switch underlying {
            case .authenticationFailed:
                detail = "authentication failed (wrong key or tampered data)"
            case .invalidEncString, .invalidEncArrayBuffer, .invalidKeyLength, .wrongKeyType, .decryptionFailed, .invalidUTF8, .unsupportedKdf,
                 .invalidKdfParameters, .primitiveFailure:
                detail = underlying.description
            }
            return "cipher \(cipherID ?? "<new>"): \(field): \(detail)"
        case .staleURIChecksum(let cipherID, let field):
            return "cipher \(cipherID ?? "<new>"): \(field): the URI changed but its checksum did not; "
                + "pass sha256: to encrypt(userKey:) so checksums are regenerated, or Bitwarden clients will drop the URI"
        }
    }
}
