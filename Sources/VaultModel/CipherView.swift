import Foundation
import VaultCrypto

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
        static func == (lhs: Provenance, rhs: Provenance) -> Bool { true }
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

/// Decrypted login details.
public struct LoginView: Sendable, Equatable {
    /// Username.
    public var username: String?
    /// Password.
    public var password: String?
    /// When the password last changed.
    public var passwordRevisionDate: BitwardenDate?
    /// TOTP secret or `otpauth://` URI.
    public var totp: String?
    /// Websites and apps.
    public var uris: [LoginUriView]?
    /// Stored passkeys.
    public var fido2Credentials: [Fido2CredentialView]?
    /// Whether to auto-fill on page load.
    public var autofillOnPageLoad: Bool?
    /// Legacy single URI.
    public var uri: String?
    /// Fields this version does not know, as received.
    public var extra: [String: JSONValue]

    /// Creates login details.
    public init(
        username: String? = nil, password: String? = nil, passwordRevisionDate: BitwardenDate? = nil,
        totp: String? = nil, uris: [LoginUriView]? = nil, fido2Credentials: [Fido2CredentialView]? = nil,
        autofillOnPageLoad: Bool? = nil, uri: String? = nil, extra: [String: JSONValue] = [:]
    ) {
        self.username = username
        self.password = password
        self.passwordRevisionDate = passwordRevisionDate
        self.totp = totp
        self.uris = uris
        self.fido2Credentials = fido2Credentials
        self.autofillOnPageLoad = autofillOnPageLoad
        self.uri = uri
        self.extra = extra
    }
}

/// A decrypted login URI.
public struct LoginUriView: Sendable, Equatable {
    /// The URI.
    public var uri: String?
    /// Base64 SHA-256 of the URI. Bitwarden clients drop a URI whose checksum does not match
    /// (for items with a per-cipher key), so pass `sha256:` to
    /// ``CipherView/encrypt(userKey:random:generateCipherKey:sha256:)`` to regenerate it.
    public var uriChecksum: String?
    /// How the URI is matched.
    public var match: UriMatchType?
    /// Fields this version does not know, as received.
    public var extra: [String: JSONValue]
    /// The URI and checksum as decrypted, to catch a checksum left stale by an edit. Not part
    /// of equality.
    var decrypted = Remembered<(uri: String?, checksum: String?)>(nil)

    /// Creates a login URI.
    public init(uri: String?, uriChecksum: String? = nil, match: UriMatchType? = nil, extra: [String: JSONValue] = [:]) {
        self.uri = uri
        self.uriChecksum = uriChecksum
        self.match = match
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

/// A decrypted passkey. `keyValue` is a private key: never printed.
public struct Fido2CredentialView: DecryptedTextRecord, Equatable {
    /// Credential id.
    public var credentialId: String?
    /// Key type (`"public-key"`).
    public var keyType: String?
    /// Algorithm (`"ECDSA"`).
    public var keyAlgorithm: String?
    /// Curve (`"P-256"`).
    public var keyCurve: String?
    /// Private key (base64 PKCS#8).
    public var keyValue: String?
    /// Relying-party id.
    public var rpId: String?
    /// Relying-party name.
    public var rpName: String?
    /// User handle.
    public var userHandle: String?
    /// User name.
    public var userName: String?
    /// User display name.
    public var userDisplayName: String?
    /// Signature counter, as text.
    public var counter: String?
    /// Discoverable flag, as text (`"true"`/`"false"`).
    public var discoverable: String?
    /// When the passkey was created.
    public var creationDate: BitwardenDate?
    /// Fields this version does not know, as received.
    public var extra: [String: JSONValue] = [:]

    /// Creates an empty credential; set the fields you need.
    public init() {}

    static var textFields: [(name: String, path: WritableKeyPath<Self, String?>)] {
        [
            ("credentialId", \.credentialId), ("keyType", \.keyType), ("keyAlgorithm", \.keyAlgorithm),
            ("keyCurve", \.keyCurve), ("keyValue", \.keyValue), ("rpId", \.rpId), ("rpName", \.rpName),
            ("userHandle", \.userHandle), ("userName", \.userName), ("userDisplayName", \.userDisplayName),
            ("counter", \.counter), ("discoverable", \.discoverable),
        ]
    }
}

/// Decrypted card details.
public struct CardView: DecryptedTextRecord, Equatable {
    /// Cardholder name.
    public var cardholderName: String?
    /// Brand.
    public var brand: String?
    /// Card number.
    public var number: String?
    /// Expiry month.
    public var expMonth: String?
    /// Expiry year.
    public var expYear: String?
    /// Security code.
    public var code: String?
    /// Fields this version does not know, as received.
    public var extra: [String: JSONValue] = [:]

    /// Creates empty card details; set the fields you need.
    public init() {}

    static var textFields: [(name: String, path: WritableKeyPath<Self, String?>)] {
        [("cardholderName", \.cardholderName), ("brand", \.brand), ("number", \.number),
         ("expMonth", \.expMonth), ("expYear", \.expYear), ("code", \.code)]
    }
}

/// Decrypted identity details.
public struct IdentityView: DecryptedTextRecord, Equatable {
    /// Title.
    public var title: String?
    /// First name.
    public var firstName: String?
    /// Middle name.
    public var middleName: String?
    /// Last name.
    public var lastName: String?
    /// Address line 1.
    public var address1: String?
    /// Address line 2.
    public var address2: String?
    /// Address line 3.
    public var address3: String?
    /// City.
    public var city: String?
    /// State or province.
    public var state: String?
    /// Postal code.
    public var postalCode: String?
    /// Country.
    public var country: String?
    /// Company.
    public var company: String?
    /// Email address.
    public var email: String?
    /// Phone number.
    public var phone: String?
    /// Social security number.
    public var ssn: String?
    /// User name.
    public var username: String?
    /// Passport number.
    public var passportNumber: String?
    /// License number.
    public var licenseNumber: String?
    /// Fields this version does not know, as received.
    public var extra: [String: JSONValue] = [:]

    /// Creates empty identity details; set the fields you need.
    public init() {}

    static var textFields: [(name: String, path: WritableKeyPath<Self, String?>)] {
        [("title", \.title), ("firstName", \.firstName), ("middleName", \.middleName), ("lastName", \.lastName),
         ("address1", \.address1), ("address2", \.address2), ("address3", \.address3), ("city", \.city),
         ("state", \.state), ("postalCode", \.postalCode), ("country", \.country), ("company", \.company),
         ("email", \.email), ("phone", \.phone), ("ssn", \.ssn), ("username", \.username),
         ("passportNumber", \.passportNumber), ("licenseNumber", \.licenseNumber)]
    }
}

/// A decrypted SSH key. `privateKey` is never printed.
public struct SSHKeyView: DecryptedTextRecord, Equatable {
    /// Private key (OpenSSH format).
    public var privateKey: String?
    /// Public key.
    public var publicKey: String?
    /// Fingerprint (wire name `keyFingerprint`).
    public var fingerprint: String?
    /// Fields this version does not know, as received.
    public var extra: [String: JSONValue] = [:]

    /// Creates an empty SSH key; set the fields you need.
    public init() {}

    static var textFields: [(name: String, path: WritableKeyPath<Self, String?>)] {
        [("privateKey", \.privateKey), ("publicKey", \.publicKey), ("keyFingerprint", \.fingerprint)]
    }
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
