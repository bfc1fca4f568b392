import Foundation
import VaultCrypto
import VaultJSON

/// A vault item as the server stores and sends it (`CipherDetailsResponseModel`, camelCase JSON):
/// secret fields are ``EncString``s, metadata is plain.
///
/// Every field a newer server adds is kept in ``extra`` (here and in every sub-object), so
/// decode → encode never drops data this version does not understand.
///
/// ```swift
/// let cipher = try JSONDecoder().decode(Cipher.self, from: json)
/// let view = try cipher.decrypt(userKey: userKey)
/// view.login?.password   // the plaintext password
/// ```
public struct Cipher: Codable, Sendable, Equatable {
    /// `"cipherDetails"`, `"cipher"` or `"cipherMini"` in responses; nil in requests.
    public var object: String?
    /// The server's id (a UUID string); nil before the item was first uploaded.
    public var id: String?
    /// The owning organization; nil for a personal item.
    public var organizationId: String?
    /// The folder, if any.
    public var folderId: String?
    /// The item kind; decides which of the type-specific objects is set.
    public var type: CipherType
    /// Encrypted item name (null only in the newer sealed-blob format).
    public var name: EncString?
    /// Encrypted notes.
    public var notes: EncString?
    /// The per-cipher key, wrapped by the user (or organization) key; nil when the fields are
    /// encrypted directly with the user key.
    public var key: EncString?
    /// Login details (type 1).
    public var login: CipherLogin?
    /// Card details (type 3).
    public var card: CipherCard?
    /// Identity details (type 4).
    public var identity: CipherIdentity?
    /// Secure-note details (type 2).
    public var secureNote: CipherSecureNote?
    /// SSH key (type 5).
    public var sshKey: CipherSSHKey?
    /// Bank account details (type 6).
    public var bankAccount: CipherTextFields?
    /// Driver's license details (type 7).
    public var driversLicense: CipherTextFields?
    /// Passport details (type 8).
    public var passport: CipherTextFields?
    /// Custom fields.
    public var fields: [CipherField]?
    /// Previous passwords, newest first, at most five.
    public var passwordHistory: [CipherPasswordHistory]?
    /// Attachment metadata.
    public var attachments: [CipherAttachment]?
    /// Whether the user starred the item.
    public var favorite: Bool?
    /// Whether viewing requires the master password again.
    public var reprompt: CipherRepromptType?
    /// Whether the user may edit the item (response only).
    public var edit: Bool?
    /// Whether the user may see the password (response only; clients default to true).
    public var viewPassword: Bool?
    /// Whether the organization may use TOTP (response only).
    public var organizationUseTotp: Bool?
    /// When the server last changed the item; sent back as `lastKnownRevisionDate`.
    public var revisionDate: BitwardenDate?
    /// When the item was created.
    public var creationDate: BitwardenDate?
    /// When the item was moved to the trash; nil if not deleted.
    public var deletedDate: BitwardenDate?
    /// When the item was archived; nil if not archived.
    public var archivedDate: BitwardenDate?
    /// Collections the item belongs to (organization items).
    public var collectionIds: [String]?
    /// What the user may do with the item.
    public var permissions: CipherPermissions?
    /// Top-level fields this version does not know, kept verbatim.
    public var extra: [String: JSONValue]

    /// Creates a cipher; every field but `type` defaults to absent.
    public init(
        object: String? = nil, id: String? = nil, organizationId: String? = nil, folderId: String? = nil,
        type: CipherType, name: EncString? = nil, notes: EncString? = nil, key: EncString? = nil,
        login: CipherLogin? = nil, card: CipherCard? = nil, identity: CipherIdentity? = nil,
        secureNote: CipherSecureNote? = nil, sshKey: CipherSSHKey? = nil, bankAccount: CipherTextFields? = nil,
        driversLicense: CipherTextFields? = nil, passport: CipherTextFields? = nil, fields: [CipherField]? = nil,
        passwordHistory: [CipherPasswordHistory]? = nil, attachments: [CipherAttachment]? = nil,
        favorite: Bool? = nil, reprompt: CipherRepromptType? = nil, edit: Bool? = nil, viewPassword: Bool? = nil,
        organizationUseTotp: Bool? = nil, revisionDate: BitwardenDate? = nil, creationDate: BitwardenDate? = nil,
        deletedDate: BitwardenDate? = nil, archivedDate: BitwardenDate? = nil, collectionIds: [String]? = nil,
        permissions: CipherPermissions? = nil, extra: [String: JSONValue] = [:]
    ) {
        self.object = object
        self.id = id
        self.organizationId = organizationId
        self.folderId = folderId
        self.type = type
        self.name = name
        self.notes = notes
        self.key = key
        self.login = login
        self.card = card
        self.identity = identity
        self.secureNote = secureNote
        self.sshKey = sshKey
        self.bankAccount = bankAccount
        self.driversLicense = driversLicense
        self.passport = passport
        self.fields = fields
        self.passwordHistory = passwordHistory
        self.attachments = attachments
        self.favorite = favorite
        self.reprompt = reprompt
        self.edit = edit
        self.viewPassword = viewPassword
        self.organizationUseTotp = organizationUseTotp
        self.revisionDate = revisionDate
        self.creationDate = creationDate
        self.deletedDate = deletedDate
        self.archivedDate = archivedDate
        self.collectionIds = collectionIds
        self.permissions = permissions
        self.extra = extra
    }

    static let knownKeys: Set<String> = [
        "object", "id", "organizationId", "folderId", "type", "name", "notes", "key", "login", "card", "identity",
        "secureNote", "sshKey", "bankAccount", "driversLicense", "passport", "fields", "passwordHistory",
        "attachments", "favorite", "reprompt", "edit", "viewPassword", "organizationUseTotp", "revisionDate",
        "creationDate", "deletedDate", "archivedDate", "collectionIds", "permissions",
    ]

    /// Decodes the wire JSON (only `type` is required), keeping unknown fields in `extra`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        object = try c.optional("object")
        id = try c.optional("id")
        organizationId = try c.optional("organizationId")
        folderId = try c.optional("folderId")
        type = try c.decode(CipherType.self, forKey: "type")
        name = try c.optional("name")
        notes = try c.optional("notes")
        key = try c.optional("key")
        login = try c.optional("login")
        card = try c.optional("card")
        identity = try c.optional("identity")
        secureNote = try c.optional("secureNote")
        sshKey = try c.optional("sshKey")
        bankAccount = try c.optional("bankAccount")
        driversLicense = try c.optional("driversLicense")
        passport = try c.optional("passport")
        fields = try c.optional("fields")
        passwordHistory = try c.optional("passwordHistory")
        attachments = try c.optional("attachments")
        favorite = try c.optional("favorite")
        reprompt = try c.optional("reprompt")
        edit = try c.optional("edit")
        viewPassword = try c.optional("viewPassword")
        organizationUseTotp = try c.optional("organizationUseTotp")
        revisionDate = try c.optional("revisionDate")
        creationDate = try c.optional("creationDate")
        deletedDate = try c.optional("deletedDate")
        archivedDate = try c.optional("archivedDate")
        collectionIds = try c.optional("collectionIds")
        permissions = try c.optional("permissions")
        extra = try c.unknownFields(known: Self.knownKeys, in: decoder)
    }

    /// Encodes the known fields (nil as `null`, except the newer `bankAccount`, `driversLicense`
    /// and `passport`, which are left out), then the carried unknown fields.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AnyCodingKey.self)
        try c.put(object, "object")
        try c.put(id, "id")
        try c.put(organizationId, "organizationId")
        try c.put(folderId, "folderId")
        try c.put(type, "type")
        try c.put(name, "name")
        try c.put(notes, "notes")
        try c.put(key, "key")
        try c.put(login, "login")
        try c.put(card, "card")
        try c.put(identity, "identity")
        try c.put(secureNote, "secureNote")
        try c.put(sshKey, "sshKey")
        // Types 6–8 are newer than many servers; omit them when absent rather than send nulls.
        if let bankAccount { try c.put(bankAccount, "bankAccount") }
        if let driversLicense { try c.put(driversLicense, "driversLicense") }
        if let passport { try c.put(passport, "passport") }
        try c.put(fields, "fields")
        try c.put(passwordHistory, "passwordHistory")
        try c.put(attachments, "attachments")
        try c.put(favorite, "favorite")
        try c.put(reprompt, "reprompt")
        try c.put(edit, "edit")
        try c.put(viewPassword, "viewPassword")
        try c.put(organizationUseTotp, "organizationUseTotp")
        try c.put(revisionDate, "revisionDate")
        try c.put(creationDate, "creationDate")
        try c.put(deletedDate, "deletedDate")
        try c.put(archivedDate, "archivedDate")
        try c.put(collectionIds, "collectionIds")
        try c.put(permissions, "permissions")
        try c.putUnknown(extra, known: Self.knownKeys)
    }

    /// The `CipherRequestModel` JSON the client sends to create (`POST /api/ciphers`) or update
    /// (`PUT /api/ciphers/{id}`) this item. Response-only fields (`id`, `edit`, `revisionDate`,
    /// …) are left out; unknown fields are carried through so a newer server gets them back.
    ///
    /// - Parameter lastKnownRevisionDate: the `revisionDate` the edit was based on; the server
    ///   rejects the update if the item changed since; nil when creating.
    public func requestBody(lastKnownRevisionDate: BitwardenDate?) throws -> Data {
        Data(try SortedJSONEncoder(escapesSlashes: false).encode(CipherRequest(cipher: self, lastKnownRevisionDate: lastKnownRevisionDate)))
    }

    /// The `CipherRequestModel` JSON for an update based on this cipher's own `revisionDate`.
    public func requestBody() throws -> Data {
        try requestBody(lastKnownRevisionDate: revisionDate)
    }
}

/// The `CipherRequestModel` body (Bitwarden's cipher request body).
private struct CipherRequest: Encodable {
    let cipher: Cipher
    let lastKnownRevisionDate: BitwardenDate?

    private struct AttachmentRequest: Encodable {
        let fileName: EncString?
        let key: EncString?
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AnyCodingKey.self)
        try c.put(cipher.type, "type")
        try c.put(cipher.organizationId, "organizationId")
        try c.put(cipher.folderId, "folderId")
        try c.put(cipher.favorite ?? false, "favorite")
        try c.put(cipher.reprompt ?? CipherRepromptType.none, "reprompt")
        try c.put(cipher.key, "key")
        try c.put(cipher.name, "name")
        try c.put(cipher.notes, "notes")
        try c.put(cipher.fields, "fields")
        try c.put(cipher.passwordHistory, "passwordHistory")
        if let attachments = cipher.attachments, !attachments.isEmpty {
            // As the TS client: deprecated id → fileName map plus `attachments2` with the keys.
            var legacy: [String: EncString?] = [:]
            var current: [String: AttachmentRequest] = [:]
            for attachment in attachments {
                guard let id = attachment.id else { continue }
                legacy[id] = .some(attachment.fileName)
                current[id] = AttachmentRequest(fileName: attachment.fileName, key: attachment.key)
            }
            try c.put(legacy, "attachments")
            try c.put(current, "attachments2")
        }
        try c.put(cipher.login, "login")
        try c.put(cipher.card, "card")
        try c.put(cipher.identity, "identity")
        try c.put(cipher.secureNote, "secureNote")
        try c.put(cipher.sshKey, "sshKey")
        if let bankAccount = cipher.bankAccount { try c.put(bankAccount, "bankAccount") }
        if let driversLicense = cipher.driversLicense { try c.put(driversLicense, "driversLicense") }
        if let passport = cipher.passport { try c.put(passport, "passport") }
        try c.put(lastKnownRevisionDate, "lastKnownRevisionDate")
        try c.put(cipher.archivedDate, "archivedDate")
        try c.putUnknown(cipher.extra, known: Self.requestKeys)
    }

    static let requestKeys: Set<String> = [
        "encryptedFor", "encryptedByKeyId", "type", "organizationId", "folderId", "favorite", "reprompt", "key",
        "name", "notes", "fields", "passwordHistory", "attachments", "attachments2", "login", "card", "identity",
        "secureNote", "sshKey", "bankAccount", "driversLicense", "passport", "lastKnownRevisionDate", "archivedDate",
    ]
}
