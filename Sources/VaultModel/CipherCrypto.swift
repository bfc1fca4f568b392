import Foundation
import VaultCrypto
import VaultJSON

/// Decrypts the fields of one cipher, naming the field in every error.
struct FieldDecryptor {
    let key: SymmetricCryptoKey
    let cipherID: String?

    func fail(_ error: VaultCryptoError, _ path: String) -> VaultModelError {
        .fieldDecryptionFailed(cipherID: cipherID, field: path, underlying: error)
    }

    func string(_ value: EncString?, _ path: @autoclosure () -> String) throws -> String? {
        guard let value else { return nil }
        do {
            return try value.decryptString(key: key)
        } catch let error as VaultCryptoError {
            throw fail(error, path())
        }
    }

    func unwrapKey(_ value: EncString?, _ path: @autoclosure () -> String) throws -> SymmetricCryptoKey? {
        guard let value else { return nil }
        do {
            return try key.unwrap(value)
        } catch let error as VaultCryptoError {
            throw fail(error, path())
        }
    }

    func record<Wire: EncryptedTextRecord, View: DecryptedTextRecord>(
        _ wire: Wire?, as: View.Type, _ path: String
    ) throws -> View? {
        guard let wire else { return nil }
        var view = View()
        let wirePaths = Dictionary(uniqueKeysWithValues: Wire.encryptedFields.map { ($0.name, $0.path) })
        for field in View.textFields {
            guard let wirePath = wirePaths[field.name] else { continue }
            view[keyPath: field.path] = try string(wire[keyPath: wirePath], "\(path).\(field.name)")
        }
        view.extra = wire.extra
        return view
    }

    func textFields(_ wire: CipherTextFields?, _ path: String) throws -> TextFieldsView? {
        guard let wire else { return nil }
        var values: [String: String] = [:]
        for (name, enc) in wire.values {
            values[name] = try string(enc, "\(path).\(name)")
        }
        return TextFieldsView(values: values, extra: wire.extra)
    }
}

/// Encrypts the fields of one cipher with its field key, and re-keys carried EncStrings when
/// the field key changed (so opaque data from a newer server stays readable).
struct FieldEncryptor {
    let key: SymmetricCryptoKey
    let random: any RandomSource
    /// The key carried EncStrings are currently under, when it differs from `key`.
    let previousKey: SymmetricCryptoKey?

    func string(_ value: String?) -> EncString? {
        value.map { EncString.encrypt($0, key: key, random: random) }
    }

    /// Wraps `inner` with the field key, reusing `original` if it already wraps the same key.
    func wrapKey(_ inner: SymmetricCryptoKey?, original: EncString?) -> EncString? {
        guard let inner else { return nil }
        if let original, let unwrapped = try? key.unwrap(original), unwrapped == inner { return original }
        return key.wrap(inner, random: random)
    }

    func record<View: DecryptedTextRecord, Wire: EncryptedTextRecord>(_ view: View?, as: Wire.Type) -> Wire? {
        guard let view else { return nil }
        var wire = Wire()
        let viewPaths = Dictionary(uniqueKeysWithValues: View.textFields.map { ($0.name, $0.path) })
        for field in Wire.encryptedFields {
            guard let viewPath = viewPaths[field.name] else { continue }
            wire[keyPath: field.path] = string(view[keyPath: viewPath])
        }
        wire.extra = carry(view.extra)
        return wire
    }

    /// Unknown fields, with any EncString under the previous field key re-encrypted under the
    /// new one. Strings that are not EncStrings, or are under another key, pass unchanged.
    func carry(_ extra: [String: JSONValue]) -> [String: JSONValue] {
        guard previousKey != nil, !extra.isEmpty else { return extra }
        return extra.mapValues(rekey)
    }

    private func rekey(_ value: JSONValue) -> JSONValue {
        guard let previousKey else { return value }
        switch value {
        case .string(let text):
            guard let enc = try? EncString(text), let plain = try? enc.decrypt(key: previousKey) else { return value }
            return .string(EncString.encrypt(plain, key: key, random: random).serialized)
        case .array(let elements):
            return .array(elements.map(rekey))
        case .object(let object):
            return .object(JSONObject(object.map { ($0.key, rekey($0.value)) }))
        default:
            return value
        }
    }
}

extension Cipher {
    /// Decrypts this item.
    ///
    /// If ``key`` is set it is unwrapped with `userKey` and the fields are decrypted with that
    /// per-cipher key; otherwise the fields are decrypted with `userKey` directly. For an
    /// organization item pass the organization key as `userKey`.
    ///
    /// - Throws: ``VaultModelError/fieldDecryptionFailed(cipherID:field:underlying:)`` naming the
    ///   first field that failed, e.g. `cipher 3f2a…: login.password: authentication failed`.
    public func decrypt(userKey: SymmetricCryptoKey) throws -> CipherView {
        var cipherKey: SymmetricCryptoKey?
        if let key {
            cipherKey = try FieldDecryptor(key: userKey, cipherID: id).unwrapKey(key, "key")
        }
        let d = FieldDecryptor(key: cipherKey ?? userKey, cipherID: id)

        var view = CipherView(type: type, name: try d.string(name, "name"), notes: try d.string(notes, "notes"))
        view.object = object
        view.id = id
        view.organizationId = organizationId
        view.folderId = folderId
        view.cipherKey = cipherKey
        view.provenance = CipherView.Provenance(wrappedKey: key, fieldKey: d.key, source: self)
        if let login {
            view.login = LoginView(
                username: try d.string(login.username, "login.username"),
                password: try d.string(login.password, "login.password"),
                passwordRevisionDate: login.passwordRevisionDate,
                totp: try d.string(login.totp, "login.totp"),
                uris: try login.uris.map { uris in
                    try uris.enumerated().map { index, uri in
                        var view = LoginUriView(
                            uri: try d.string(uri.uri, "login.uris[\(index)].uri"),
                            uriChecksum: try d.string(uri.uriChecksum, "login.uris[\(index)].uriChecksum"),
                            match: uri.match, extra: uri.extra)
                        view.decrypted = Remembered((view.uri, view.uriChecksum))
                        return view
                    }
                },
                fido2Credentials: try login.fido2Credentials.map { credentials in
                    try credentials.enumerated().map { index, credential in
                        var view = try d.record(credential, as: Fido2CredentialView.self, "login.fido2Credentials[\(index)]")!
                        view.creationDate = credential.creationDate
                        return view
                    }
                },
                autofillOnPageLoad: login.autofillOnPageLoad,
                uri: try d.string(login.uri, "login.uri"),
                extra: login.extra)
        }
        view.card = try d.record(card, as: CardView.self, "card")
        view.identity = try d.record(identity, as: IdentityView.self, "identity")
        view.secureNote = secureNote
        view.sshKey = try d.record(sshKey, as: SSHKeyView.self, "sshKey")
        view.bankAccount = try d.textFields(bankAccount, "bankAccount")
        view.driversLicense = try d.textFields(driversLicense, "driversLicense")
        view.passport = try d.textFields(passport, "passport")
        view.fields = try fields.map { fields in
            try fields.enumerated().map { index, field in
                FieldView(
                    type: field.type, name: try d.string(field.name, "fields[\(index)].name"),
                    value: try d.string(field.value, "fields[\(index)].value"), linkedId: field.linkedId, extra: field.extra)
            }
        }
        view.passwordHistory = try passwordHistory.map { history in
            try history.enumerated().map { index, entry in
                PasswordHistoryView(
                    password: try d.string(entry.password, "passwordHistory[\(index)].password"),
                    lastUsedDate: entry.lastUsedDate, extra: entry.extra)
            }
        }
        view.attachments = try attachments.map { attachments in
            try attachments.enumerated().map { index, attachment in
                var view = AttachmentView(
                    id: attachment.id, url: attachment.url,
                    fileName: try d.string(attachment.fileName, "attachments[\(index)].fileName"),
                    key: try d.unwrapKey(attachment.key, "attachments[\(index)].key"),
                    size: attachment.size, sizeName: attachment.sizeName, extra: attachment.extra)
                view.wrappedKey = CipherView.Provenance(wrappedKey: attachment.key)
                return view
            }
        }
        view.favorite = favorite
        view.reprompt = reprompt
        view.edit = edit
        view.viewPassword = viewPassword
        view.organizationUseTotp = organizationUseTotp
        view.revisionDate = revisionDate
        view.creationDate = creationDate
        view.deletedDate = deletedDate
        view.archivedDate = archivedDate
        view.collectionIds = collectionIds
        view.permissions = permissions
        view.extra = extra
        return view
    }
}

extension CipherView {
    /// This item with a fresh random per-cipher key, replacing any existing one. The next
    /// ``encrypt(userKey:random:generateCipherKey:)`` wraps it with the user key and re-encrypts
    /// every field (and carried EncStrings) under it.
    public func withNewCipherKey(random: any RandomSource = SystemRandomSource()) -> CipherView {
        var copy = self
        copy.cipherKey = SymmetricCryptoKey.generate(using: random)
        return copy
    }

    /// Encrypts this item for upload or storage.
    ///
    /// Fields are encrypted with ``cipherKey`` when set (wrapped with `userKey` into
    /// ``Cipher/key``; an unchanged wrapped key is reused), otherwise with `userKey` directly.
    /// With `generateCipherKey`, an item without a per-cipher key gets a new one first, as
    /// current Bitwarden clients do. Plain metadata and unknown fields are carried unchanged;
    /// EncStrings inside unknown fields are re-encrypted if the field key changed.
    ///
    /// Login URI checksums: with `sha256`, every `uriChecksum` is regenerated as
    /// base64(SHA-256(uri)), as the Bitwarden SDK does before encrypting. Without it, checksums
    /// are kept as they are, and a URI edited since decryption whose checksum was not updated
    /// throws ``VaultModelError/staleURIChecksum(cipherID:field:)`` rather than upload a URI
    /// other Bitwarden clients would silently drop.
    public func encrypt(
        userKey: SymmetricCryptoKey, random: any RandomSource = SystemRandomSource(), generateCipherKey: Bool = false,
        sha256: (@Sendable ([UInt8]) -> [UInt8])? = nil
    ) throws -> Cipher {
        let source = (generateCipherKey && cipherKey == nil) ? withNewCipherKey(random: random) : self
        let fieldKey = source.cipherKey ?? userKey
        let previousKey = source.provenance.fieldKey.flatMap { $0 == fieldKey ? nil : $0 }
        let e = FieldEncryptor(key: fieldKey, random: random, previousKey: previousKey)
        let wrapping = FieldEncryptor(key: userKey, random: random, previousKey: nil)

        var cipher = Cipher(type: source.type)
        cipher.object = source.object
        cipher.id = source.id
        cipher.organizationId = source.organizationId
        cipher.folderId = source.folderId
        cipher.key = wrapping.wrapKey(source.cipherKey, original: source.provenance.wrappedKey)
        cipher.name = e.string(source.name)
        cipher.notes = e.string(source.notes)
        if var login = source.login {
            for index in login.uris?.indices ?? [].indices {
                let uri = login.uris![index]
                if let sha256 {
                    login.uris![index].uriChecksum = uri.uri.map { Base64.encode(sha256(Array($0.utf8))) }
                } else if let decrypted = uri.decrypted.value, uri.uri != decrypted.uri,
                          uri.uriChecksum != nil, uri.uriChecksum == decrypted.checksum {
                    throw VaultModelError.staleURIChecksum(cipherID: source.id, field: "login.uris[\(index)]")
                }
            }
            cipher.login = CipherLogin(
                username: e.string(login.username),
                password: e.string(login.password),
                passwordRevisionDate: login.passwordRevisionDate,
                totp: e.string(login.totp),
                uris: login.uris?.map {
                    CipherLoginUri(uri: e.string($0.uri), uriChecksum: e.string($0.uriChecksum), match: $0.match, extra: e.carry($0.extra))
                },
                fido2Credentials: login.fido2Credentials?.map {
                    var credential = e.record($0, as: CipherFido2Credential.self)!
                    credential.creationDate = $0.creationDate
                    return credential
                },
                autofillOnPageLoad: login.autofillOnPageLoad,
                uri: e.string(login.uri),
                extra: e.carry(login.extra))
        }
        cipher.card = e.record(source.card, as: CipherCard.self)
        cipher.identity = e.record(source.identity, as: CipherIdentity.self)
        cipher.secureNote = source.secureNote.map { CipherSecureNote(type: $0.type, extra: e.carry($0.extra)) }
        cipher.sshKey = e.record(source.sshKey, as: CipherSSHKey.self)
        func textFields(_ view: TextFieldsView?) -> CipherTextFields? {
            view.map { CipherTextFields(values: $0.values.mapValues { EncString.encrypt($0, key: fieldKey, random: random) }, extra: e.carry($0.extra)) }
        }
        cipher.bankAccount = textFields(source.bankAccount)
        cipher.driversLicense = textFields(source.driversLicense)
        cipher.passport = textFields(source.passport)
        cipher.fields = source.fields?.map {
            CipherField(type: $0.type, name: e.string($0.name), value: e.string($0.value), linkedId: $0.linkedId, extra: e.carry($0.extra))
        }
        cipher.passwordHistory = source.passwordHistory?.map {
            CipherPasswordHistory(password: e.string($0.password), lastUsedDate: $0.lastUsedDate, extra: e.carry($0.extra))
        }
        cipher.attachments = source.attachments?.map {
            CipherAttachment(
                id: $0.id, url: $0.url, fileName: e.string($0.fileName), key: e.wrapKey($0.key, original: $0.wrappedKey.wrappedKey),
                size: $0.size, sizeName: $0.sizeName, extra: e.carry($0.extra))
        }
        cipher.favorite = source.favorite
        cipher.reprompt = source.reprompt
        cipher.edit = source.edit
        cipher.viewPassword = source.viewPassword
        cipher.organizationUseTotp = source.organizationUseTotp
        cipher.revisionDate = source.revisionDate
        cipher.creationDate = source.creationDate
        cipher.deletedDate = source.deletedDate
        cipher.archivedDate = source.archivedDate
        cipher.collectionIds = source.collectionIds
        cipher.permissions = source.permissions
        cipher.extra = e.carry(source.extra)
        return cipher
    }
}
