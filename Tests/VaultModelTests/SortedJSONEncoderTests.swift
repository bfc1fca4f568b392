import Foundation
import Testing
import VaultCrypto
@testable import VaultJSON
import VaultLogTesting
@testable import VaultModel

/// `SortedJSONEncoder` against Foundation's `JSONEncoder` with `.sortedKeys`, the encoder it
/// replaces: the same bytes for every value, or an error from both.
struct SortedJSONEncoderTests {
    static func foundation<T: Encodable>(_ value: T, escapesSlashes: Bool = true,
                                         userInfo: [CodingUserInfoKey: any Sendable] = [:]) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = escapesSlashes ? [.sortedKeys] : [.sortedKeys, .withoutEscapingSlashes]
        encoder.userInfo = userInfo
        return Array(try encoder.encode(value))
    }

    /// Both encoders' bytes for `value`, with slashes escaped and not. Unless `handedOver`, the
    /// bytes are this encoder's own (not `JSONEncoder`'s, which it falls back to).
    static func expectSame<T: Encodable>(_ value: T, handedOver: Bool = false,
                                         sourceLocation: SourceLocation = #_sourceLocation) throws {
        for escapes in [true, false] {
            let encoder = SortedJSONEncoder(escapesSlashes: escapes)
            let ours = handedOver ? try encoder.encode(value) : try encoder.fastEncode(value)
            let theirs = try foundation(value, escapesSlashes: escapes)
            #expect(Bool(ours == theirs), "\(String(decoding: ours, as: UTF8.self))\n\(String(decoding: theirs, as: UTF8.self))",
                    sourceLocation: sourceLocation)
        }
    }

    @Test(arguments: ["cipher_login", "cipher_unknown_type"])
    func fixtureCiphers_encodeAsFoundationDoes(name: String) throws {
        try Self.expectSame(try JSONDecoder().decode(Cipher.self, from: Fixtures.data(name)))
    }

    /// 400 random cipher documents (unknown fields of any JSON, nested objects and arrays,
    /// doubles, text with escapes, non-ASCII and control characters in keys and values),
    /// encoded as ciphers and as plain JSON values.
    @Test func randomCiphers_encodeAsFoundationDoes() throws {
        var random = RandomJSON(seed: 0x50E7ED)
        var ciphers = 0
        for _ in 0..<400 {
            let document = random.cipherDocument()
            try Self.expectSame(document)
            let bytes = Array(try document.serializedJSON())
            if let cipher = try? JSONDecoder().decode(Cipher.self, from: Data(bytes)) {
                try Self.expectSame(cipher)
                try Self.expectSame([cipher, cipher])
                ciphers += 1
            }
        }
        #expect(ciphers > 300)
    }

    /// Keys sort by their UTF-8 bytes (upper case before lower, "a10" before "a9", non-ASCII
    /// last); keys equal as Strings are one key.
    @Test func keys_sortByTheirBytes() throws {
        let keys = ["b", "B", "a", "A", "a10", "a9", "_x", "é", "e", "Z", "z", "aB", "ab", "a-", "", "ß", "ss", "😀", "\u{FF21}",
                    "e\u{301}x", "éa", "x/y", "\u{7F}", "q\u{0}"]
        try Self.expectSame(Pairs(keys.enumerated().map { ($0.element, $0.offset) }))
        try Self.expectSame(Pairs(keys.reversed().enumerated().map { ($0.element, $0.offset) }))
    }

    /// A key written twice keeps its last value; two spellings of one String are one key,
    /// spelled as first written.
    @Test(arguments: [["a", "b", "a"], ["e\u{301}", "é"], ["é", "x", "e\u{301}"], ["k", "k", "k", "j"]])
    func repeatedKeys_keepTheLastValue(keys: [String]) throws {
        try Self.expectSame(Pairs(keys.enumerated().map { ($0.element, $0.offset) }))
    }

    @Test func strings_escapeAsFoundationDoes() throws {
        var every = ""
        for scalar in 0..<0x80 { every.unicodeScalars.append(Unicode.Scalar(UInt8(scalar))) }
        every += "\u{80}\u{2028}\u{2029}é😀\u{FEFF}e\u{301}"
        try Self.expectSame(every)
        try Self.expectSame([every: every])
        try Self.expectSame(["/", "//", "a/b", "", "\"\\\"", String(repeating: "x", count: 5000) + "\n"])
    }

    @Test func numbers_writeAsFoundationDoes() throws {
        try Self.expectSame([Int64.min, Int64.max, 0, -1, 9, 10, 99, 100, -10])
        try Self.expectSame([UInt64.max, 0, 1])
        try Self.expectSame([Int8.min, Int8.max])
        try Self.expectSame([UInt8.max])
        try Self.expectSame([Int32.min])
        var random = SplitMix64(seed: 0xF10A7)
        var doubles: [Double] = [0, -0.0, 1, -1, 1.5, 0.1, 1e15, 1e16, 1e20, 1e21, 1e-5, 1e-7, .leastNonzeroMagnitude,
                                 .greatestFiniteMagnitude, .leastNormalMagnitude, 9007199254740992, 123456789012]
        for _ in 0..<2000 { doubles.append(Double(bitPattern: random.next())) }
        try Self.expectSame(doubles.filter(\.isFinite))
        try Self.expectSame(doubles.filter(\.isFinite).map { Float($0) }.filter(\.isFinite))
        try Self.expectSame(JSONValue.array(doubles.filter(\.isFinite).map { .double($0) }))
    }

    /// What `JSONEncoder` treats specially or refuses is handed to it: the same bytes, or an
    /// error from both.
    @Test func specialValues_getFoundationsResult() throws {
        try Self.expectSame(["d": Date(timeIntervalSince1970: 1000.5)], handedOver: true)
        try Self.expectSame([Data([1, 2, 3, 255])], handedOver: true)
        try Self.expectSame(["u": URL(string: "https://example.com/a?b=c")!], handedOver: true)
        try Self.expectSame([Decimal(string: "12.5")!], handedOver: true)
        #expect(throws: SortedJSONTreeEncoder.HandOver.self) { try SortedJSONEncoder().fastEncode([Date()]) }
        #expect(throws: EncodingError.self) { try SortedJSONEncoder().encode([Double.nan]) }
        #expect(throws: EncodingError.self) { try SortedJSONEncoder().encode(["x": Float.infinity]) }
        // A top-level value that encodes nothing: JSONEncoder refuses it; nested, it is {}.
        #expect(throws: EncodingError.self) { try SortedJSONEncoder().encode(Nothing()) }
        try Self.expectSame([Nothing()])
        try Self.expectSame(["k": Nothing()])
        try Self.expectSame("top")
        try Self.expectSame(true)
        try Self.expectSame(Optional<Int>.none)
        try Self.expectSame([Optional<Int>.none, 1])
    }

    /// Super-encoders, nested containers, a container asked for twice, and `userInfo`.
    @Test func containerShapes_encodeAsFoundationDoes() throws {
        try Self.expectSame(Shapes(useInfo: false))
        let key = CodingUserInfoKey(rawValue: "flag")!
        let ours = try SortedJSONEncoder(userInfo: [key: true]).fastEncode(Shapes(useInfo: true))
        #expect(ours == (try Self.foundation(Shapes(useInfo: true), userInfo: [key: true])))
        #expect(String(decoding: ours, as: UTF8.self).contains("\"flag\":true"))
    }

    /// A super-encoder nobody writes to is `{}`; a key written after a nested container under
    /// the same key replaces it.
    @Test func unusedSuperEncoders_andReplacedContainers_encodeAsFoundationDoes() throws {
        try Self.expectSame(Edges(kind: 0))
        try Self.expectSame(Edges(kind: 1))
        try Self.expectSame(Edges(kind: 2))
    }

    /// An error thrown by a value comes out as the value threw it.
    @Test func thrownErrors_reachTheCaller() {
        #expect(throws: Refusal.self) { try SortedJSONEncoder().encode(["a": Refuses()]) }
    }

    // MARK: Values

    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Pairs written in this order to one keyed container (repeats included).
    struct Pairs: Encodable {
        let pairs: [(String, Int)]
        init(_ pairs: [(String, Int)]) { self.pairs = pairs }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: AnyKey.self)
            for (key, value) in pairs { try c.encode(value, forKey: AnyKey(key)) }
        }
    }

    struct Nothing: Encodable {
        func encode(to encoder: any Encoder) throws {}
    }

    struct Refusal: Error {}
    struct Refuses: Encodable {
        func encode(to encoder: any Encoder) throws { throw Refusal() }
    }

    struct Edges: Encodable {
        let kind: Int
        func encode(to encoder: any Encoder) throws {
            switch kind {
            case 0:
                var c = encoder.container(keyedBy: AnyKey.self)
                try c.encode(1, forKey: AnyKey("a"))
                _ = c.superEncoder()
            case 1:
                var c = encoder.unkeyedContainer()
                try c.encode(1)
                _ = c.superEncoder()
            default:
                var c = encoder.container(keyedBy: AnyKey.self)
                var nested = c.nestedContainer(keyedBy: AnyKey.self, forKey: AnyKey("x"))
                try nested.encode(1, forKey: AnyKey("y"))
                try c.encode(5, forKey: AnyKey("x"))
            }
        }
    }

    struct Shapes: Encodable {
        let useInfo: Bool
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: AnyKey.self)
            try c.encode(1, forKey: AnyKey("z"))
            var nested = c.nestedContainer(keyedBy: AnyKey.self, forKey: AnyKey("n"))
            try nested.encode("v", forKey: AnyKey("k"))
            try nested.encodeNil(forKey: AnyKey("nil"))
            var list = c.nestedUnkeyedContainer(forKey: AnyKey("l"))
            try list.encode(1.5)
            try list.encode(UInt16(7))
            var inner = list.nestedContainer(keyedBy: AnyKey.self)
            try inner.encode(false, forKey: AnyKey("b"))
            var innerList = list.nestedUnkeyedContainer()
            try innerList.encodeNil()
            var superValue = c.superEncoder().singleValueContainer()
            try superValue.encode("s")
            var keyedSuper = c.superEncoder(forKey: AnyKey("sk")).container(keyedBy: AnyKey.self)
            try keyedSuper.encode(Int16(-3), forKey: AnyKey("x"))
            var again = encoder.container(keyedBy: AnyKey.self)
            try again.encode("later", forKey: AnyKey("a"))
            if useInfo { try again.encode(encoder.userInfo[CodingUserInfoKey(rawValue: "flag")!] as? Bool, forKey: AnyKey("flag")) }
        }
    }
}
