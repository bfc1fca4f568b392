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
}
