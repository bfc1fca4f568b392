/// The kind of vault item (`type` on the wire). Values a newer server adds decode as
/// ``unknown(_:)`` and are written back unchanged.
public enum CipherType: Sendable, Hashable, Codable, CustomStringConvertible {
    /// A website or app login (1).
    case login
    /// A free-text note (2).
    case secureNote
    /// A payment card (3).
    case card
    /// A person's identity details (4).
    case identity
    /// An SSH key pair (5).
    case sshKey
    /// A bank account (6).
    case bankAccount
    /// A driver's license (7).
    case driversLicense
    /// A passport (8).
    case passport
    /// A type this version does not know; its data is carried opaquely.
    case unknown(Int)

    /// Creates the type for a wire value.
    public init(rawValue: Int) {
        switch rawValue {
        case 1: self = .login
        case 2: self = .secureNote
        case 3: self = .card
        case 4: self = .identity
        case 5: self = .sshKey
        case 6: self = .bankAccount
        case 7: self = .driversLicense
        case 8: self = .passport
        default: self = .unknown(rawValue)
        }
    }

    /// The wire value.
    public var rawValue: Int {
        switch self {
        case .login: 1
        case .secureNote: 2
        case .card: 3
        case .identity: 4
        case .sshKey: 5
        case .bankAccount: 6
        case .driversLicense: 7
        case .passport: 8
        case .unknown(let value): value
        }
    }

    /// The type's name as in JSON keys (`login`, `secureNote`, …), or `unknown(n)` for an
    /// unnamed value.
    public var description: String {
        switch self {
        case .login: "login"
        case .secureNote: "secureNote"
        case .card: "card"
        case .identity: "identity"
        case .sshKey: "sshKey"
        case .bankAccount: "bankAccount"
        case .driversLicense: "driversLicense"
        case .passport: "passport"
        case .unknown(let value): "unknown(\(value))"
        }
    }

    /// Decodes the wire's integer, keeping values this build does not name.
    public init(from decoder: any Decoder) throws {
        self.init(rawValue: try decoder.singleValueContainer().decode(Int.self))
    }

    /// Encodes the integer as the server sent it.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// A small integer enum from the wire that keeps values it does not name.
public protocol OpenIntegerEnum: RawRepresentable, Sendable, Hashable, Codable where RawValue == Int {
    /// Any value from the wire, named or not (never fails).
    init(rawValue: Int)
}

extension OpenIntegerEnum {
    /// Decodes the wire's integer, keeping values this build does not name.
    public init(from decoder: any Decoder) throws {
        self.init(rawValue: try decoder.singleValueContainer().decode(Int.self))
    }

    /// Encodes the integer as the server sent it.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// The kind of a custom field (`fields[].type`).
public struct FieldType: OpenIntegerEnum {
    /// The wire value.
    public let rawValue: Int
    /// Creates a field type from its wire value.
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// Plain text (0).
    public static let text = FieldType(rawValue: 0)
    /// Hidden text, masked in the UI and tracked in password history (1).
    public static let hidden = FieldType(rawValue: 1)
    /// A checkbox, value `"true"`/`"false"` (2).
    public static let boolean = FieldType(rawValue: 2)
    /// Linked to another property of the item, see `linkedId` (3).
    public static let linked = FieldType(rawValue: 3)
}

/// Whether the master password must be re-entered to view the item (`reprompt`).
public struct CipherRepromptType: OpenIntegerEnum {
    /// The wire value.
    public let rawValue: Int
    /// Creates a reprompt type from its wire value.
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// No re-prompt (0).
    public static let none = CipherRepromptType(rawValue: 0)
    /// Ask for the master password (1).
    public static let password = CipherRepromptType(rawValue: 1)
}

/// How a login URI is matched against a site (`uris[].match`; null means the user default).
public struct UriMatchType: OpenIntegerEnum {
    /// The wire value.
    public let rawValue: Int
    /// Creates a match type from its wire value.
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// Base domain (0).
    public static let domain = UriMatchType(rawValue: 0)
    /// Host name and port (1).
    public static let host = UriMatchType(rawValue: 1)
    /// URL prefix (2).
    public static let startsWith = UriMatchType(rawValue: 2)
    /// Exact URL (3).
    public static let exact = UriMatchType(rawValue: 3)
    /// Regular expression (4).
    public static let regularExpression = UriMatchType(rawValue: 4)
    /// Never auto-fill (5).
    public static let never = UriMatchType(rawValue: 5)
}

/// The kind of a secure note (`secureNote.type`).
public struct SecureNoteType: OpenIntegerEnum {
    /// The wire value.
    public let rawValue: Int
    /// Creates a secure-note type from its wire value.
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// The only type Bitwarden defines (0).
    public static let generic = SecureNoteType(rawValue: 0)
}
