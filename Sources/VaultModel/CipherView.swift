import Foundation
import VaultCrypto
import VaultJSON

/// A decrypted vault item: what the user sees and edits. Produced by
/// ``Cipher/decrypt(userKey:)`` and turned back into a ``Cipher`` by
/// ``encrypt(userKey:random:generateCipherKey:)``.
///
/// Plain metadata and unknown fields (``extra``, still encrypted where they were) are carried
/// unchanged. Descriptions never show key material or passwords.
///
/// ```swift
/// var view = try cipher.decrypt(userKey: userKey)
/// view.login?.password = "correct horse battery staple"
/// let edited = view.applyingPasswordHistory(original: try cipher.decrypt(userKey: userKey), now: now)
/// let upload = try edited.encrypt(userKey: userKey)
/// ```
public struct CipherView: Sendable, Equatable {
    /// `"cipherDetails"` etc., as received.
    public var object: String?
    /// The server's id; nil for an item not yet uploaded.
    public var id: String?
    /// The owning organization; nil for a personal item.
    public var organizationId: String?
    /// The folder, if any.
    public var folderId: String?
    /// The item kind.
    public var type: CipherType
    /// Item name.
    public var name: String?
    /// Notes (the text of a secure note).
    public var notes: String?
    /// The per-cipher key the fields are encrypted with; nil means the user key is used
    /// directly. Key material: never printed.
    public var cipherKey: SymmetricCryptoKey?
    /// Login details (type 1).
    public var login: LoginView?
    /// Card details (type 3).
    public var card: CardView?
    /// Identity details (type 4).
    public var identity: IdentityView?
    /// Secure-note details (type 2); nothing in them is encrypted.
    public var secureNote: CipherSecureNote?
    /// SSH key (type 5).
    public var sshKey: SSHKeyView?
    /// Bank account details (type 6).
    public var bankAccount: TextFieldsView?
    /// Driver's license details (type 7).
    public var driversLicense: TextFieldsView?
    /// Passport details (type 8).
    public var passport: TextFieldsView?
    /// Custom fields.
    public var fields: [FieldView]?
    /// Previous passwords, newest first.
    public var passwordHistory: [PasswordHistoryView]?
    /// Attachment metadata.
    public var attachments: [AttachmentView]?
    /// Whether the user starred the item.
    public var favorite: Bool?
    /// Whether viewing requires the master password again.
    public var reprompt: CipherRepromptType?
    /// Whether the user may edit the item.
    public var edit: Bool?
    /// Whether the user may see the password.
    public var viewPassword: Bool?
    /// Whether the organization may use TOTP.
    public var organizationUseTotp: Bool?
    /// When the server last changed the item.
    public var revisionDate: BitwardenDate?
    /// When the item was created.
    public var creationDate: BitwardenDate?
    /// When the item was moved to the trash.
    public var deletedDate: BitwardenDate?
    /// When the item was archived.
    public var archivedDate: BitwardenDate?
    /// Collections the item belongs to.
    public var collectionIds: [String]?
    /// What the user may do with the item.
    public var permissions: CipherPermissions?
    /// Top-level fields this version does not know, exactly as received (still encrypted).
    public var extra: [String: JSONValue]

    /// Where this view came from, so re-encryption can reuse the wrapped key and re-key opaque
    /// data. Not part of equality.
    var provenance = Provenance()

    struct Provenance: Sendable, Equatable {
        /// `cipher.key` as received.
        var wrappedKey: EncString?
        /// The key the fields were decrypted with (cipher key or user key).
        var fieldKey: SymmetricCryptoKey?
        /// The encrypted item this view was decrypted from.
        var source: Cipher?
        static func == (lhs: Provenance, rhs: Provenance) -> Bool { true }
    }

    /// The local version this view was read from: the encrypted item ``Cipher/decrypt(userKey:)``
    /// made it from (nil for a view built by hand). A save sends it along as the edit's base,
    /// so a save from a view read before another save of the same item merges with that save
    /// instead of dropping it. Set it to nil to save over whatever is current; set it to the
    /// version the view's fields came from when they were copied by hand. Not part of equality.
    public var localBase: Cipher? {
        get { provenance.source }
        set { provenance.source = newValue }
    }

    /// Creates a new item; pass the details for its type.
    public init(
        type: CipherType, name: String?, notes: String? = nil, id: String? = nil, organizationId: String? = nil,
        folderId: String? = nil, cipherKey: SymmetricCryptoKey? = nil, login: LoginView? = nil, card: CardView? = nil,
        identity: IdentityView? = nil, secureNote: CipherSecureNote? = nil, sshKey: SSHKeyView? = nil,
        bankAccount: TextFieldsView? = nil, driversLicense: TextFieldsView? = nil, passport: TextFieldsView? = nil,
        fields: [FieldView]? = nil, passwordHistory: [PasswordHistoryView]? = nil, attachments: [AttachmentView]? = nil,
        favorite: Bool? = false, reprompt: CipherRepromptType? = CipherRepromptType.none, revisionDate: BitwardenDate? = nil,
        creationDate: BitwardenDate? = nil, extra: [String: JSONValue] = [:]
    ) {
        self.type = type
        self.name = name
        self.notes = notes
        self.id = id
        self.organizationId = organizationId
        self.folderId = folderId
        self.cipherKey = cipherKey
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
        self.revisionDate = revisionDate
        self.creationDate = creationDate
        self.extra = extra
    }
}

/// A decrypted object whose fields are all optional text.
protocol DecryptedTextRecord: Sendable {
    init()
    var extra: [String: JSONValue] { get set }
    /// Wire name and storage of each text field.
    static var textFields: [(name: String, path: WritableKeyPath<Self, String?>)] { get }
}

/// Decrypted details of a bank account, driver's license or passport: wire name → text.
public struct TextFieldsView: Sendable, Equatable {
    /// Decrypted text by wire name (e.g. `"accountNumber"`).
    public var values: [String: String]
    /// Non-text values, as received.
    public var extra: [String: JSONValue]

    /// Creates the details.
    public init(values: [String: String] = [:], extra: [String: JSONValue] = [:]) {
        self.values = values
        self.extra = extra
    }
}

/// A decrypted custom field.
public struct FieldView: Sendable, Equatable {
    /// The field kind; hidden fields are tracked in password history.
    public var type: FieldType?
    /// Field name.
    public var name: String?
    /// Field value.
    public var value: String?
    /// For linked fields, which property it mirrors.
    public var linkedId: Int?
    /// Fields this version does not know, as received.
    public var extra: [String: JSONValue]

    /// Creates a custom field.
    public init(type: FieldType?, name: String?, value: String?, linkedId: Int? = nil, extra: [String: JSONValue] = [:]) {
        self.type = type
        self.name = name
        self.value = value
        self.linkedId = linkedId
        self.extra = extra
    }
}

/// A decrypted password-history entry.
public struct PasswordHistoryView: Sendable, Equatable {
    /// The old password, or `"<field name>: <old value>"` for a hidden field.
    public var password: String?
    /// When it stopped being used.
    public var lastUsedDate: BitwardenDate?
    /// Fields this version does not know, as received.
    public var extra: [String: JSONValue]

    /// Creates an entry.
    public init(password: String?, lastUsedDate: BitwardenDate?, extra: [String: JSONValue] = [:]) {
        self.password = password
        self.lastUsedDate = lastUsedDate
        self.extra = extra
    }
}

/// Decrypted attachment metadata. `key` decrypts the file body; never printed.
public struct AttachmentView: Sendable, Equatable {
    /// The attachment id.
    public var id: String?
    /// Download URL.
    public var url: String?
    /// File name.
    public var fileName: String?
    /// The attachment's own key.
    public var key: SymmetricCryptoKey?
    /// Size in bytes, as a decimal string.
    public var size: String?
    /// Human-readable size.
    public var sizeName: String?
    /// Fields this version does not know, as received.
    public var extra: [String: JSONValue]
    /// The wrapped key as received, reused when unchanged. Not part of equality.
    var wrappedKey = CipherView.Provenance()

    /// Creates attachment metadata.
    public init(
        id: String? = nil, url: String? = nil, fileName: String? = nil, key: SymmetricCryptoKey? = nil,
        size: String? = nil, sizeName: String? = nil, extra: [String: JSONValue] = [:]
    ) {
        self.id = id
        self.url = url
        self.fileName = fileName
        self.key = key
        self.size = size
        self.sizeName = sizeName
        self.extra = extra
    }
}

/// A value carried alongside a view for bookkeeping that never affects equality.
struct Remembered<Value: Sendable>: Sendable, Equatable {
    var value: Value?
    init(_ value: Value?) { self.value = value }
    static func == (lhs: Remembered, rhs: Remembered) -> Bool { true }
}
