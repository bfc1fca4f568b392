import VaultCrypto

extension Cipher {
    /// The key this item's fields, attachment file names and attachment keys are encrypted
    /// with: its own key (``key``, unwrapped with `userKey`) when it has one, otherwise
    /// `userKey` itself (pass the organization key for an organization item).
    ///
    /// ```swift
    /// let itemKey = try cipher.fieldKey(userKey: userKey)
    /// let sealed = SealedAttachment.seal(fileName: "scan.pdf", contents: bytes, itemKey: itemKey)
    /// ```
    ///
    /// - Throws: ``VaultModelError/fieldDecryptionFailed(cipherID:field:underlying:)`` for `key`
    ///   when the item's own key does not unwrap.
    public func fieldKey(userKey: SymmetricCryptoKey) throws -> SymmetricCryptoKey {
        try FieldDecryptor(key: userKey, cipherID: id).unwrapKey(key, "key") ?? userKey
    }

    /// The attachment with this id, if the item has it.
    public func attachment(id attachmentId: String) -> CipherAttachment? {
        attachments?.first { $0.id == attachmentId }
    }
}
