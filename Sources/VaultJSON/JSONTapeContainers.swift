import Foundation

// MARK: - Decoder and containers

/// The decoder of one node (also its single-value container). Two words, so passing it as
/// `any Decoder` does not allocate.
struct TapeDecoder: Decoder, SingleValueDecodingContainer {
    let tape: JSONTape
    let node: Int

    var codingPath: [any CodingKey] { tape.codingPath(to: node) }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard tape.nodes[node].kind == .object else { throw tape.mismatch([String: Any].self, node) }
        guard tape.keysAreValid(of: node) else {
            throw DecodingError.dataCorrupted(tape.context(node, "An object's key is not valid UTF-8."))
        }
        return KeyedDecodingContainer(TapeKeyedContainer<Key>(tape: tape, node: node))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard tape.nodes[node].kind == .array else { throw tape.mismatch([Any].self, node) }
        return TapeUnkeyedContainer(tape: tape, node: node)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { tape.nodes[node].kind == .null }
    func decode(_ type: Bool.Type) throws -> Bool { try tape.bool(at: node) }
    func decode(_ type: String.Type) throws -> String { try tape.string(at: node) }
    func decode(_ type: Double.Type) throws -> Double { try tape.double(at: node) }
    func decode(_ type: Float.Type) throws -> Float { try tape.float(at: node) }
    func decode(_ type: Int.Type) throws -> Int { try tape.integer(Int.self, at: node) }
    func decode(_ type: Int8.Type) throws -> Int8 { try tape.integer(Int8.self, at: node) }
    func decode(_ type: Int16.Type) throws -> Int16 { try tape.integer(Int16.self, at: node) }
    func decode(_ type: Int32.Type) throws -> Int32 { try tape.integer(Int32.self, at: node) }
    func decode(_ type: Int64.Type) throws -> Int64 { try tape.integer(Int64.self, at: node) }
    func decode(_ type: UInt.Type) throws -> UInt { try tape.integer(UInt.self, at: node) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try tape.integer(UInt8.self, at: node) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try tape.integer(UInt16.self, at: node) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try tape.integer(UInt32.self, at: node) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try tape.integer(UInt64.self, at: node) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try tape.value(T.self, at: node) }
}

struct TapeKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let tape: JSONTape
    let node: Int

    var codingPath: [any CodingKey] { tape.codingPath(to: node) }

    var allKeys: [Key] { tape.keys(of: node).compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { tape.find(key, in: node) != nil }

    /// The value node of `key`, or `keyNotFound`.
    private func required(_ key: Key) throws -> Int {
        guard let index = tape.find(key, in: node) else {
            throw DecodingError.keyNotFound(key, tape.context(node, "No value associated with key \(key) (\"\(key.stringValue)\")."))
        }
        return index
    }

    func decodeNil(forKey key: Key) throws -> Bool { tape.nodes[try required(key)].kind == .null }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try tape.bool(at: required(key)) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try tape.string(at: required(key)) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try tape.double(at: required(key)) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try tape.float(at: required(key)) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try tape.integer(Int.self, at: required(key)) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try tape.integer(Int8.self, at: required(key)) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try tape.integer(Int16.self, at: required(key)) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try tape.integer(Int32.self, at: required(key)) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try tape.integer(Int64.self, at: required(key)) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try tape.integer(UInt.self, at: required(key)) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try tape.integer(UInt8.self, at: required(key)) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try tape.integer(UInt16.self, at: required(key)) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try tape.integer(UInt32.self, at: required(key)) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try tape.integer(UInt64.self, at: required(key)) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try tape.value(T.self, at: required(key)) }

    // One key lookup instead of the default's three (contains, decodeNil, decode).
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let index = tape.find(key, in: node), tape.nodes[index].kind != .null else { return nil }
        return try tape.value(T.self, at: index)
    }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        guard let index = tape.find(key, in: node), tape.nodes[index].kind != .null else { return nil }
        return try tape.string(at: index)
    }
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
        guard let index = tape.find(key, in: node), tape.nodes[index].kind != .null else { return nil }
        return try tape.bool(at: index)
    }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
        guard let index = tape.find(key, in: node), tape.nodes[index].kind != .null else { return nil }
        return try tape.integer(Int.self, at: index)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try TapeDecoder(tape: tape, node: required(key)).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try TapeDecoder(tape: tape, node: required(key)).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { try superDecoder(named: TapeKey(stringValue: "super")) }
    func superDecoder(forKey key: Key) throws -> any Decoder { try superDecoder(named: key) }

    /// The decoder of `key`'s value; a missing key reads as `null`, as in `JSONDecoder`.
    private func superDecoder(named key: some CodingKey) throws -> any Decoder {
        guard let index = tape.find(key, in: node) else { return TapeDecoder(tape: JSONTape.null, node: 0) }
        return TapeDecoder(tape: tape, node: index)
    }
}

extension JSONTape {
    /// A tape of `null` (a super decoder for a missing key).
    static let null = try! JSONTape(parsing: Array("null".utf8))
}

struct TapeUnkeyedContainer: UnkeyedDecodingContainer {
    let tape: JSONTape
    let node: Int
    /// The node of the next element.
    private var cursor: Int
    private(set) var currentIndex = 0

    init(tape: JSONTape, node: Int) {
        self.tape = tape
        self.node = node
        cursor = node + 1
    }

    var codingPath: [any CodingKey] { tape.codingPath(to: node) }
    var count: Int? { tape.nodes[node].count }
    var isAtEnd: Bool { currentIndex >= tape.nodes[node].count }

    /// Reads the next element with `read`; moves on only if it succeeds.
    private mutating func next<T>(_ type: T.Type, _ read: (JSONTape, Int) throws -> T) throws -> T {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(type, tape.context(node, "Unkeyed container is at end.", extra: TapeKey(intValue: currentIndex)))
        }
        let value = try read(tape, cursor)
        cursor = tape.nodes[cursor].next
        currentIndex += 1
        return value
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(Any?.self, tape.context(node, "Unkeyed container is at end.", extra: TapeKey(intValue: currentIndex)))
        }
        guard tape.nodes[cursor].kind == .null else { return false }
        cursor = tape.nodes[cursor].next
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type) { try $0.bool(at: $1) } }
    mutating func decode(_ type: String.Type) throws -> String { try next(type) { try $0.string(at: $1) } }
    mutating func decode(_ type: Double.Type) throws -> Double { try next(type) { try $0.double(at: $1) } }
    mutating func decode(_ type: Float.Type) throws -> Float { try next(type) { try $0.float(at: $1) } }
    mutating func decode(_ type: Int.Type) throws -> Int { try next(type) { try $0.integer(Int.self, at: $1) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next(type) { try $0.integer(Int8.self, at: $1) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next(type) { try $0.integer(Int16.self, at: $1) } }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next(type) { try $0.integer(Int32.self, at: $1) } }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next(type) { try $0.integer(Int64.self, at: $1) } }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next(type) { try $0.integer(UInt.self, at: $1) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next(type) { try $0.integer(UInt8.self, at: $1) } }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next(type) { try $0.integer(UInt16.self, at: $1) } }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next(type) { try $0.integer(UInt32.self, at: $1) } }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next(type) { try $0.integer(UInt64.self, at: $1) } }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next(type) { try $0.value(T.self, at: $1) } }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next(KeyedDecodingContainer<NestedKey>.self) { try TapeDecoder(tape: $0, node: $1).container(keyedBy: type) }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try next((any UnkeyedDecodingContainer).self) { try TapeDecoder(tape: $0, node: $1).unkeyedContainer() }
    }

    mutating func superDecoder() throws -> any Decoder {
        try next((any Decoder).self) { TapeDecoder(tape: $0, node: $1) }
    }
}
