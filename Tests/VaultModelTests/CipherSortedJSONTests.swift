import Foundation
import Testing
import VaultCrypto
@testable import VaultJSON
import VaultLogTesting
@testable import VaultModel

/// A cipher's JSON written directly (`Cipher.writeSortedJSON`, the path `SortedJSONEncoder`
/// takes for a cipher) against Foundation's `JSONEncoder` with `.sortedKeys`: the same bytes for
/// every cipher, with every kind of member, unknown members at every level and keys that sort
/// between the known ones.
struct CipherSortedJSONTests {
    /// The direct path's bytes, slashes escaped and not, equal Foundation's; and the direct path
    /// was taken (not handed to the `Encoder` path).
    static func expectDirectSame(_ cipher: Cipher, sourceLocation: SourceLocation = #_sourceLocation) throws {
        for escapes in [true, false] {
            let encoder = SortedJSONEncoder(escapesSlashes: escapes)
            guard let ours = encoder.directEncode(cipher) else {
                Issue.record("the direct path gave up on a cipher", sourceLocation: sourceLocation)
                return
            }
            let theirs = try SortedJSONEncoderTests.foundation(cipher, escapesSlashes: escapes)
            #expect(Bool(ours == theirs), "\(String(decoding: ours, as: UTF8.self))\n\(String(decoding: theirs, as: UTF8.self))",
                    sourceLocation: sourceLocation)
            #expect(try encoder.encode(cipher) == ours, sourceLocation: sourceLocation)
        }
    }

    @Test(arguments: ["cipher_login", "cipher_unknown_type"])
    func fixtureCiphers_writeAsFoundationDoes(name: String) throws {
        try Self.expectDirectSame(try JSONDecoder().decode(Cipher.self, from: Fixtures.data(name)))
    }

    /// 500 generated ciphers: every item type, every nested record, nulls and absent members,
    /// unknown members of any JSON at every level (keys before, between and after the known
    /// ones, non-ASCII, with escapes).
    @Test func generatedCiphers_writeAsFoundationDoes() throws {
        var random = RandomJSON(seed: 0xD1EC7)
        var decoded = 0
        for _ in 0..<500 {
            let document = random.fullCipherDocument()
            guard let cipher = try? JSONDecoder().decode(Cipher.self, from: Data(try document.serializedJSON())) else { continue }
            try Self.expectDirectSame(cipher)
            decoded += 1
        }
        #expect(decoded > 450)
    }

    /// Unknown members set in code under a known member's name are left out, as `encode(to:)`
    /// leaves them out; a passkey's carried `creationDate` gives way to its own.
    @Test func unknownMembersNamedAsKnownOnes_areLeftOut() throws {
        var cipher = try JSONDecoder().decode(Cipher.self, from: Fixtures.data("cipher_login"))
        cipher.extra = ["name": .string("shadow"), "id2": .integer(7), "Zeta": .null, "type": .bool(true)]
        cipher.login?.extra = ["uri": .string("legacy"), "username": .integer(1), "totp0": .array([])]
        var passkey = CipherFido2Credential()
        passkey.creationDate = try BitwardenDate("2026-01-01T00:00:00Z")
        passkey.extra = ["creationDate": .string("carried"), "counter": .integer(3), "zz": .double(1.0)]
        cipher.login?.fido2Credentials = [passkey, CipherFido2Credential()]
        try Self.expectDirectSame(cipher)
        let text = String(decoding: try SortedJSONEncoder().encode(cipher), as: UTF8.self)
        #expect(!text.contains("shadow") && !text.contains("legacy") && !text.contains("carried"))
    }

    /// A number `JSONEncoder` refuses makes the direct path give up, and the caller gets
    /// `JSONEncoder`'s error.
    @Test func aNumberThatIsNotFinite_fallsBackToJSONEncodersError() throws {
        var cipher = try JSONDecoder().decode(Cipher.self, from: Fixtures.data("cipher_login"))
        cipher.extra = ["x": .array([.double(.infinity)])]
        #expect(SortedJSONEncoder().directEncode(cipher) == nil)
        #expect(throws: EncodingError.self) { try SortedJSONEncoder().encode(cipher) }
    }
}

extension RandomJSON {
    /// Unknown members for an object whose known keys are `known`: keys next to them (before,
    /// between, after, a prefix or an extension of one), or random text.
    mutating func unknownMembers(into object: inout JSONObject, near known: [String]) {
        for _ in 0..<Int.random(in: 0..<3, using: &generator) where chance(40) {
            let anchor = known.randomElement(using: &generator) ?? "k"
            let key = [anchor + "0", anchor + "Z", String(anchor.dropLast()), "A" + anchor, "~", text(), anchor.uppercased()]
                .randomElement(using: &generator)!
            if object[key] == nil { object[key] = anyValue() }
        }
    }

    /// An object of the given EncString members, each present, null or absent, with unknown ones.
    mutating func record(_ names: [String]) -> JSONValue {
        var object = JSONObject()
        for name in names { maybe(&object, name, encString()) }
        unknownMembers(into: &object, near: names)
        return .object(object)
    }

    /// A cipher document with every member the model knows, each present, null or absent.
    mutating func fullCipherDocument() -> JSONValue {
        var cipher = JSONObject()
        cipher["type"] = .integer(Int64.random(in: 1...9, using: &generator))
        for name in ["object", "id", "organizationId", "folderId"] { maybe(&cipher, name, .string(text())) }
        for name in ["name", "notes", "key"] { maybe(&cipher, name, encString()) }
        for name in ["favorite", "edit", "viewPassword", "organizationUseTotp"] { maybe(&cipher, name, .bool(chance(50))) }
        maybe(&cipher, "reprompt", .integer(Int64.random(in: 0...3, using: &generator)))
        for name in ["revisionDate", "creationDate", "deletedDate", "archivedDate"] { maybe(&cipher, name, date()) }
        maybe(&cipher, "collectionIds", .array((0..<Int.random(in: 0..<3, using: &generator)).map { _ in .string(text()) }))
        var login = JSONObject()
        for name in ["username", "password", "totp", "uri"] { maybe(&login, name, encString()) }
        maybe(&login, "passwordRevisionDate", date())
        maybe(&login, "autofillOnPageLoad", .bool(chance(50)))
        maybe(&login, "uris", .array((0..<Int.random(in: 0..<3, using: &generator)).map { _ in
            var uri = JSONObject()
            maybe(&uri, "uri", encString())
            maybe(&uri, "uriChecksum", encString())
            maybe(&uri, "match", .integer(Int64.random(in: 0...5, using: &generator)))
            unknownMembers(into: &uri, near: ["match", "uri", "uriChecksum"])
            return .object(uri)
        }))
        maybe(&login, "fido2Credentials", .array((0..<Int.random(in: 0..<3, using: &generator)).map { _ in
            let names = ["credentialId", "keyType", "keyAlgorithm", "keyCurve", "keyValue", "rpId", "rpName", "userHandle",
                         "userName", "userDisplayName", "counter", "discoverable"]
            guard case .object(var passkey) = record(names) else { return .null }
            maybe(&passkey, "creationDate", date())
            return .object(passkey)
        }))
        unknownMembers(into: &login, near: ["autofillOnPageLoad", "password", "uri", "uris", "username"])
        maybe(&cipher, "login", .object(login))
        maybe(&cipher, "card", record(["cardholderName", "brand", "number", "expMonth", "expYear", "code"]))
        maybe(&cipher, "identity", record(["title", "firstName", "middleName", "lastName", "address1", "address2", "address3",
                                           "city", "state", "postalCode", "country", "company", "email", "phone", "ssn",
                                           "username", "passportNumber", "licenseNumber"]))
        maybe(&cipher, "sshKey", record(["privateKey", "publicKey", "keyFingerprint"]))
        for name in ["bankAccount", "driversLicense", "passport"] where chance(25) {
            maybe(&cipher, name, record(["bankName", "accountNumber", "number", "issuingCountry"]))
        }
        var note = JSONObject()
        maybe(&note, "type", .integer(Int64.random(in: 0...2, using: &generator)))
        unknownMembers(into: &note, near: ["type"])
        maybe(&cipher, "secureNote", .object(note))
        maybe(&cipher, "fields", .array((0..<Int.random(in: 0..<3, using: &generator)).map { _ in
            var field = JSONObject()
            maybe(&field, "name", encString())
            maybe(&field, "value", encString())
            maybe(&field, "type", .integer(Int64.random(in: 0...3, using: &generator)))
            maybe(&field, "linkedId", .integer(Int64.random(in: 100...420, using: &generator)))
            unknownMembers(into: &field, near: ["linkedId", "name", "type", "value"])
            return .object(field)
        }))
        maybe(&cipher, "passwordHistory", .array((0..<Int.random(in: 0..<3, using: &generator)).map { _ in
            var entry = JSONObject()
            maybe(&entry, "password", encString())
            maybe(&entry, "lastUsedDate", date())
            unknownMembers(into: &entry, near: ["lastUsedDate", "password"])
            return .object(entry)
        }))
        maybe(&cipher, "attachments", .array((0..<Int.random(in: 0..<3, using: &generator)).map { _ in
            var attachment = JSONObject()
            for name in ["id", "url", "size", "sizeName"] { maybe(&attachment, name, .string(text())) }
            for name in ["fileName", "key"] { maybe(&attachment, name, encString()) }
            unknownMembers(into: &attachment, near: ["fileName", "id", "key", "size", "sizeName", "url"])
            return .object(attachment)
        }))
        var permissions = JSONObject()
        maybe(&permissions, "delete", .bool(chance(50)))
        maybe(&permissions, "restore", .bool(chance(50)))
        unknownMembers(into: &permissions, near: ["delete", "restore"])
        maybe(&cipher, "permissions", .object(permissions))
        unknownMembers(into: &cipher, near: ["archivedDate", "card", "id", "identity", "login", "name", "organizationId",
                                              "passport", "passwordHistory", "type", "viewPassword"])
        return .object(cipher)
    }
}
