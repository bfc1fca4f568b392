import Foundation
import Testing
import VaultCrypto
import VaultJSON
import VaultModel
import VaultLogTesting

/// A cipher's `attachments` as both servers send them survive decode → encode unchanged, with
/// both decoders the package has.
@Suite("Cipher attachments JSON")
struct CipherAttachmentCodingTests {
    static func cipherJSON() -> Data {
        let random = SeededRandomSource(seed: 40)
        let userKey = SymmetricCryptoKey.generate(using: random)
        let name = EncString.encrypt("Item", key: userKey, random: random).serialized
        let fileName = EncString.encrypt("scan.pdf", key: userKey, random: random).serialized
        let key = userKey.wrap(SymmetricCryptoKey.generate(using: random), random: random).serialized
        let text = """
        {"object":"cipherDetails","id":"0c5a3f4e-1111-4222-8333-944445555666","type":2,"name":"\(name)",
         "secureNote":{"type":0},"revisionDate":"2026-01-01T00:00:02.0000000Z","creationDate":"2026-01-01T00:00:00.0000000Z",
         "attachments":[
           {"object":"attachment","id":"k3jd8s0alq2mzx7c6v5b4n1p9o0i8u7y","url":"/attachments/0c5a3f4e-1111-4222-8333-944445555666/k3jd8s0alq2mzx7c6v5b4n1p9o0i8u7y",
            "fileName":"\(fileName)","key":"\(key)","size":"5073","sizeName":"5 KB","futureAttachmentFlag":{"x":1}},
           {"id":"0a1b2c3d4e5f60718293","url":null,"fileName":"\(fileName)","key":null,"size":"123","sizeName":"123.00 bytes"}
         ]}
        """
        return Data(text.utf8)
    }

    @Test func decodeEncode_keepsEveryAttachmentField() throws {
        let original = Self.cipherJSON()
        let before = try JSONDecoder().decode(JSONValue.self, from: original)
        for cipher in [try JSONDecoder().decode(Cipher.self, from: original), try JSONTapeDecoder().decode(Cipher.self, from: original)] {
            let reencoded = try JSONDecoder().decode(JSONValue.self, from: try JSONEncoder().encode(cipher))
            #expect(reencoded.objectValue?["attachments"] == before.objectValue?["attachments"])
            let sorted = try JSONDecoder().decode(JSONValue.self, from: Data(try SortedJSONEncoder().encode(cipher)))
            #expect(sorted.objectValue?["attachments"] == before.objectValue?["attachments"])
            #expect(cipher.attachments?.count == 2)
            #expect(cipher.attachment(id: "k3jd8s0alq2mzx7c6v5b4n1p9o0i8u7y")?.extra["object"] == .string("attachment"))
            #expect(cipher.attachment(id: "0a1b2c3d4e5f60718293")?.size == "123")
        }
    }

    @Test func fieldKey_isTheItemsOwnKeyWhenItHasOne() throws {
        let random = SeededRandomSource(seed: 41)
        let userKey = SymmetricCryptoKey.generate(using: random)
        let itemKey = SymmetricCryptoKey.generate(using: random)
        var cipher = Cipher(type: .secureNote, name: EncString.encrypt("n", key: itemKey, random: random))
        #expect(try cipher.fieldKey(userKey: userKey) == userKey)
        cipher.key = userKey.wrap(itemKey, random: random)
        #expect(try cipher.fieldKey(userKey: userKey) == itemKey)
        let stranger = SymmetricCryptoKey.generate(using: random)
        #expect(throws: VaultModelError.self) { try cipher.fieldKey(userKey: stranger) }
    }
}
