import Foundation
import Testing
import VaultCrypto
@testable import VaultJSON
import VaultLogTesting
@testable import VaultModel

/// `JSONTapeDecoder` against Foundation's `JSONDecoder`, the decoder it replaces: the same value
/// for every input both accept, and an error from both for every input either refuses.
struct JSONTapeDecoderTests {
    /// Both decoders' outcome for one input: the value, or that it threw.
    static func outcomes<T: Decodable & Equatable>(_ type: T.Type, _ bytes: [UInt8]) -> (tape: T?, foundation: T?) {
        (try? JSONTapeDecoder().decode(T.self, from: bytes), try? JSONDecoder().decode(T.self, from: Data(bytes)))
    }

    @Test(arguments: ["cipher_login", "cipher_unknown_type"])
    func fixtureCiphers_decodeAsFoundationDoes(name: String) throws {
        let data = try Fixtures.data(name)
        let tape = try JSONTapeDecoder().decode(Cipher.self, from: data)
        #expect(tape == (try JSONDecoder().decode(Cipher.self, from: data)))
        #expect(tape.extra == (try JSONDecoder().decode(Cipher.self, from: data)).extra)
        #expect(try JSONTapeDecoder().decode(JSONValue.self, from: data) == JSONDecoder().decode(JSONValue.self, from: data))
    }

    /// 400 random cipher-shaped documents (every field kind, nulls, missing keys, unknown keys
    /// with any JSON, strings with escapes and non-ASCII text), written three ways: both
    /// decoders give the same cipher, or both refuse it.
    @Test func randomCiphers_decodeAsFoundationDoes() throws {
        var random = RandomJSON(seed: 0x7A9E)
        var decoded = 0
        for _ in 0..<400 {
            let document = random.cipherDocument()
            for bytes in try random.writings(of: document) {
                let (tape, foundation) = Self.outcomes(Cipher.self, bytes)
                #expect(tape == foundation, "\(String(decoding: bytes, as: UTF8.self))")
                if tape != nil { decoded += 1 }
                let values = Self.outcomes(JSONValue.self, bytes)
                #expect(values.tape != nil && values.tape == values.foundation)
            }
        }
        // Most documents are valid ciphers: the comparison is not between two failures.
        #expect(decoded > 900)
    }

    /// 6,000 mutations of cipher JSON (a byte changed, removed or inserted, a run repeated):
    /// whatever one decoder makes of the damaged text, the other makes the same.
    @Test func mutatedCipherText_isAcceptedOrRefusedAsFoundationDoes() throws {
        var random = RandomJSON(seed: 0xBAD5EED)
        let alphabet = Array(#"{}[]:,"\/ 0123456789.eE+-tfnulbrux"#.utf8) + [0x00, 0x1F, 0x7F, 0xC3, 0xA9, 0xFF]
        var accepted = 0
        for _ in 0..<6000 {
            var bytes = try random.writings(of: random.cipherDocument()).randomElement(using: &random.generator)!
            let at = Int.random(in: 0..<bytes.count, using: &random.generator)
            switch Int.random(in: 0..<4, using: &random.generator) {
            case 0: bytes[at] = alphabet.randomElement(using: &random.generator)!
            case 1: bytes.remove(at: at)
            case 2: bytes.insert(alphabet.randomElement(using: &random.generator)!, at: at)
            default: bytes.insert(contentsOf: bytes[at..<min(at + 8, bytes.count)], at: at)
            }
            let ciphers = Self.outcomes(Cipher.self, bytes)
            #expect(ciphers.tape == ciphers.foundation, "\(String(decoding: bytes, as: UTF8.self))")
            let values = Self.outcomes(JSONValue.self, bytes)
            #expect(values.tape == values.foundation, "\(String(decoding: bytes, as: UTF8.self))")
            if values.tape != nil { accepted += 1 }
        }
        // Many mutations stay valid JSON (inside strings, digits): both kinds are compared.
        #expect(accepted > 600 && accepted < 5400)
    }

    /// Scalars at the edges: integers written with a fraction or exponent, out of range,
    /// negative zero, escapes and surrogate pairs, a repeated key, whitespace, nulls.
    @Test(arguments: [
        "1", "-0", "1.0", "1e2", "1.5", "1E-2", "300", "-129", "9223372036854775807", "9223372036854775808",
        "-9223372036854775808", "18446744073709551615", "1e400", "0.1", "123456789012345678901234567890",
        #""\u00e9\ud83d\ude00\/\"\\\b\f\n\r\t""#, #""\ud800""#, #""\udc00x""#, #""\u0000""#, "\"é\"",
        #"{"a":1,"a":2}"#, " \n\t{ \"a\" : [ 1 , 2 ] } \r", #"{"a":1,}"#, "[1 , ]", "{,}", "[,]", "\u{FEFF}1", "null", "true", "[]", "{}", "[null,1]", #"{"a":null}"#,
    ])
    func scalarEdgeCases_decodeAsFoundationDoes(text: String) {
        let bytes = Array(text.utf8)
        func same<T: Decodable & Equatable>(_ type: T.Type) {
            let (tape, foundation) = Self.outcomes(T.self, bytes)
            #expect(tape == foundation, "\(T.self) from \(text)")
        }
        same(Int.self); same(Int8.self); same(UInt8.self); same(Int64.self); same(UInt64.self)
        same(Double.self); same(Float.self); same(Bool.self); same(String.self); same(JSONValue.self)
        same([String: Int].self); same([Int?].self); same([String: Int?].self); same([Int].self)
    }

    /// An object with more keys than are scanned (a dictionary of 300 entries, one key
    /// repeated, one escaped) is read through a key index with the same results.
    @Test func largeObject_decodesAsFoundationDoes() throws {
        var pairs = (0..<300).map { #""k\#($0)":\#($0)"# }
        pairs.insert(#""k7":-1"#, at: 200)
        pairs.append(#""\u006b\u0031x":5"#)
        let bytes = Array(("{" + pairs.joined(separator: ",") + "}").utf8)
        let (tape, foundation) = Self.outcomes([String: Int].self, bytes)
        #expect(tape != nil && tape == foundation)
        #expect(tape?["k7"] == 7 && tape?["k1x"] == 5)
        struct Few: Decodable, Equatable { let k7: Int; let k299: Int; let k1x: Int }
        let few = Self.outcomes(Few.self, bytes)
        #expect(few.tape != nil && few.tape == few.foundation)
    }

    /// Invalid UTF-8 where `JSONDecoder` checks it (a key of an object it reads, with or without
    /// escapes; a string value it reads) and where it does not (a value nobody reads).
    @Test(arguments: [
        (#"{"a":1,""#, #"":2}"#), (#"{"a":1,"\n"#, #"":2}"#), (#"{"a":1,"b":""#, #""}"#), (#"{"a":1,"b":"\n"#, #""}"#),
    ] as [(String, String)])
    func invalidUTF8_isRefusedWhereFoundationRefusesIt(before: String, after: String) {
        struct A: Decodable, Equatable { let a: Int }
        for bad: [UInt8] in [[0xFF], [0xC3], [0xED, 0xA0, 0x80]] {
            let bytes = Array(before.utf8) + bad + Array(after.utf8)
            let (tape, foundation) = Self.outcomes(A.self, bytes)
            #expect(tape == foundation, "\(bytes)")
            let values = Self.outcomes(JSONValue.self, bytes)
            #expect(values.tape == nil && values.foundation == nil)
        }
    }

    @Test func invalidText_throwsDataCorruptedSayingWhere() {
        do {
            _ = try JSONTapeDecoder().decode(JSONValue.self, from: Array(#"{"a":[1,2 x]}"#.utf8))
            Issue.record("decoded invalid JSON")
        } catch DecodingError.dataCorrupted(let context) {
            #expect((context.underlyingError as? JSONParseError)?.offset == 10)
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    /// A wrong value deep in a cipher is reported at the same coding path as `JSONDecoder` gives.
    @Test func typeMismatch_reportsFoundationsCodingPath() throws {
        let text = Array(#"{"type":1,"login":{"uris":[{"uri":null},{"uri":7}]}}"#.utf8)
        func path(_ decode: () throws -> Cipher) -> [String] {
            do {
                _ = try decode()
                return []
            } catch DecodingError.typeMismatch(_, let context) {
                return context.codingPath.map { $0.intValue.map { "\($0)" } ?? $0.stringValue }
            } catch {
                return ["unexpected \(error)"]
            }
        }
        let tapePath = path { try JSONTapeDecoder().decode(Cipher.self, from: text) }
        #expect(tapePath == ["login", "uris", "1", "uri"])
        #expect(tapePath == path { try JSONDecoder().decode(Cipher.self, from: Data(text)) })
    }

    @Test func missingRequiredKey_isKeyNotFound() {
        #expect {
            try JSONTapeDecoder().decode(Cipher.self, from: Array(#"{"name":null}"#.utf8))
        } throws: { error in
            if case DecodingError.keyNotFound(let key, _) = error { return key.stringValue == "type" }
            return false
        }
    }
}

/// Random cipher-shaped JSON for the differential tests (deterministic by seed).
struct RandomJSON {
    var generator: SplitMix64
    let key: SymmetricCryptoKey
    let random: SeededRandomSource

    init(seed: UInt64) {
        generator = SplitMix64(seed: seed)
        random = SeededRandomSource(seed: seed)
        key = try! SymmetricCryptoKey(bytes: random.bytes(64))
    }

    mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &generator) < percent }

    mutating func text() -> String {
        let pieces = ["a", "Bank", " ", "\"", "\\", "/", "\n", "\t", "\u{1}", "é", "😀", "\u{2028}", "中", "0", "{", "}"]
        return (0..<Int.random(in: 0..<12, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
    }

    mutating func encString() -> JSONValue {
        .string(EncString.encrypt(text(), key: key, random: random).serialized)
    }

    mutating func date() -> JSONValue {
        let forms = ["2026-01-01T00:00:00.0000000Z", "2025-12-31T23:59:59.123Z", "2024-02-29T12:00:00Z"]
        return .string(forms.randomElement(using: &generator)!)
    }

    /// Any JSON value, nested at most `depth` levels.
    mutating func anyValue(depth: Int = 2) -> JSONValue {
        switch Int.random(in: 0..<(depth > 0 ? 8 : 6), using: &generator) {
        case 0: return .null
        case 1: return .bool(chance(50))
        case 2: return .integer(Int64.random(in: Int64.min...Int64.max, using: &generator) >> Int64.random(in: 0..<63, using: &generator))
        case 3: return .double(Double.random(in: -1e6...1e6, using: &generator))
        case 4, 5: return .string(text())
        case 6: return .array((0..<Int.random(in: 0..<4, using: &generator)).map { _ in anyValue(depth: depth - 1) })
        default: return .object(JSONObject((0..<Int.random(in: 0..<4, using: &generator)).map { _ in (text(), anyValue(depth: depth - 1)) }))
        }
    }

    /// Sets `key` to `value` most of the time, else to null or leaves it out.
    mutating func maybe(_ object: inout JSONObject, _ key: String, _ value: JSONValue) {
        switch Int.random(in: 0..<10, using: &generator) {
        case 0: object[key] = .null
        case 1: break
        default: object[key] = value
        }
    }

    mutating func cipherDocument() -> JSONValue {
        var cipher = JSONObject()
        cipher["type"] = .integer(Int64.random(in: 1...9, using: &generator))
        maybe(&cipher, "id", .string(String(generator.next(), radix: 16)))
        maybe(&cipher, "name", encString())
        maybe(&cipher, "notes", encString())
        maybe(&cipher, "favorite", .bool(chance(50)))
        maybe(&cipher, "reprompt", .integer(Int64.random(in: 0...1, using: &generator)))
        maybe(&cipher, "revisionDate", date())
        maybe(&cipher, "collectionIds", .array([.string(String(generator.next(), radix: 16))]))
        var login = JSONObject()
        maybe(&login, "username", encString())
        maybe(&login, "password", encString())
        maybe(&login, "passwordRevisionDate", date())
        maybe(&login, "uris", .array((0..<Int.random(in: 0..<3, using: &generator)).map { _ in
            var uri = JSONObject()
            maybe(&uri, "uri", encString())
            maybe(&uri, "match", .integer(Int64.random(in: 0...5, using: &generator)))
            if chance(20) { uri[text()] = anyValue() }
            return .object(uri)
        }))
        if chance(20) { login[text()] = anyValue() }
        maybe(&cipher, "login", .object(login))
        maybe(&cipher, "fields", .array((0..<Int.random(in: 0..<3, using: &generator)).map { _ in
            .object(["name": encString(), "value": encString(), "type": .integer(Int64.random(in: 0...3, using: &generator))])
        }))
        maybe(&cipher, "passwordHistory", .array([.object(["password": encString(), "lastUsedDate": date()])]))
        // Unknown fields a newer server might send, at the top level.
        for _ in 0..<Int.random(in: 0..<3, using: &generator) { cipher["x" + text()] = anyValue() }
        // Now and then a value of the wrong kind, which both decoders must refuse alike.
        if chance(5) { cipher[["name", "favorite", "login", "type", "revisionDate"].randomElement(using: &generator)!] = anyValue() }
        return .object(cipher)
    }

    /// The document as JSONEncoder writes it (slashes escaped, keys sorted so the text depends
    /// on the seed alone), pretty-printed, and compact in insertion order with slashes as they are.
    mutating func writings(of document: JSONValue) throws -> [[UInt8]] {
        let compact = JSONEncoder()
        compact.outputFormatting = [.sortedKeys]
        let pretty = JSONEncoder()
        pretty.outputFormatting = [.prettyPrinted, .sortedKeys]
        return [Array(try compact.encode(document)), Array(try pretty.encode(document)), Array(try document.serializedJSON())]
    }
}
