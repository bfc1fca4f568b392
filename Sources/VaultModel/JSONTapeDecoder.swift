import Foundation

/// A `Decodable` reader of UTF-8 JSON that gives what Foundation's `JSONDecoder` (default
/// strategies) gives, in a fraction of the time: the text is scanned once into a flat tape of
/// nodes, and each keyed container finds its keys by comparing bytes, with no dictionary and
/// no `String` built for a key. Coding paths are worked out from the tape only when an error is
/// thrown.
///
/// The store decodes every pending item's snapshot when a vault is opened; on Linux,
/// `JSONDecoder` took about 40 µs for a 1 KiB cipher, most of it hashing keys and building the
/// list of keys an object has (``Cipher`` keeps the fields it does not know).
///
/// Same results as `JSONDecoder`, accepting and refusing the same text (a differential
/// property test holds it to that): numbers with a fraction or exponent decode as integers when
/// exact, `Data` is base64, `URL` a string, `Date` its own `Codable` form (a number). A repeated
/// key in one object: the first value counts. One trailing comma before `]` or `}` and a leading
/// byte-order mark are accepted. UTF-8 is checked where `JSONDecoder` checks it: an object's
/// keys when a keyed container opens it, a string when it is read. Invalid JSON throws
/// `DecodingError.dataCorrupted` with a ``JSONParseError`` saying where.
///
/// ```swift
/// let cipher = try JSONTapeDecoder().decode(Cipher.self, from: bytes)
/// ```
public struct JSONTapeDecoder: Sendable {
    /// A decoder; it keeps no state between calls.
    public init() {}

    /// Decodes a `T` from the JSON text in `bytes` (UTF-8).
    public func decode<T: Decodable>(_ type: T.Type, from bytes: some Collection<UInt8>) throws -> T {
        let tape = try JSONTape(parsing: Array(bytes))
        return try tape.value(T.self, at: 0)
    }
}

// MARK: - The tape

/// Parsed JSON: one node per value (and per object key), each container followed by its
/// children, so a subtree is a contiguous run of nodes and `next` skips it.
final class JSONTape: @unchecked Sendable {
    enum Kind: UInt8 { case null, bool, number, string, array, object }

    /// 24 bytes: offsets are 32-bit (a document is at most ``maximumLength`` bytes).
    struct Node {
        var kind: Kind
        /// A bool's value; for a string, whether it has escapes.
        var flag: Bool
        /// A string of ASCII without escapes: its bytes are its text, valid as they are.
        var plain: Bool
        private var start32, end32, next32, count32: Int32

        init(kind: Kind, flag: Bool, plain: Bool = false, start: Int, end: Int, next: Int, count: Int) {
            self.kind = kind
            self.flag = flag
            self.plain = plain
            (start32, end32, next32, count32) = (Int32(start), Int32(end), Int32(next), Int32(count))
        }

        /// The bytes: a string's content without its quotes, a number's text.
        var start: Int { Int(start32) }
        var end: Int {
            get { Int(end32) }
            set { end32 = Int32(newValue) }
        }
        /// The index of the node after this subtree.
        var next: Int {
            get { Int(next32) }
            set { next32 = Int32(newValue) }
        }
        /// A container's children: elements, or key/value pairs.
        var count: Int {
            get { Int(count32) }
            set { count32 = Int32(newValue) }
        }
    }

    /// The longest text read (offsets are 32-bit).
    static let maximumLength = Int(Int32.max)

    /// Objects with more keys than this get a key index on their first lookup (a dictionary
    /// decoded from a large object looks up every key once); smaller ones are scanned.
    static let indexedObjectKeys = 48

    let bytes: [UInt8]
    let nodes: [Node]

    /// Key indexes of large objects, by object node: the value node of each key's first pair.
    private var keyIndexes: [Int: [String: Int]] = [:]

    init(parsing bytes: [UInt8]) throws {
        guard bytes.count < Self.maximumLength else {
            throw Self.invalid(JSONParseError(offset: 0, reason: "longer than \(Self.maximumLength) bytes"))
        }
        self.bytes = bytes
        let (nodes, end) = try bytes.withUnsafeBufferPointer { b in
            var parser = Parser(bytes: b)
            // A UTF-8 byte order mark is skipped, as JSONDecoder does.
            if b.starts(with: [0xEF, 0xBB, 0xBF]) { parser.index = 3 }
            parser.nodes.reserveCapacity(b.count / 8 + 16)
            try parser.parseValue(depth: 0)
            parser.skipWhitespace()
            return (parser.nodes, parser.index)
        }
        guard end == bytes.count else {
            throw Self.invalid(JSONParseError(offset: end, reason: "unexpected text after the value"))
        }
        self.nodes = nodes
    }

    static func invalid(_ error: JSONParseError) -> DecodingError {
        .dataCorrupted(DecodingError.Context(codingPath: [], debugDescription: "The given data was not valid JSON.",
                                             underlyingError: error))
    }

    /// Scans JSON text into nodes; nesting deeper than ``JSONValue/maximumNestingDepth`` is refused.
    private struct Parser {
        let bytes: UnsafeBufferPointer<UInt8>
        var nodes: [Node] = []
        var index = 0

        func fail(_ reason: String) -> DecodingError { JSONTape.invalid(JSONParseError(offset: index, reason: reason)) }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x0A, 0x0D, 0x09: index += 1
                default: return
                }
            }
        }

        mutating func parseValue(depth: Int) throws {
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of input") }
            switch bytes[index] {
            case UInt8(ascii: "{"): try parseContainer(object: true, depth: depth)
            case UInt8(ascii: "["): try parseContainer(object: false, depth: depth)
            case UInt8(ascii: "\""): try parseString()
            case UInt8(ascii: "t"): try literal("true", .bool, flag: true)
            case UInt8(ascii: "f"): try literal("false", .bool, flag: false)
            case UInt8(ascii: "n"): try literal("null", .null, flag: false)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try parseNumber()
            default: throw fail("unexpected character")
            }
        }

        mutating func literal(_ word: StaticString, _ kind: Kind, flag: Bool) throws {
            let count = word.utf8CodeUnitCount
            guard bytes.count - index >= count,
                  memcmp(bytes.baseAddress! + index, word.utf8Start, count) == 0 else { throw fail("expected \(word)") }
            nodes.append(Node(kind: kind, flag: flag, start: index, end: index + count, next: nodes.count + 1, count: 0))
            index += count
        }

        mutating func parseContainer(object: Bool, depth: Int) throws {
            guard depth < JSONValue.maximumNestingDepth else { throw fail("nested too deeply") }
            let me = nodes.count
            nodes.append(Node(kind: object ? .object : .array, flag: false, start: index, end: index, next: 0, count: 0))
            let close = object ? UInt8(ascii: "}") : UInt8(ascii: "]")
            index += 1
            skipWhitespace()
            var count = 0
            if index < bytes.count, bytes[index] == close {
                index += 1
            } else {
                while true {
                    if object {
                        skipWhitespace()
                        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a key") }
                        try parseString()
                        skipWhitespace()
                        guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                        index += 1
                    }
                    try parseValue(depth: depth + 1)
                    count += 1
                    skipWhitespace()
                    guard index < bytes.count else { throw fail("unexpected end of input") }
                    if bytes[index] == UInt8(ascii: ",") {
                        index += 1
                        // JSONDecoder takes one trailing comma before the bracket; so do we.
                        skipWhitespace()
                        if index < bytes.count, bytes[index] == close { index += 1; break }
                        continue
                    }
                    guard bytes[index] == close else { throw fail(object ? "expected ',' or '}'" : "expected ',' or ']'") }
                    index += 1
                    break
                }
            }
            nodes[me].end = index
            nodes[me].next = nodes.count
            nodes[me].count = count
        }

        /// A string: its escapes checked here, decoded when the string is read.
        mutating func parseString() throws {
            index += 1
            let start = index
            var escaped = false
            var ascii = true
            while true {
                guard index < bytes.count else { throw fail("unterminated string") }
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") { break }
                if byte == UInt8(ascii: "\\") {
                    escaped = true
                    index += 1
                    guard index < bytes.count else { throw fail("unterminated string") }
                    switch bytes[index] {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                         UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        index += 1
                    case UInt8(ascii: "u"):
                        guard bytes.count - index > 4, (1...4).allSatisfy({ JSONEscape.hexDigit(bytes[index + $0]) != nil }) else {
                            throw fail("invalid \\u escape")
                        }
                        index += 5
                    default: throw fail("invalid escape")
                    }
                    continue
                }
                guard byte >= 0x20 else { throw fail("unescaped control character in a string") }
                if byte >= 0x80 { ascii = false }
                index += 1
            }
            // UTF-8 is checked when the string is read, as JSONDecoder does (a value never read
            // is not checked; an object's keys are checked when a container opens it).
            nodes.append(Node(kind: .string, flag: escaped, plain: ascii && !escaped, start: start, end: index,
                              next: nodes.count + 1, count: 0))
            index += 1
        }

        mutating func parseNumber() throws {
            let start = index
            func digits() -> Int {
                let from = index
                while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") { index += 1 }
                return index - from
            }
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            let first = index
            guard digits() > 0 else { throw fail("expected a digit") }
            if bytes[first] == UInt8(ascii: "0"), index - first > 1 { index = first + 1; throw fail("a number with a leading zero") }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard digits() > 0 else { throw fail("expected a digit after '.'") }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                guard digits() > 0 else { throw fail("expected a digit in the exponent") }
            }
            nodes.append(Node(kind: .number, flag: false, start: start, end: index, next: nodes.count + 1, count: 0))
        }
    }

    // MARK: Reading values

    /// The value of node `index` as a `T`.
    func value<T: Decodable>(_ type: T.Type, at index: Int) throws -> T {
        // The scalar types JSONDecoder reads itself, and the ones it treats specially.
        // (`unsafeBitCast` where the types are equal: `as!` costs a dynamic cast per value.)
        if T.self == String.self { return unsafeBitCast(try string(at: index), to: T.self) }
        if T.self == Bool.self { return unsafeBitCast(try bool(at: index), to: T.self) }
        if T.self == Int.self { return unsafeBitCast(try integer(Int.self, at: index), to: T.self) }
        if T.self == Int64.self { return unsafeBitCast(try integer(Int64.self, at: index), to: T.self) }
        if T.self == Double.self { return unsafeBitCast(try double(at: index), to: T.self) }
        if T.self == UInt64.self { return unsafeBitCast(try integer(UInt64.self, at: index), to: T.self) }
        if T.self == Int32.self { return unsafeBitCast(try integer(Int32.self, at: index), to: T.self) }
        if T.self == Data.self {
            guard let data = Data(base64Encoded: try string(at: index)) else {
                throw DecodingError.dataCorrupted(context(index, "Encountered Data is not valid Base64."))
            }
            return data as! T
        }
        if T.self == URL.self {
            guard let url = URL(string: try string(at: index)) else {
                throw DecodingError.dataCorrupted(context(index, "Invalid URL string."))
            }
            return url as! T
        }
        return try T(from: TapeDecoder(tape: self, node: index))
    }

    func string(at index: Int) throws -> String {
        let node = nodes[index]
        guard node.kind == .string else { throw mismatch(String.self, index) }
        guard let string = text(of: node) else { throw DecodingError.dataCorrupted(context(index, "The string is not valid UTF-8.")) }
        return string
    }

    /// A string node's text; nil for invalid UTF-8 or a lone surrogate.
    func text(of node: Node) -> String? {
        if node.plain { return String(decoding: bytes[node.start..<node.end], as: UTF8.self) }
        if node.flag { return unescaped(node) }
        return bytes.withUnsafeBufferPointer {
            String(validating: UnsafeBufferPointer(rebasing: $0[node.start..<node.end]), as: UTF8.self)
        }
    }

    /// Whether every key of object node `object` is valid text (checked when a keyed container
    /// opens the object, as `JSONDecoder` checks them when it first reads the object).
    func keysAreValid(of object: Int) -> Bool {
        var pair = object + 1
        while pair < nodes[object].next {
            if !nodes[pair].plain, text(of: nodes[pair]) == nil { return false }
            pair = nodes[pair + 1].next
        }
        return true
    }

    func bool(at index: Int) throws -> Bool {
        let node = nodes[index]
        guard node.kind == .bool else { throw mismatch(Bool.self, index) }
        return node.flag
    }

    func integer<I: FixedWidthInteger>(_ type: I.Type, at index: Int) throws -> I {
        let node = nodes[index]
        guard node.kind == .number else { throw mismatch(I.self, index) }
        if let value = bytes.withUnsafeBufferPointer({ Self.parseInteger(I.self, UnsafeBufferPointer(rebasing: $0[node.start..<node.end])) }) {
            return value
        }
        // A fraction, an exponent or too many digits: exact as a Double, or it does not fit.
        let text = numberText(node)
        if let double = Double(text), let value = I(exactly: double) { return value }
        throw DecodingError.dataCorrupted(context(index, "Number \(text) is not representable in Swift."))
    }

    func double(at index: Int) throws -> Double {
        let node = nodes[index]
        guard node.kind == .number else { throw mismatch(Double.self, index) }
        let text = numberText(node)
        guard let value = Double(text), value.isFinite else {
            throw DecodingError.dataCorrupted(context(index, "Number \(text) is not representable in Swift."))
        }
        return value
    }

    func float(at index: Int) throws -> Float {
        let value = try double(at: index)
        guard abs(value) <= Double(Float.greatestFiniteMagnitude) else {
            throw DecodingError.dataCorrupted(context(index, "Number \(numberText(nodes[index])) does not fit in Float."))
        }
        return Float(value)
    }

    private func numberText(_ node: Node) -> String {
        String(decoding: bytes[node.start..<node.end], as: UTF8.self)
    }

    /// Digits with an optional minus, no fraction or exponent; nil when that is not the text or
    /// the value does not fit.
    private static func parseInteger<I: FixedWidthInteger>(_: I.Type, _ text: UnsafeBufferPointer<UInt8>) -> I? {
        var index = 0
        let negative = text.first == UInt8(ascii: "-")
        if negative { index = 1 }
        guard index < text.count else { return nil }
        var value: I = 0
        while index < text.count {
            let digit = text[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (next, o2) = negative ? times10.subtractingReportingOverflow(I(digit)) : times10.addingReportingOverflow(I(digit))
            guard !o1, !o2 else { return nil }
            value = next
            index += 1
        }
        return value
    }

    /// A string with escapes, decoded; nil for invalid UTF-8 or a lone surrogate.
    private func unescaped(_ node: Node) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(node.end - node.start)
        var i = node.start
        while i < node.end {
            let byte = bytes[i]
            i += 1
            guard byte == UInt8(ascii: "\\") else { out.append(byte); continue }
            if JSONEscape.decode(bytes, at: &i, end: node.end, into: &out) != nil { return nil }
        }
        return String(validating: out, as: UTF8.self)
    }

    // MARK: Keys

    /// The value node of `key` in object node `object` (the first, if repeated, as in
    /// `JSONDecoder`); nil if absent. Lengths and first bytes are compared before the rest.
    func find(_ key: some CodingKey, in object: Int) -> Int? {
        var name = key.stringValue
        if nodes[object].count > Self.indexedObjectKeys { return keyIndex(of: object)[name] }
        return name.withUTF8 { wanted -> Int? in
            bytes.withUnsafeBufferPointer { b -> Int? in
                let first = wanted.first
                var pair = object + 1
                let end = nodes[object].next
                while pair < end {
                    let keyNode = nodes[pair]
                    if keyNode.flag {
                        if unescaped(keyNode).map({ $0.utf8.elementsEqual(wanted) }) == true { return pair + 1 }
                    } else if keyNode.end - keyNode.start == wanted.count,
                              first == nil || (b[keyNode.start] == first && memcmp(b.baseAddress! + keyNode.start, wanted.baseAddress!, wanted.count) == 0) {
                        return pair + 1
                    }
                    pair = nodes[pair + 1].next
                }
                return nil
            }
        }
    }

    /// The index of a large object's keys (built on first use; a tape is read by one thread).
    private func keyIndex(of object: Int) -> [String: Int] {
        if let index = keyIndexes[object] { return index }
        var index: [String: Int] = [:]
        index.reserveCapacity(nodes[object].count)
        var pair = object + 1
        for name in keys(of: object) {
            if index[name] == nil { index[name] = pair + 1 }
            pair = nodes[pair + 1].next
        }
        keyIndexes[object] = index
        return index
    }

    /// The keys of object node `object`, in order.
    func keys(of object: Int) -> [String] {
        var keys: [String] = []
        keys.reserveCapacity(nodes[object].count)
        var pair = object + 1
        while pair < nodes[object].next {
            let node = nodes[pair]
            keys.append(text(of: node) ?? "")
            pair = nodes[pair + 1].next
        }
        return keys
    }

    // MARK: Errors

    /// The coding path of node `index`, found by walking down from the root (only errors need it).
    func codingPath(to index: Int) -> [any CodingKey] {
        var path: [any CodingKey] = []
        var node = 0
        while node != index {
            let container = nodes[node]
            var child = node + 1
            var position = 0
            var found = false
            while child < container.next {
                let valueNode = container.kind == .object ? child + 1 : child
                if index >= child, index < nodes[valueNode].next {
                    if container.kind == .object {
                        // A key node itself is on no path of its own; report its object's.
                        if index == child { return path }
                        let keyNode = nodes[child]
                        path.append(TapeKey(stringValue: text(of: keyNode) ?? ""))
                    } else {
                        path.append(TapeKey(intValue: position))
                    }
                    node = valueNode
                    found = true
                    break
                }
                child = nodes[valueNode].next
                position += 1
            }
            if !found { break }
        }
        return path
    }

    func context(_ index: Int, _ description: String, extra key: (any CodingKey)? = nil) -> DecodingError.Context {
        DecodingError.Context(codingPath: codingPath(to: index) + (key.map { [$0] } ?? []), debugDescription: description)
    }

    /// A value of the wrong kind; `null` where a value is needed is `valueNotFound`, as in `JSONDecoder`.
    func mismatch(_ type: Any.Type, _ index: Int) -> DecodingError {
        let kind = nodes[index].kind
        if kind == .null {
            return .valueNotFound(type, context(index, "Cannot get value of type \(type) -- found null value instead"))
        }
        return .typeMismatch(type, context(index, "Expected to decode \(type) but found \(Self.name(of: kind)) instead."))
    }

    static func name(of kind: Kind) -> String {
        switch kind {
        case .null: "null"
        case .bool: "bool"
        case .number: "number"
        case .string: "a string"
        case .array: "an array"
        case .object: "a dictionary"
        }
    }
}

/// A key in a coding path worked out from the tape.
struct TapeKey: CodingKey {
    let stringValue: String
    let intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue; intValue = nil }
    init(intValue: Int) { stringValue = "Index \(intValue)"; self.intValue = intValue }
}

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
