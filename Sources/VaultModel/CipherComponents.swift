import Foundation
import VaultCrypto

/// A wire object made of optional EncString fields plus carried unknown fields. Card,
/// identity and SSH key share this shape, so they share one decoder and encoder.
protocol EncryptedTextRecord: Sendable, Codable {
    init()
    /// Fields this version does not know, kept verbatim.
    var extra: [String: JSONValue] { get set }
    /// Wire name and storage of each encrypted text field.
    static var encryptedFields: [(name: String, path: WritableKeyPath<Self, EncString?>)] { get }
}

extension EncryptedTextRecord {
    static var knownKeys: Set<String> { Set(encryptedFields.map(\.name)) }

    init(decodingRecordFrom decoder: any Decoder) throws {
        self.init()
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        for field in Self.encryptedFields {
            self[keyPath: field.path] = try c.optional(field.name)
        }
        extra = try c.unknownFields(known: Self.knownKeys)
    }

    func encodeRecord(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AnyCodingKey.self)
        for field in Self.encryptedFields {
            try c.put(self[keyPath: field.path], field.name)
        }
        try c.putUnknown(extra, known: Self.knownKeys)
    }
}

/// Login details of a cipher (`login`): username, password, TOTP seed, URIs and passkeys.
public struct CipherLogin: Codable, Sendable, Equatable {
    /// Encrypted username.
    public var username: EncString?
    /// Encrypted password.
    public var password: EncString?
    /// When the password last changed.
    public var passwordRevisionDate: BitwardenDate?
    /// Encrypted TOTP secret or `otpauth://` URI.
    public var totp: EncString?
    /// Websites and apps this login is for.
    public var uris: [CipherLoginUri]?
    /// Stored passkeys.
    public var fido2Credentials: [CipherFido2Credential]?
    /// Whether to auto-fill on page load (nil = user default).
    public var autofillOnPageLoad: Bool?
    /// Legacy single encrypted URI, still sent by some servers.
    public var uri: EncString?
    /// Fields this version does not know, kept verbatim.
    public var extra: [String: JSONValue]

    /// Creates login details.
    public init(
        username: EncString? = nil, password: EncString? = nil, passwordRevisionDate: BitwardenDate? = nil,
        totp: EncString? = nil, uris: [CipherLoginUri]? = nil, fido2Credentials: [CipherFido2Credential]? = nil,
        autofillOnPageLoad: Bool? = nil, uri: EncString? = nil, extra: [String: JSONValue] = [:]
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

    static let knownKeys: Set<String> = [
        "username", "password", "passwordRevisionDate", "totp", "uris", "fido2Credentials", "autofillOnPageLoad", "uri",
    ]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        username = try c.optional("username")
        password = try c.optional("password")
        passwordRevisionDate = try c.optional("passwordRevisionDate")
        totp = try c.optional("totp")
        uris = try c.optional("uris")
        fido2Credentials = try c.optional("fido2Credentials")
        autofillOnPageLoad = try c.optional("autofillOnPageLoad")
        uri = try c.optional("uri")
        extra = try c.unknownFields(known: Self.knownKeys)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AnyCodingKey.self)
        try c.put(username, "username")
        try c.put(password, "password")
        try c.put(passwordRevisionDate, "passwordRevisionDate")
        try c.put(totp, "totp")
        try c.put(uris, "uris")
        try c.put(fido2Credentials, "fido2Credentials")
        try c.put(autofillOnPageLoad, "autofillOnPageLoad")
        if let uri { try c.put(uri, "uri") }
        try c.putUnknown(extra, known: Self.knownKeys)
    }
}

/// One website or app of a login (`login.uris[]`).
public struct CipherLoginUri: Codable, Sendable, Equatable {
    /// Encrypted URI.
    public var uri: EncString?
    /// Encrypted base64 SHA-256 of the URI, used by clients to detect tampering.
    public var uriChecksum: EncString?
    /// How the URI is matched (nil = user default).
    public var match: UriMatchType?
    /// Fields this version does not know, kept verbatim.
    public var extra: [String: JSONValue]

    /// Creates a login URI.
    public init(uri: EncString? = nil, uriChecksum: EncString? = nil, match: UriMatchType? = nil, extra: [String: JSONValue] = [:]) {
        self.uri = uri
        self.uriChecksum = uriChecksum
        self.match = match
        self.extra = extra
    }

    static let knownKeys: Set<String> = ["uri", "uriChecksum", "match"]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        uri = try c.optional("uri")
        uriChecksum = try c.optional("uriChecksum")
        match = try c.optional("match")
        extra = try c.unknownFields(known: Self.knownKeys)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AnyCodingKey.self)
        try c.put(uri, "uri")
        try c.put(uriChecksum, "uriChecksum")
        try c.put(match, "match")
        try c.putUnknown(extra, known: Self.knownKeys)
    }
}

/// A passkey stored in a login (`login.fido2Credentials[]`). All but `creationDate` are
/// encrypted strings, including `counter` (`"0"`) and `discoverable` (`"true"`).
public struct CipherFido2Credential: EncryptedTextRecord, Equatable {
    /// Encrypted credential id.
    public var credentialId: EncString?
    /// Encrypted key type (`"public-key"`).
    public var keyType: EncString?
    /// Encrypted algorithm (`"ECDSA"`).
    public var keyAlgorithm: EncString?
    /// Encrypted curve (`"P-256"`).
    public var keyCurve: EncString?
    /// Encrypted private key (base64 PKCS#8).
    public var keyValue: EncString?
    /// Encrypted relying-party id.
    public var rpId: EncString?
    /// Encrypted relying-party name.
    public var rpName: EncString?
    /// Encrypted user handle.
    public var userHandle: EncString?
    /// Encrypted user name.
    public var userName: EncString?
    /// Encrypted user display name.
    public var userDisplayName: EncString?
    /// Encrypted signature counter.
    public var counter: EncString?
    /// Encrypted discoverable flag.
    public var discoverable: EncString?
    /// When the passkey was created.
    public var creationDate: BitwardenDate?
    /// Fields this version does not know, kept verbatim.
    public var extra: [String: JSONValue] = [:]

    /// Creates an empty credential; set the fields you need.
    public init() {}

    static var encryptedFields: [(name: String, path: WritableKeyPath<Self, EncString?>)] {
        [
            ("credentialId", \.credentialId), ("keyType", \.keyType), ("keyAlgorithm", \.keyAlgorithm),
            ("keyCurve", \.keyCurve), ("keyValue", \.keyValue), ("rpId", \.rpId), ("rpName", \.rpName),
            ("userHandle", \.userHandle), ("userName", \.userName), ("userDisplayName", \.userDisplayName),
            ("counter", \.counter), ("discoverable", \.discoverable),
        ]
    }

    public init(from decoder: any Decoder) throws {
        try self.init(decodingRecordFrom: decoder)
        // creationDate is plain; it was captured in `extra` by the shared decoder.
        if let raw = extra.removeValue(forKey: "creationDate"), raw != .null {
            guard case .string(let text) = raw else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "creationDate must be a string"))
            }
            do {
                creationDate = try BitwardenDate(text)
            } catch let error as VaultModelError {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.description))
            }
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var copy = self
        copy.extra["creationDate"] = creationDate.map { .string($0.text) } ?? .null
        try copy.encodeRecord(to: encoder)
    }
}

/// Card details of a cipher (`card`).
public struct CipherCard: EncryptedTextRecord, Equatable {
    /// Encrypted cardholder name.
    public var cardholderName: EncString?
    /// Encrypted brand (`"Visa"`, …).
    public var brand: EncString?
    /// Encrypted card number.
    public var number: EncString?
    /// Encrypted expiry month.
    public var expMonth: EncString?
    /// Encrypted expiry year.
    public var expYear: EncString?
    /// Encrypted security code.
    public var code: EncString?
    /// Fields this version does not know, kept verbatim.
    public var extra: [String: JSONValue] = [:]

    /// Creates empty card details; set the fields you need.
    public init() {}

    static var encryptedFields: [(name: String, path: WritableKeyPath<Self, EncString?>)] {
        [("cardholderName", \.cardholderName), ("brand", \.brand), ("number", \.number),
         ("expMonth", \.expMonth), ("expYear", \.expYear), ("code", \.code)]
    }

    public init(from decoder: any Decoder) throws { try self.init(decodingRecordFrom: decoder) }
    public func encode(to encoder: any Encoder) throws { try encodeRecord(to: encoder) }
}

/// Identity details of a cipher (`identity`).
public struct CipherIdentity: EncryptedTextRecord, Equatable {
    /// Encrypted title (Mr, Ms, …).
    public var title: EncString?
    /// Encrypted first name.
    public var firstName: EncString?
    /// Encrypted middle name.
    public var middleName: EncString?
    /// Encrypted last name.
    public var lastName: EncString?
    /// Encrypted address line 1.
    public var address1: EncString?
    /// Encrypted address line 2.
    public var address2: EncString?
    /// Encrypted address line 3.
    public var address3: EncString?
    /// Encrypted city.
    public var city: EncString?
    /// Encrypted state or province.
    public var state: EncString?
    /// Encrypted postal code.
    public var postalCode: EncString?
    /// Encrypted country.
    public var country: EncString?
    /// Encrypted company.
    public var company: EncString?
    /// Encrypted email address.
    public var email: EncString?
    /// Encrypted phone number.
    public var phone: EncString?
    /// Encrypted social security number.
    public var ssn: EncString?
    /// Encrypted user name.
    public var username: EncString?
    /// Encrypted passport number.
    public var passportNumber: EncString?
    /// Encrypted license number.
    public var licenseNumber: EncString?
    /// Fields this version does not know, kept verbatim.
    public var extra: [String: JSONValue] = [:]

    /// Creates empty identity details; set the fields you need.
    public init() {}

    static var encryptedFields: [(name: String, path: WritableKeyPath<Self, EncString?>)] {
        [("title", \.title), ("firstName", \.firstName), ("middleName", \.middleName), ("lastName", \.lastName),
         ("address1", \.address1), ("address2", \.address2), ("address3", \.address3), ("city", \.city),
         ("state", \.state), ("postalCode", \.postalCode), ("country", \.country), ("company", \.company),
         ("email", \.email), ("phone", \.phone), ("ssn", \.ssn), ("username", \.username),
         ("passportNumber", \.passportNumber), ("licenseNumber", \.licenseNumber)]
    }

    public init(from decoder: any Decoder) throws { try self.init(decodingRecordFrom: decoder) }
    public func encode(to encoder: any Encoder) throws { try encodeRecord(to: encoder) }
}

/// SSH key of a cipher (`sshKey`). The fingerprint's wire name is `keyFingerprint`.
public struct CipherSSHKey: EncryptedTextRecord, Equatable {
    /// Encrypted private key (OpenSSH format).
    public var privateKey: EncString?
    /// Encrypted public key.
    public var publicKey: EncString?
    /// Encrypted fingerprint (wire name `keyFingerprint`).
    public var keyFingerprint: EncString?
    /// Fields this version does not know, kept verbatim.
    public var extra: [String: JSONValue] = [:]

    /// Creates an empty SSH key; set the fields you need.
    public init() {}

    static var encryptedFields: [(name: String, path: WritableKeyPath<Self, EncString?>)] {
        [("privateKey", \.privateKey), ("publicKey", \.publicKey), ("keyFingerprint", \.keyFingerprint)]
    }

    public init(from decoder: any Decoder) throws { try self.init(decodingRecordFrom: decoder) }
    public func encode(to encoder: any Encoder) throws { try encodeRecord(to: encoder) }
}

/// Secure-note details of a cipher (`secureNote`); the text itself is the cipher's `notes`.
public struct CipherSecureNote: Codable, Sendable, Equatable {
    /// The note kind (always generic today).
    public var type: SecureNoteType?
    /// Fields this version does not know, kept verbatim.
    public var extra: [String: JSONValue]

    /// Creates secure-note details.
    public init(type: SecureNoteType? = .generic, extra: [String: JSONValue] = [:]) {
        self.type = type
        self.extra = extra
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        type = try c.optional("type")
        extra = try c.unknownFields(known: ["type"])
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AnyCodingKey.self)
        try c.put(type, "type")
        try c.putUnknown(extra, known: ["type"])
    }
}

/// Details of the newer item types (bank account, driver's license, passport) kept as a map of
/// wire name → encrypted text. Values that are not EncStrings (nulls, numbers, objects) stay in
/// ``extra`` verbatim.
public struct CipherTextFields: Codable, Sendable, Equatable {
    /// Encrypted text fields by wire name.
    public var values: [String: EncString]
    /// Everything else, kept verbatim.
    public var extra: [String: JSONValue]

    /// Creates the details from encrypted values.
    public init(values: [String: EncString] = [:], extra: [String: JSONValue] = [:]) {
        self.values = values
        self.extra = extra
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        values = [:]
        extra = [:]
        for key in c.allKeys {
            let value = try c.decode(JSONValue.self, forKey: key)
            if case .string(let text) = value, let enc = try? EncString(text) {
                values[key.stringValue] = enc
            } else {
                extra[key.stringValue] = value
            }
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AnyCodingKey.self)
        for key in values.keys.sorted() { try c.put(values[key], key) }
        try c.putUnknown(extra, known: Set(values.keys))
    }
}

/// A custom field (`fields[]`).
public struct CipherField: Codable, Sendable, Equatable {
    /// The field kind.
    public var type: FieldType?
    /// Encrypted field name.
    public var name: EncString?
    /// Encrypted field value.
    public var value: EncString?
    /// For linked fields, which item property it mirrors.
    public var linkedId: Int?
    /// Fields this version does not know, kept verbatim.
    public var extra: [String: JSONValue]

    /// Creates a custom field.
    public init(type: FieldType?, name: EncString? = nil, value: EncString? = nil, linkedId: Int? = nil, extra: [String: JSONValue] = [:]) {
        self.type = type
        self.name = name
        self.value = value
        self.linkedId = linkedId
        self.extra = extra
    }

    static let knownKeys: Set<String> = ["type", "name", "value", "linkedId"]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        type = try c.optional("type")
        name = try c.optional("name")
        value = try c.optional("value")
        linkedId = try c.optional("linkedId")
        extra = try c.unknownFields(known: Self.knownKeys)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AnyCodingKey.self)
        try c.put(type, "type")
        try c.put(name, "name")
        try c.put(value, "value")
        try c.put(linkedId, "linkedId")
        try c.putUnknown(extra, known: Self.knownKeys)
    }
}

/// A previous password (`passwordHistory[]`).
public struct CipherPasswordHistory: Codable, Sendable, Equatable {
    /// Encrypted old password (or `"<field name>: <old value>"` for hidden fields).
    public var password: EncString?
    /// When it stopped being used.
    public var lastUsedDate: BitwardenDate?
    /// Fields this version does not know, kept verbatim.
    public var extra: [String: JSONValue]

    /// Creates a history entry.
    public init(password: EncString?, lastUsedDate: BitwardenDate?, extra: [String: JSONValue] = [:]) {
        self.password = password
        self.lastUsedDate = lastUsedDate
        self.extra = extra
    }

    static let knownKeys: Set<String> = ["password", "lastUsedDate"]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        password = try c.optional("password")
        lastUsedDate = try c.optional("lastUsedDate")
        extra = try c.unknownFields(known: Self.knownKeys)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AnyCodingKey.self)
        try c.put(password, "password")
        try c.put(lastUsedDate, "lastUsedDate")
        try c.putUnknown(extra, known: Self.knownKeys)
    }
}

/// Attachment metadata (`attachments[]`). The file body lives elsewhere, encrypted with the
/// attachment's own key.
public struct CipherAttachment: Codable, Sendable, Equatable {
    /// The attachment id.
    public var id: String?
    /// Download URL (response only).
    public var url: String?
    /// Encrypted file name.
    public var fileName: EncString?
    /// The attachment key, wrapped by the cipher key (or the user key if the cipher has none).
    public var key: EncString?
    /// Size in bytes, as a decimal string (the server's type).
    public var size: String?
    /// Human-readable size (`"1.2 MB"`).
    public var sizeName: String?
    /// Fields this version does not know, kept verbatim.
    public var extra: [String: JSONValue]

    /// Creates attachment metadata.
    public init(
        id: String? = nil, url: String? = nil, fileName: EncString? = nil, key: EncString? = nil,
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

    static let knownKeys: Set<String> = ["id", "url", "fileName", "key", "size", "sizeName"]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        id = try c.optional("id")
        url = try c.optional("url")
        fileName = try c.optional("fileName")
        key = try c.optional("key")
        // The server sends a string; accept a number too rather than fail the whole sync.
        switch try c.optional("size", as: JSONValue.self) {
        case .string(let text): size = text
        case .integer(let number): size = String(number)
        default: size = nil
        }
        sizeName = try c.optional("sizeName")
        extra = try c.unknownFields(known: Self.knownKeys)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AnyCodingKey.self)
        try c.put(id, "id")
        try c.put(url, "url")
        try c.put(fileName, "fileName")
        try c.put(key, "key")
        try c.put(size, "size")
        try c.put(sizeName, "sizeName")
        try c.putUnknown(extra, known: Self.knownKeys)
    }
}

/// What the current user may do with an item (`permissions`).
public struct CipherPermissions: Codable, Sendable, Equatable {
    /// May move the item to the trash or delete it.
    public var delete: Bool?
    /// May restore it from the trash.
    public var restore: Bool?
    /// Fields this version does not know, kept verbatim.
    public var extra: [String: JSONValue]

    /// Creates permissions.
    public init(delete: Bool? = nil, restore: Bool? = nil, extra: [String: JSONValue] = [:]) {
        self.delete = delete
        self.restore = restore
        self.extra = extra
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        delete = try c.optional("delete")
        restore = try c.optional("restore")
        extra = try c.unknownFields(known: ["delete", "restore"])
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AnyCodingKey.self)
        try c.put(delete, "delete")
        try c.put(restore, "restore")
        try c.putUnknown(extra, known: ["delete", "restore"])
    }
}
