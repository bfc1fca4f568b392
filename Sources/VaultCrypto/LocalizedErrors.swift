import Foundation

// Apple platforms show `localizedDescription` (alerts, logs); it is the same text as
// `description`: what failed, what it concerns, and what to do.

extension VaultCryptoError: LocalizedError {
    /// The same text as ``VaultCryptoError/description``.
    public var errorDescription: String? { description }
}

extension SecretFileError: LocalizedError {
    /// The same text as ``SecretFileError/description``.
    public var errorDescription: String? { description }
}
