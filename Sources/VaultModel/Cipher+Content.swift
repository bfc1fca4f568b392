import Foundation

extension Cipher {
    /// Whether `other` holds exactly this item's content: every field a client writes, byte for
    /// byte (each encrypted field is a fresh encryption, so equal ciphertext means the same
    /// write), ignoring what the server assigns or reports (id, revision and creation dates,
    /// the trash date, permissions, unknown extra fields) and the defaults a server fills in for
    /// an absent favourite flag or reprompt type, and an empty list for none.
    ///
    /// This is how the resolver recognises its own write on the server when the answer to it
    /// was lost: another device's change, even one that keeps the name (a favourite flag, a
    /// folder move, an attachment, a re-encryption), makes the content differ.
    public func sameContent(as other: Cipher) -> Bool {
        content == other.content
    }

    /// An empty list and no list are the same content (servers write either for "none").
    private static func nonEmpty<Element>(_ list: [Element]?) -> [Element]? {
        (list?.isEmpty ?? true) ? nil : list
    }

    /// The fields ``sameContent(as:)`` compares.
    private var content: Cipher {
        var copy = Cipher(type: type)
        copy.organizationId = organizationId
        copy.folderId = folderId
        copy.name = name
        copy.notes = notes
        copy.key = key
        copy.login = login.map {
            var login = $0
            login.extra = [:]
            login.uris = Self.nonEmpty(login.uris?.map { var uri = $0; uri.extra = [:]; return uri })
            login.fido2Credentials = Self.nonEmpty(login.fido2Credentials)
            return login
        }
        copy.card = card
        copy.identity = identity
        copy.secureNote = secureNote
        copy.sshKey = sshKey
        copy.bankAccount = bankAccount
        copy.driversLicense = driversLicense
        copy.passport = passport
        copy.fields = Self.nonEmpty(fields)
        copy.passwordHistory = Self.nonEmpty(passwordHistory)
        // Attachments by id: their metadata is the server's, but one added or removed is a change.
        copy.attachments = (attachments ?? []).isEmpty ? nil
            : attachments!.sorted { ($0.id ?? "") < ($1.id ?? "") }.map { CipherAttachment(id: $0.id) }
        copy.favorite = favorite ?? false
        copy.reprompt = reprompt ?? CipherRepromptType.none
        copy.archivedDate = archivedDate
        return copy
    }
}
