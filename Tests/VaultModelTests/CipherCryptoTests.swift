import Foundation
import Testing
import VaultCrypto
import VaultJSON
@testable import VaultModel
import VaultLogTesting

@Suite("Cipher encryption")
struct CipherCryptoTests {
    @Test func loginFixture_decryptsWithPerCipherKey() throws {
        let view = try Fixtures.cipher("cipher_login").decrypt(userKey: Fixtures.userKey)
        #expect(view.name == "Example Bank")
        #expect(view.login?.username == "alice@example.com")
        #expect(view.login?.password == "hunter2")
        #expect(view.login?.uris?.first?.uri == "https://bank.example.com/login")
        #expect(view.fields?.first?.value == "old_secret_value")
        #expect(view.passwordHistory?.first?.password == "hunter1")
        #expect(view.cipherKey == Fixtures.cipherKey)
    }

    @Test(arguments: ["cipher_login", "cipher_unknown_type"])
    func decryptEncryptDecode_givesTheSameItem(fixture: String) throws {
        let cipher = try Fixtures.cipher(fixture)
        let view = try cipher.decrypt(userKey: Fixtures.userKey)
        let reencrypted = try view.encrypt(userKey: Fixtures.userKey, random: SeededRandomSource(seed: 7))
        let decoded = try decodeJSON(Cipher.self, encodeJSON(reencrypted))
        #expect(try decoded.decrypt(userKey: Fixtures.userKey) == view)
        #expect(decoded.extra == cipher.extra)
        #expect(decoded.key == cipher.key, "an unchanged per-cipher key is reused, not re-wrapped")
        #expect(decoded.name != cipher.name, "fields are re-encrypted with fresh IVs")
    }

    @Test func unknownCipherType_keepsOpaqueDataAndTypeThroughReencryption() throws {
        let cipher = try Fixtures.cipher("cipher_unknown_type")
        let view = try cipher.decrypt(userKey: Fixtures.userKey)
        #expect(view.type == .unknown(9))
        #expect(view.name == "Hovercraft registration")
        let json = try decodeJSON(JSONValue.self, encodeJSON(view.encrypt(userKey: Fixtures.userKey))).objectValue
        #expect(json?["type"] == .integer(9))
        #expect(json?["futureThing"] == cipher.extra["futureThing"])
    }

    @Test(arguments: Samples.all, [false, true])
    func everyItemType_roundTripsThroughEncryption(view: CipherView, perCipherKey: Bool) throws {
        let random = SeededRandomSource(seed: 42)
        let cipher = try view.encrypt(userKey: Fixtures.userKey, random: random, generateCipherKey: perCipherKey)
        let decoded = try decodeJSON(Cipher.self, encodeJSON(cipher))
        let decrypted = try decoded.decrypt(userKey: Fixtures.userKey)
        #expect((decoded.key != nil) == perCipherKey)
        #expect((decrypted.cipherKey != nil) == perCipherKey)
        var expected = view
        expected.cipherKey = decrypted.cipherKey
        #expect(decrypted == expected)
        if perCipherKey {
            // The fields really are under the cipher key, not the user key.
            #expect(throws: VaultCryptoError.authenticationFailed) { try decoded.name!.decrypt(key: Fixtures.userKey) }
        }
    }

    @Test func withNewCipherKey_reencryptsFieldsAndOpaqueEncStringsUnderTheNewKey() throws {
        let cipher = try Fixtures.cipher("cipher_login")
        let view = try cipher.decrypt(userKey: Fixtures.userKey).withNewCipherKey(random: SeededRandomSource(seed: 9))
        let rekeyed = try view.encrypt(userKey: Fixtures.userKey, random: SeededRandomSource(seed: 10))
        let newKey = try Fixtures.userKey.unwrap(#require(rekeyed.key))
        #expect(newKey != Fixtures.cipherKey)
        let opaque = try EncString(#require(rekeyed.extra["futureEncrypted"]?.stringValue))
        #expect(try opaque.decryptString(key: newKey) == "opaque data under the cipher key")
        #expect(try rekeyed.decrypt(userKey: Fixtures.userKey).login?.password == "hunter2")
        #expect(rekeyed.extra["futureTopLevel"] == cipher.extra["futureTopLevel"])
    }

    @Test func wrongUserKey_failsOnTheCipherKeyWithAClearMessage() throws {
        let cipher = try Fixtures.cipher("cipher_login")
        let wrongKey = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 99))
        #expect {
            try cipher.decrypt(userKey: wrongKey)
        } throws: { error in
            error as? VaultModelError == .fieldDecryptionFailed(cipherID: cipher.id, field: "key", underlying: .authenticationFailed)
        }
    }

    @Test func tamperedField_errorNamesTheFieldAndCipher() throws {
        var cipher = try Fixtures.cipher("cipher_login")
        cipher.login?.password = EncString.encrypt("x", key: SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 5)))
        let error = try #require(throws: VaultModelError.self) { try cipher.decrypt(userKey: Fixtures.userKey) }
        #expect(error == .fieldDecryptionFailed(cipherID: cipher.id, field: "login.password", underlying: .authenticationFailed))
        #expect(error.description == "cipher 3f2a6c1e-0b7d-4c8e-9a51-2d4e6f708192: login.password: authentication failed (wrong key or tampered data)")
    }

    @Test func tamperedNestedField_errorGivesTheIndexedPath() throws {
        var cipher = try Fixtures.cipher("cipher_login")
        cipher.fields?[1].value = EncString.encrypt("x", key: SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 6)))
        let error = try #require(throws: VaultModelError.self) { try cipher.decrypt(userKey: Fixtures.userKey) }
        #expect(error == .fieldDecryptionFailed(cipherID: cipher.id, field: "fields[1].value", underlying: .authenticationFailed))
    }

    @Test func referenceVectorT2_decryptsTheNameInsideACipher() throws {
        // Test vector T2 (Bitwarden SDK, sdk-internal traits/decryptable.rs).
        let json = """
        {"object":"cipherDetails","id":"t2","type":2,"key":null,"secureNote":{"type":0},
         "name":"2.fkvl0+sL1lwtiOn1eewsvQ==|dT0TynLl8YERZ8x7dxC+DQ==|cWhiRSYHOi/AA2LiV/JBJWbO9C7pbUpOM6TMAcV47hE=",
         "revisionDate":"2024-01-01T00:00:00.0000000Z"}
        """
        let key = try SymmetricCryptoKey(base64: "sJnO8rVi0dTwND43n0T9x7665s8mVUYNAaJ4nm7gx1iia1I7947URL60nwfIHaf9QJePO4VkNN0oT9jh4iC6aA==")
        let view = try decodeJSON(Cipher.self, Data(json.utf8)).decrypt(userKey: key)
        #expect(view.name == "Hello, World!")
        #expect(view.type == .secureNote)
    }

    @Test func descriptions_neverShowPasswordsOrKeys() throws {
        var view = try Fixtures.cipher("cipher_login").decrypt(userKey: Fixtures.userKey)
        view.attachments = [AttachmentView(id: "a", fileName: "f", key: Fixtures.userKey)]
        var dumped = ""
        dump(view, to: &dumped)
        for text in [String(describing: view), String(reflecting: view), "\(view)", dumped] {
            #expect(text.contains("Example Bank"), "descriptions stay useful")
            for secret in ["hunter2", "hunter1", "old_secret_value", Fixtures.cipherKey.exportBase64(), Fixtures.userKey.exportBase64()] {
                #expect(!text.contains(secret), "leaked \(secret) in \(text)")
            }
        }
    }
}

@Suite("Cipher keys")
struct CipherKeyTests {
    @Test func generatingACipherKey_movesOpaqueEncStringsFromUserKeyToCipherKey() throws {
        let cipher = try Fixtures.cipher("cipher_unknown_type")
        #expect(cipher.key == nil)
        let upgraded = try cipher.decrypt(userKey: Fixtures.userKey)
            .encrypt(userKey: Fixtures.userKey, random: SeededRandomSource(seed: 11), generateCipherKey: true)
        let cipherKey = try Fixtures.userKey.unwrap(#require(upgraded.key))
        let registration = try #require(upgraded.extra["futureThing"]?.objectValue?["registration"]?.stringValue)
        #expect(try EncString(registration).decryptString(key: cipherKey) == "HC-4711")
        #expect(upgraded.extra["futureThing"]?.objectValue?["eels"] == .integer(3))
        #expect(try upgraded.decrypt(userKey: Fixtures.userKey).name == "Hovercraft registration")
    }

    @Test func generateCipherKey_keepsAnExistingCipherKey() throws {
        let view = try Fixtures.cipher("cipher_login").decrypt(userKey: Fixtures.userKey)
        let cipher = try view.encrypt(userKey: Fixtures.userKey, generateCipherKey: true)
        #expect(try Fixtures.userKey.unwrap(#require(cipher.key)) == Fixtures.cipherKey)
    }
}

@Suite("Login URI checksums")
struct URIChecksumTests {
    /// A stand-in digest: the test checks the plumbing (which bytes are hashed, how the result
    /// is encoded), not SHA-256 itself, which the caller injects.
    static let reversedBytes: @Sendable ([UInt8]) -> [UInt8] = { Array($0.reversed()) }

    @Test func fixtureChecksum_isBase64OfSHA256OfTheURI() throws {
        // Value computed with Python hashlib in make_fixtures.py.
        let uri = try #require(try Fixtures.cipher("cipher_login").decrypt(userKey: Fixtures.userKey).login?.uris?.first)
        #expect(uri.uriChecksum == "VynInQLQ4w5XzgDN9EE3OZFr2t4to7pLlB7kFRGwTys=")
    }

    @Test func editedURIWithoutHashFunction_throwsStaleChecksumInsteadOfUploading() throws {
        var view = try Fixtures.cipher("cipher_login").decrypt(userKey: Fixtures.userKey)
        view.login?.uris?[0].uri = "https://new.example.com"
        let error = try #require(throws: VaultModelError.self) { try view.encrypt(userKey: Fixtures.userKey) }
        #expect(error == .staleURIChecksum(cipherID: view.id, field: "login.uris[0]"))
    }

    @Test func hashFunction_regeneratesChecksumOfTheEditedURI() throws {
        var view = try Fixtures.cipher("cipher_login").decrypt(userKey: Fixtures.userKey)
        view.login?.uris?[0].uri = "https://new.example.com"
        let cipher = try view.encrypt(userKey: Fixtures.userKey, sha256: Self.reversedBytes)
        let checksum = try cipher.decrypt(userKey: Fixtures.userKey).login?.uris?.first?.uriChecksum
        #expect(checksum == Base64.encode(Array("https://new.example.com".utf8.reversed())))
    }
}

@Suite("Redaction")
struct RedactionTests {
    static let secrets = ["s3cret!", "JBSWY3DP", "MIGHAgEAMBMGByqGSM49AgEG", "4111111111111111", "078-05-1120",
                          "b3BlbnNzaA==", "12345678", "D123", "P987", "1234", "prior-pw-9"]

    @Test(arguments: Samples.all)
    func everyItemType_descriptionAndDumpHideSecrets(view: CipherView) {
        var dumped = ""
        dump(view, to: &dumped)
        var texts = [String(describing: view), String(reflecting: view), dumped]
        texts += [view.login.map { "\($0)" }, view.card.map { "\($0)" }, view.identity.map { "\($0)" },
                  view.sshKey.map { "\($0)" }, view.bankAccount.map { "\($0)" }, view.driversLicense.map { "\($0)" },
                  view.passport.map { "\($0)" }, view.login?.fido2Credentials.map { "\($0)" }].compactMap { $0 }
        for text in texts {
            for secret in Self.secrets {
                #expect(!text.contains(secret), "leaked \(secret) in \(text)")
            }
        }
    }
}
