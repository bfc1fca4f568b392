import Foundation

/// Writes an `Encodable` value as compact JSON with sorted keys: byte for byte what Foundation's
/// `JSONEncoder` writes with `outputFormatting = [.sortedKeys]` (plus `.withoutEscapingSlashes`
/// when ``escapesSlashes`` is false) and default strategies, in a fraction of the time.
///
/// The store encodes a cipher at every save (the event's body and the local copy share the
/// bytes), the resolver at every outcome and request, and a checkpoint encodes every pending
/// item. On Linux `JSONEncoder` builds a tree of boxed values and dictionaries for each object;
/// this encoder builds a light tree of key/value arrays and writes it in one pass.
///
/// Same output as `JSONEncoder` (a differential test compares the bytes): keys sorted by their
/// UTF-8 bytes; a key written twice in one object keeps its last value (keys that are equal as
/// `String`s, such as two spellings of "é", are one key, spelled as first written); `/` written
/// `\/` unless ``escapesSlashes`` is false; control characters as `\b`, `\t`, `\n`, `\f`, `\r` or
/// `\u00xx`; floating-point numbers as their shortest description without a trailing `.0`. Values
/// `JSONEncoder` treats specially (`Date`, `Data`, `URL`, `Decimal`), a number that is not finite,
/// a top-level value that encodes nothing and any error thrown by a value's `encode(to:)` are
/// handed to `JSONEncoder` itself, so its result or its error is what the caller gets. A
/// ``JSONStringEncodable`` value (VaultModel makes `EncString` one) is written straight from
/// its UTF-8 bytes (what its `encode(to:)` writes), and a ``SortedJSONDirectEncodable`` value
/// (VaultModel makes `Cipher` one) writes itself member by member, without a tree.
///
/// ```swift
/// let bytes = try SortedJSONEncoder().encode(cipher)   // == JSONEncoder with .sortedKeys
/// ```
public struct SortedJSONEncoder: Sendable {
    /// Writes `/` as `\/`, as `JSONEncoder` does unless given `.withoutEscapingSlashes`.
    public var escapesSlashes: Bool
    /// Handed to every `encode(to:)` as the encoder's `userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable]

    /// An encoder; `escapesSlashes: false` matches `.withoutEscapingSlashes`.
    public init(escapesSlashes: Bool = true, userInfo: [CodingUserInfoKey: any Sendable] = [:]) {
        self.escapesSlashes = escapesSlashes
        self.userInfo = userInfo
    }

    /// The JSON text of `value` (UTF-8).
    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        if let bytes = directEncode(value) { return bytes }
        if let bytes = try? fastEncode(value) { return bytes }
        let encoder = JSONEncoder()
        encoder.outputFormatting = escapesSlashes ? [.sortedKeys] : [.sortedKeys, .withoutEscapingSlashes]
        encoder.userInfo = userInfo
        return Array(try encoder.encode(value))
    }

    /// The encoding without `JSONEncoder`: throws ``SortedJSONTreeEncoder/HandOver`` (or the
    /// value's error) where `encode(_:)` hands the value over.
    func fastEncode<T: Encodable>(_ value: T) throws -> [UInt8] {
        let root = SortedJSONTreeEncoder(userInfo: userInfo, parent: nil, key: nil)
        let node = try root.box(value)
        guard let node else { throw SortedJSONTreeEncoder.HandOver() }
        var writer = SortedJSONWriter(escapesSlashes: escapesSlashes)
        writer.out.reserveCapacity(1024)
        try writer.write(node)
        return writer.out
    }
}

/// A value that encodes as one JSON string and can give that string's UTF-8 bytes without
/// building a `String`: ``SortedJSONEncoder`` writes the bytes (escaped as any string is)
/// instead of asking the value to encode itself.
public protocol JSONStringEncodable: Encodable {
    /// The UTF-8 bytes of the string `encode(to:)` writes as the value's single value.
    var jsonStringUTF8: [UInt8] { get }
}

// MARK: - The tree

/// One encoded value.
enum SortedJSONNode {
    case null
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case double(Double)
    case float(Float)
    case string(String)
    /// A string as UTF-8 bytes (a ``JSONStringEncodable``'s, never built as a `String`).
    case utf8([UInt8])
    case object(SortedJSONObject)
    case array(SortedJSONArray)
    /// What a super-encoder encodes, read when the tree is written (it may be used later).
    case deferred(SortedJSONTreeEncoder)
}

/// An object's pairs in the order they were encoded (sorted when written).
final class SortedJSONObject {
    var entries: [(key: String, value: SortedJSONNode)] = []
}

/// An array's elements.
final class SortedJSONArray {
    var elements: [SortedJSONNode] = []
}

/// The `Encoder` handed to each value: it records the container the value asks for.
final class SortedJSONTreeEncoder: Encoder {
    /// Thrown to let `JSONEncoder` encode the value instead (it has the answer, or the error).
    struct HandOver: Error {}

    let storedUserInfo: [CodingUserInfoKey: any Sendable]
    let parent: SortedJSONTreeEncoder?
    let key: (any CodingKey)?
    /// The value's container (or single value), once it asked for one.
    var node: SortedJSONNode?

    init(userInfo: [CodingUserInfoKey: any Sendable], parent: SortedJSONTreeEncoder?, key: (any CodingKey)?) {
        storedUserInfo = userInfo
        self.parent = parent
        self.key = key
    }

    var userInfo: [CodingUserInfoKey: Any] { storedUserInfo }

    /// Worked out when asked (values rarely ask), from the chain of parents.
    var codingPath: [any CodingKey] {
        var path: [any CodingKey] = []
        var encoder: SortedJSONTreeEncoder? = self
        while let current = encoder, let key = current.key {
            path.append(key)
            encoder = current.parent
        }
        return path.reversed()
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let object: SortedJSONObject
        if case .object(let existing)? = node {
            object = existing
        } else {
            object = SortedJSONObject()
            node = .object(object)
        }
        return KeyedEncodingContainer(SortedJSONKeyedContainer<Key>(encoder: self, object: object))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let array: SortedJSONArray
        if case .array(let existing)? = node {
            array = existing
        } else {
            array = SortedJSONArray()
            node = .array(array)
        }
        return SortedJSONUnkeyedContainer(encoder: self, array: array)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { SortedJSONSingleContainer(encoder: self) }

    /// The node of `value`, encoded under `key` (nil when the value encoded nothing).
    func box<T: Encodable>(_ value: T, key: (any CodingKey)? = nil) throws -> SortedJSONNode? {
        // Metatype comparisons: cheap where the call is not specialised (through the
        // type-erased containers every `Codable` type uses), unlike casts.
        if T.self == String.self { return .string(value as! String) }
        if T.self == Bool.self { return .bool(value as! Bool) }
        // What its `encode(to:)` writes (an `EncString`'s), without an encoder and a String for each.
        if let string = value as? any JSONStringEncodable { return .utf8(string.jsonStringUTF8) }
        if T.self == Date.self || T.self == Data.self || T.self == URL.self || T.self == Decimal.self { throw HandOver() }
        let child = SortedJSONTreeEncoder(userInfo: storedUserInfo, parent: self, key: key)
        try value.encode(to: child)
        return child.node
    }

    /// `box` for a value inside a container: nothing encoded is an empty object, as in `JSONEncoder`.
    func boxNested<T: Encodable>(_ value: T, key: any CodingKey) throws -> SortedJSONNode {
        try box(value, key: key) ?? .object(SortedJSONObject())
    }

    static func number<F: BinaryFloatingPoint>(_ value: F, _ node: SortedJSONNode) throws -> SortedJSONNode {
        guard value.isFinite else { throw HandOver() }
        return node
    }
}

/// A key for the super-encoders and for array positions in coding paths.
private struct SortedJSONKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue }
    init(intValue: Int) { stringValue = "Index \(intValue)"; self.intValue = intValue }
}

struct SortedJSONKeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: SortedJSONTreeEncoder
    let object: SortedJSONObject

    var codingPath: [any CodingKey] { encoder.codingPath }

    private func put(_ key: Key, _ node: SortedJSONNode) { object.entries.append((key.stringValue, node)) }

    mutating func encodeNil(forKey key: Key) throws { put(key, .null) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { put(key, .bool(value)) }
    mutating func encode(_ value: String, forKey key: Key) throws { put(key, .string(value)) }
    mutating func encode(_ value: Double, forKey key: Key) throws { put(key, try SortedJSONTreeEncoder.number(value, .double(value))) }
    mutating func encode(_ value: Float, forKey key: Key) throws { put(key, try SortedJSONTreeEncoder.number(value, .float(value))) }
    mutating func encode(_ value: Int, forKey key: Key) throws { put(key, .int(Int64(value))) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { put(key, .int(Int64(value))) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { put(key, .int(Int64(value))) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { put(key, .int(Int64(value))) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { put(key, .int(value)) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { put(key, .uint(UInt64(value))) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { put(key, .uint(UInt64(value))) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { put(key, .uint(UInt64(value))) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { put(key, .uint(UInt64(value))) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { put(key, .uint(value)) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { put(key, try encoder.boxNested(value, key: key)) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type,
                                                        forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let child = SortedJSONTreeEncoder(userInfo: encoder.storedUserInfo, parent: encoder, key: key)
        let nested = child.container(keyedBy: keyType)
        put(key, child.node!)
        return nested
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = SortedJSONTreeEncoder(userInfo: encoder.storedUserInfo, parent: encoder, key: key)
        let nested = child.unkeyedContainer()
        put(key, child.node!)
        return nested
    }

    mutating func superEncoder() -> any Encoder { superEncoder(key: SortedJSONKey(stringValue: "super")) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(key: key) }

    private func superEncoder(key: any CodingKey) -> any Encoder {
        let child = SortedJSONTreeEncoder(userInfo: encoder.storedUserInfo, parent: encoder, key: key)
        object.entries.append((key.stringValue, .deferred(child)))
        return child
    }
}

/// The scalar `encode` methods an unkeyed and a single-value container share: each value
/// becomes a node handed to `put` (appended to the array, or set as the single value).
protocol SortedJSONScalarSink {
    func put(_ node: SortedJSONNode)
}

extension SortedJSONScalarSink {
    mutating func encodeNil() throws { put(.null) }
    mutating func encode(_ value: Bool) throws { put(.bool(value)) }
    mutating func encode(_ value: String) throws { put(.string(value)) }
    mutating func encode(_ value: Double) throws { put(try SortedJSONTreeEncoder.number(value, .double(value))) }
    mutating func encode(_ value: Float) throws { put(try SortedJSONTreeEncoder.number(value, .float(value))) }
    mutating func encode(_ value: Int) throws { put(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { put(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { put(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { put(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { put(.int(value)) }
    mutating func encode(_ value: UInt) throws { put(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt8) throws { put(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt16) throws { put(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt32) throws { put(.uint(UInt64(value))) }
    mutating func encode(_ value: UInt64) throws { put(.uint(value)) }
}

struct SortedJSONUnkeyedContainer: UnkeyedEncodingContainer, SortedJSONScalarSink {
    let encoder: SortedJSONTreeEncoder
    let array: SortedJSONArray

    var codingPath: [any CodingKey] { encoder.codingPath }
    var count: Int { array.elements.count }

    func put(_ node: SortedJSONNode) { array.elements.append(node) }
    private var nextKey: SortedJSONKey { SortedJSONKey(intValue: array.elements.count) }

    mutating func encode<T: Encodable>(_ value: T) throws { put(try encoder.boxNested(value, key: nextKey)) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let child = SortedJSONTreeEncoder(userInfo: encoder.storedUserInfo, parent: encoder, key: nextKey)
        let nested = child.container(keyedBy: keyType)
        put(child.node!)
        return nested
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let child = SortedJSONTreeEncoder(userInfo: encoder.storedUserInfo, parent: encoder, key: nextKey)
        let nested = child.unkeyedContainer()
        put(child.node!)
        return nested
    }

    mutating func superEncoder() -> any Encoder {
        let child = SortedJSONTreeEncoder(userInfo: encoder.storedUserInfo, parent: encoder, key: nextKey)
        put(.deferred(child))
        return child
    }
}

struct SortedJSONSingleContainer: SingleValueEncodingContainer, SortedJSONScalarSink {
    let encoder: SortedJSONTreeEncoder

    var codingPath: [any CodingKey] { encoder.codingPath }

    func put(_ node: SortedJSONNode) { encoder.node = node }

    mutating func encode<T: Encodable>(_ value: T) throws {
        // The value's own encoding replaces this encoder's (as a single value does in JSONEncoder).
        guard let node = try encoder.box(value, key: nil) else { throw SortedJSONTreeEncoder.HandOver() }
        put(node)
    }
}
