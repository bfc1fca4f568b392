import Foundation
import VaultCrypto
import VaultJSON

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
        extra = try c.unknownFields(known: Self.knownKeys, in: decoder)
    }

    func encodeRecord(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AnyCodingKey.self)
        for field in Self.encryptedFields {
            try c.put(self[keyPath: field.path], field.name)
        }
        try c.putUnknown(extra, known: Self.knownKeys)
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

    /// Decodes every key: strings that parse as EncStrings go to `values`, everything else to
    /// `extra`.
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

    /// Encodes `values` in key order, then the `extra` entries whose names are not in `values`.
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

    /// Decodes the wire JSON, keeping unknown fields in `extra`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        type = try c.optional("type")
        name = try c.optional("name")
        value = try c.optional("value")
        linkedId = try c.optional("linkedId")
        extra = try c.unknownFields(known: Self.knownKeys, in: decoder)
    }

    /// Encodes the known fields (nil as `null`, as the server writes them), then the carried unknown fields.
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

    /// Decodes the wire JSON, keeping unknown fields in `extra`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        password = try c.optional("password")
        lastUsedDate = try c.optional("lastUsedDate")
        extra = try c.unknownFields(known: Self.knownKeys, in: decoder)
    }

    /// Encodes the known fields (nil as `null`, as the server writes them), then the carried unknown fields.
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

    /// Decodes the wire JSON, keeping unknown fields in `extra`; `size` may be a string or a
    /// number (anything else reads as nil).
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
        extra = try c.unknownFields(known: Self.knownKeys, in: decoder)
    }

    /// Encodes the known fields (nil as `null`, as the server writes them), then the carried unknown fields.
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

    /// Decodes the wire JSON, keeping unknown fields in `extra`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        delete = try c.optional("delete")
        restore = try c.optional("restore")
        extra = try c.unknownFields(known: ["delete", "restore"], in: decoder)
    }

    /// Encodes the known fields (nil as `null`, as the server writes them), then the carried unknown fields.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AnyCodingKey.self)
        try c.put(delete, "delete")
        try c.put(restore, "restore")
        try c.putUnknown(extra, known: ["delete", "restore"])
    }
}
