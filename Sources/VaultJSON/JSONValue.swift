import Foundation

/// Any JSON value, used to carry fields this version of VaultLog does not know (a newer
/// server's additions) through decode → encode unchanged.
///
/// Integers stay exact (`Int64`). Objects keep their keys in order when read with
/// ``init(parsing:)`` and written with ``serializedJSON()``. Foundation's `JSONDecoder` does not
/// report key order, so through `Codable` keys come back sorted (stable, not source order),
/// and `JSONEncoder` writes objects in its own order (use `.sortedKeys` for stable output).
///
/// ```swift
/// let value = try JSONDecoder().decode(JSONValue.self, from: Data(#"{"b":1,"a":[true,null]}"#.utf8))
/// value.objectValue?["b"]   // .integer(1)
/// ```
public enum JSONValue: Hashable, Sendable, Codable, CustomStringConvertible {
    /// JSON `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number without a fraction or exponent that fits in 64 bits, kept exact.
    case integer(Int64)
    /// Any other number.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object, keys in decoded order.
    case object(JSONObject)

    /// The object, if this value is one.
    public var objectValue: JSONObject? {
        if case .object(let object) = self { return object }
        return nil
    }

    /// The string, if this value is one.
    public var stringValue: String? {
        if case .string(let string) = self { return string }
        return nil
    }

    /// Decodes any JSON value; integers that fit in `Int64` stay exact, and an object's keys come
    /// back sorted (`JSONDecoder` reports no order).
    public init(from decoder: any Decoder) throws {
        if let keyed = try? decoder.container(keyedBy: AnyCodingKey.self) {
            self = .object(try JSONObject(from: keyed))
            return
        }
        if var unkeyed = try? decoder.unkeyedContainer() {
            var elements: [JSONValue] = []
            if let count = unkeyed.count { elements.reserveCapacity(count) }
            while !unkeyed.isAtEnd { elements.append(try unkeyed.decode(JSONValue.self)) }
            self = .array(elements)
            return
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            self = .null
        } else if let bool = try? single.decode(Bool.self) {
            self = .bool(bool)
        } else if let integer = try? single.decode(Int64.self) {
            self = .integer(integer)
        } else if let double = try? single.decode(Double.self) {
            self = .double(double)
        } else if let string = try? single.decode(String.self) {
            self = .string(string)
        } else {
            throw DecodingError.dataCorruptedError(in: single, debugDescription: "not a JSON value")
        }
    }

    /// Encodes the value as it is; integers stay integers, and an object hands its pairs over in
    /// `keys` order.
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var single = encoder.singleValueContainer()
            try single.encodeNil()
        case .bool(let bool):
            var single = encoder.singleValueContainer()
            try single.encode(bool)
        case .integer(let integer):
            var single = encoder.singleValueContainer()
            try single.encode(integer)
        case .double(let double):
            var single = encoder.singleValueContainer()
            try single.encode(double)
        case .string(let string):
            var single = encoder.singleValueContainer()
            try single.encode(string)
        case .array(let elements):
            var unkeyed = encoder.unkeyedContainer()
            for element in elements { try unkeyed.encode(element) }
        case .object(let object):
            try object.encode(to: encoder)
        }
    }

    /// Compact JSON text (for diagnostics).
    public var description: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        guard let data = try? encoder.encode(self) else { return "<unencodable>" }
        return String(decoding: data, as: UTF8.self)
    }
}

/// A JSON object that remembers the order of its keys. Two objects are equal when they hold
/// the same key/value pairs, whatever the order (JSON objects are unordered).
public struct JSONObject: Hashable, Sendable, Codable, Sequence, ExpressibleByDictionaryLiteral {
    /// The keys in insertion (decode) order.
    public private(set) var keys: [String] = []
    private var storage: [String: JSONValue] = [:]

    /// An empty object.
    public init() {}

    /// An object with `elements` in the given order; a repeated key keeps its first position
    /// and last value.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        for (key, value) in elements { self[key] = value }
    }

    /// An object from key/value pairs in the given order.
    public init(_ pairs: some Sequence<(String, JSONValue)>) {
        for (key, value) in pairs { self[key] = value }
    }

    /// The number of keys.
    public var count: Int { keys.count }

    /// The value for `key`; setting `nil` removes the key.
    public subscript(key: String) -> JSONValue? {
        get { storage[key] }
        set {
            if let newValue {
                if storage.updateValue(newValue, forKey: key) == nil { keys.append(key) }
            } else if storage.removeValue(forKey: key) != nil {
                keys.removeAll { $0 == key }
            }
        }
    }

    /// The pairs as a dictionary (order dropped).
    public var dictionary: [String: JSONValue] { storage }

    /// Iterates over the pairs in key order.
    public func makeIterator() -> IndexingIterator<[(key: String, value: JSONValue)]> {
        keys.map { (key: $0, value: storage[$0]!) }.makeIterator()
    }

    /// Whether both hold the same key/value pairs, whatever the key order.
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool { lhs.storage == rhs.storage }
    /// Hashes the pairs, ignoring key order (consistent with `==`).
    public func hash(into hasher: inout Hasher) { hasher.combine(storage) }

    /// Decoding through `Codable`: `JSONDecoder` gives no source order, so keys are sorted to
    /// be at least deterministic.
    package init(from container: KeyedDecodingContainer<AnyCodingKey>) throws {
        for key in container.allKeys.sorted(by: { $0.stringValue < $1.stringValue }) {
            self[key.stringValue] = try container.decode(JSONValue.self, forKey: key)
        }
    }

    /// Decodes an object; its keys are sorted, since `JSONDecoder` reports no order.
    public init(from decoder: any Decoder) throws {
        try self.init(from: decoder.container(keyedBy: AnyCodingKey.self))
    }

    /// Encodes the pairs in `keys` order (`JSONEncoder` may still write them in its own order).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: AnyCodingKey.self)
        for key in keys { try container.encode(storage[key]!, forKey: AnyCodingKey(key)) }
    }
}

/// A coding key for any string, used to read and write objects whose keys are not all known.
package struct AnyCodingKey: CodingKey, Hashable, ExpressibleByStringLiteral {
    package let stringValue: String
    package var intValue: Int? { nil }
    package init(_ string: String) { stringValue = string }
    package init(stringValue: String) { self.stringValue = stringValue }
    package init?(intValue: Int) { stringValue = String(intValue) }
    package init(stringLiteral value: String) { stringValue = value }
}

extension KeyedDecodingContainer where K == AnyCodingKey {
    /// Decodes `key` if present and not null.
    package func optional<T: Decodable>(_ key: String, as type: T.Type = T.self) throws -> T? {
        try decodeIfPresent(T.self, forKey: AnyCodingKey(key))
    }

    /// Every key not in `known`, with its value: what a newer server sent that we must keep.
    /// `decoder` is the one this container came from: a ``JSONTapeDecoder`` lists its keys
    /// straight from the text (`allKeys` through the type-erased container casts every key
    /// twice, which was most of the cost of decoding a cipher).
    package func unknownFields(known: Set<String>, in decoder: any Decoder) throws -> [String: JSONValue] {
        let keys = (decoder as? TapeDecoder).map { $0.tape.keys(of: $0.node) } ?? allKeys.map(\.stringValue)
        var unknown: [String: JSONValue] = [:]
        for key in keys where !known.contains(key) {
            unknown[key] = try decode(JSONValue.self, forKey: AnyCodingKey(key))
        }
        return unknown
    }
}

extension KeyedEncodingContainer where K == AnyCodingKey {
    /// Writes `value`, or an explicit `null` when it is nil (the server's own shape).
    package mutating func put<T: Encodable>(_ value: T?, _ key: String) throws {
        if let value {
            try encode(value, forKey: AnyCodingKey(key))
        } else {
            try encodeNil(forKey: AnyCodingKey(key))
        }
    }

    /// Writes the carried unknown fields, skipping any name that is now a known field.
    package mutating func putUnknown(_ unknown: [String: JSONValue], known: Set<String>) throws {
        for key in unknown.keys.sorted() where !known.contains(key) {
            try encode(unknown[key]!, forKey: AnyCodingKey(key))
        }
    }
}
