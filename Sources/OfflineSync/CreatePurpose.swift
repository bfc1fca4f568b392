import Foundation

/// What a POST of the resolver is for. Stored as a string in outcome bodies: `create`,
/// `recreate`, `backup` and `passwordOverflow-N` (N ≥ 1, the part of an overflow copy).
public enum CreatePurpose: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The first POST of an item created on this device.
    case create
    /// An item this device edited was deleted on the server; it is posted again.
    case recreate
    /// A backup of the losing side of a conflict, or of the version before a password burst.
    case backup
    /// Part `part` (from 1) of the copies holding passwords that overflow the item's history.
    case passwordOverflow(part: Int)

    /// The stored form.
    public var description: String {
        switch self {
        case .create: "create"
        case .recreate: "recreate"
        case .backup: "backup"
        case .passwordOverflow(let part): "passwordOverflow-\(part)"
        }
    }

    /// Parses the stored form; nil for anything else.
    public init?(_ text: String) {
        switch text {
        case "create": self = .create
        case "recreate": self = .recreate
        case "backup": self = .backup
        default:
            let prefix = "passwordOverflow-"
            guard text.hasPrefix(prefix), let part = Int(text.dropFirst(prefix.count)), part >= 1,
                  String(part) == text.dropFirst(prefix.count) else { return nil }
            self = .passwordOverflow(part: part)
        }
    }

    /// Whether this is any part of an overflow copy.
    public var isPasswordOverflow: Bool {
        if case .passwordOverflow = self { return true }
        return false
    }

    /// Decodes the stored form (a JSON string, see ``init(_:)``); throws `DecodingError` for
    /// anything else.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let purpose = CreatePurpose(text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription:
                "unknown create purpose '\(text)' (expected create, recreate, backup or passwordOverflow-N)")
        }
        self = purpose
    }

    /// Encodes the stored form, ``description``, as a JSON string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
