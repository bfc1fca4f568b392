import Foundation
import Testing
import VaultCrypto
import VaultJSON
@testable import VaultModel
import VaultLogTesting

@Suite("Cipher JSON")
struct CipherCodingTests {
    @Test(arguments: ["cipher_login", "cipher_unknown_type"])
    func decodeEncode_keepsEveryFieldAndValue(fixture: String) throws {
        let original = try Fixtures.data(fixture)
        let reencoded = try encodeJSON(decodeJSON(Cipher.self, original))
        let before = try decodeJSON(JSONValue.self, original)
        let after = try decodeJSON(JSONValue.self, reencoded)
        #expect(isContained(before, in: after), "re-encoded: \(after)")
        #expect(try decodeJSON(Cipher.self, reencoded) == decodeJSON(Cipher.self, original))
    }

    @Test func loginFixture_unknownFieldsAtEveryLevelAreCaptured() throws {
        let cipher = try Fixtures.cipher("cipher_login")
        #expect(cipher.extra["futureTopLevel"]?.objectValue?["big"] == .integer(9_007_199_254_740_993))
        #expect(cipher.extra["futureTopLevel"]?.objectValue?["nested"] == .array([.integer(1), .double(2.5), .bool(true), .null, .string("x")]))
        #expect(cipher.login?.extra["futureLoginHint"] == .string("prefers-passkey"))
        #expect(cipher.login?.uris?.first?.extra["futureUriFlag"] == .object(["mode": .string("strict"), "level": .integer(3)]))
        #expect(cipher.fields?.first?.extra["futureFieldColor"] == .string("amber"))
        #expect(cipher.extra["login"] == nil, "known keys must not leak into extra")
    }

    @Test func unknownCipherType_decodesAsUnknownAndEncodesItsNumber() throws {
        let cipher = try Fixtures.cipher("cipher_unknown_type")
        #expect(cipher.type == .unknown(9))
        let json = try decodeJSON(JSONValue.self, encodeJSON(cipher))
        #expect(json.objectValue?["type"] == .integer(9))
        #expect(json.objectValue?["futureThing"] == cipher.extra["futureThing"])
    }

    @Test func unchangedDates_reencodeWithTheServersText() throws {
        let json = try decodeJSON(JSONValue.self, encodeJSON(Fixtures.cipher("cipher_unknown_type")))
        #expect(json.objectValue?["revisionDate"] == .string("2025-06-30T23:59:59.999999+02:00"))
        #expect(json.objectValue?["creationDate"] == .string("2025-06-30T21:00:00.123Z"))
    }

    @Test func requestBody_hasRequestFieldsLastKnownRevisionDateAndUnknownFields() throws {
        let cipher = try Fixtures.cipher("cipher_login")
        let body = try decodeJSON(JSONValue.self, cipher.requestBody()).objectValue
        let request = try #require(body)
        #expect(request["lastKnownRevisionDate"] == .string("2024-03-01T10:20:30.1234567Z"))
        #expect(request["name"] == .string(cipher.name!.serialized))
        #expect(request["key"] == .string(cipher.key!.serialized))
        #expect(request["type"] == .integer(1))
        #expect(request["futureTopLevel"] == cipher.extra["futureTopLevel"])
        #expect(request["login"]?.objectValue?["futureLoginHint"] == .string("prefers-passkey"))
        for responseOnly in ["id", "object", "edit", "viewPassword", "revisionDate", "creationDate", "permissions", "collectionIds"] {
            #expect(request[responseOnly] == nil, "\(responseOnly) is response-only")
        }
    }

    @Test func requestBody_forNewItemSendsNullRevisionAndAttachmentKeys() throws {
        let fileName = EncString.encrypt("a.txt", key: Fixtures.userKey, random: SeededRandomSource(seed: 1))
        let attachmentKey = Fixtures.userKey.wrap(SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 2)), random: SeededRandomSource(seed: 3))
        let cipher = Cipher(type: .secureNote, name: fileName, attachments: [CipherAttachment(id: "att1", fileName: fileName, key: attachmentKey)])
        let request = try #require(try decodeJSON(JSONValue.self, cipher.requestBody(lastKnownRevisionDate: nil)).objectValue)
        #expect(request["lastKnownRevisionDate"] == .null)
        #expect(request["attachments"] == .object(["att1": .string(fileName.serialized)]))
        #expect(request["attachments2"] == .object(["att1": .object(["fileName": .string(fileName.serialized), "key": .string(attachmentKey.serialized)])]))
    }
}

@Suite("JSONValue")
struct JSONValueTests {
    @Test(arguments: ["9007199254740993", "-9223372036854775808", "9223372036854775807"])
    func integers_roundTripExactly(text: String) throws {
        let value = try decodeJSON(JSONValue.self, Data("[\(text)]".utf8))
        #expect(value == .array([.integer(Int64(text)!)]))
        #expect(String(decoding: try JSONEncoder().encode(value), as: UTF8.self) == "[\(text)]")
    }

    @Test func objectEquality_ignoresKeyOrderButSerializationKeepsIt() throws {
        let ab: JSONObject = ["a": .integer(1), "b": .string("x")]
        let ba: JSONObject = ["b": .string("x"), "a": .integer(1)]
        #expect(ab == ba)
        #expect(ba.keys == ["b", "a"])
        #expect(String(decoding: try JSONValue.object(ba).serializedJSON(), as: UTF8.self) == #"{"b":"x","a":1}"#)
    }

    @Test func scalarKinds_decodeToTheirCases() throws {
        let value = try decodeJSON(JSONValue.self, Data(#"[null,true,false,0,1.5,"s",[],{}]"#.utf8))
        #expect(value == .array([.null, .bool(true), .bool(false), .integer(0), .double(1.5), .string("s"), .array([]), .object([:])]))
    }
}

@Suite("JSONValue text")
struct JSONValueTextTests {
    @Test func parsedObject_keepsSourceKeyOrderAndReserializesIdentically() throws {
        let text = #"{"zeta":1,"alpha":[2.5,-3,true,null],"mid":{"y":"\u00e9\n\"q\"","x":{}},"beta":9007199254740993}"#
        let value = try JSONValue(parsing: Data(text.utf8))
        #expect(value.objectValue?.keys == ["zeta", "alpha", "mid", "beta"])
        #expect(value.objectValue?["mid"]?.objectValue?["y"] == .string("é\n\"q\""))
        #expect(String(decoding: try value.serializedJSON(), as: UTF8.self) == text.replacingOccurrences(of: "\\u00e9", with: "é"))
    }

    @Test func parsedAndFoundationDecodedValues_areEqual() throws {
        let data = try Fixtures.data("cipher_login")
        #expect(try JSONValue(parsing: data) == decodeJSON(JSONValue.self, data))
    }

    @Test func codableDecoding_sortsKeysDeterministically() throws {
        let value = try decodeJSON(JSONValue.self, Data(#"{"zeta":1,"alpha":2,"mid":3}"#.utf8))
        #expect(value.objectValue?.keys == ["alpha", "mid", "zeta"])
    }

    @Test(arguments: ["", "{", "[1,]", #"{"a" 1}"#, "01", "1.", "tru", #""\x""#, #""\ud800""#, "[1] 2", "\"a\nb\""])
    func malformedText_throwsParseError(text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: Data(text.utf8)) }
    }

    @Test func deepNesting_isRefused() {
        let text = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: Data(text.utf8)) }
    }
}
