import Testing
import Foundation
import Crypto
@testable import VaultCrypto
import VaultLogTesting

@Suite struct EncStringTests {
    let key = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 1))

    @Test(arguments: ["", "a", "0123456789abcde", "0123456789abcdef", String(repeating: "x", count: 4096), "pässwörd 🔑"])
    func encryptThenDecrypt_roundTrips(plaintext: String) throws {
        let enc = EncString.encrypt(plaintext, key: key)
        let reparsed = try EncString(enc.serialized)
        #expect(reparsed == enc)
        #expect(try reparsed.decryptString(key: key) == plaintext)
    }

    @Test func emptyPlaintext_isOneBlock() {
        #expect(EncString.encrypt("", key: key).ciphertext.count == 16)
    }

    @Test func wrongKey_failsAuthentication() throws {
        let enc = EncString.encrypt("secret", key: key)
        let other = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 2))
        #expect(throws: VaultCryptoError.authenticationFailed) { try enc.decrypt(key: other) }
    }

    @Test func everyFlippedByte_failsAuthentication() throws {
        let enc = EncString.encrypt("a secret worth protecting", key: key)
        let parts = [enc.iv, enc.ciphertext, enc.mac!]
        for part in 0..<3 {
            for index in 0..<parts[part].count {
                var altered = parts
                altered[part][index] ^= 0x01
                let tampered = try EncString(iv: altered[0], ciphertext: altered[1], mac: altered[2])
                #expect(throws: VaultCryptoError.authenticationFailed) { try tampered.decrypt(key: key) }
            }
        }
    }

    @Test(arguments: [
        "", "2", "2.", "8.AAAA", "2.AAAA|BBBB", "2.not base64!|AAAAAAAAAAAAAAAAAAAAAA==|AAAA",
        "2.AAAAAAAAAAAAAAAAAAAAAA==|AAAAAAAAAAAAAAAAAAAAAA==|AAAA",
        "2.AAAA|AAAAAAAAAAAAAAAAAAAAAA==|AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        "2.AAAAAAAAAAAAAAAAAAAAAA==|AAAAAAAAAAAAAAAAAAAAAA==|AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=|extra",
        "plaintext name",
    ])
    func malformedEncString_throwsInvalidEncString(text: String) {
        #expect {
            try EncString(text)
        } throws: { error in
            guard case VaultCryptoError.invalidEncString = error else { return false }
            return true
        }
    }

    @Test func invalidTypeMessage_matchesSdkWording() {
        #expect(throws: VaultCryptoError.invalidEncString("Invalid symmetric type, got type 8 with 1 parts")) {
            try EncString("8.AAAA")
        }
    }

    @Test func typeZero_decryptsOnlyWithLegacy32ByteKey() throws {
        let aesKey = SymmetricKey(data: [UInt8](repeating: 7, count: 32))
        let iv = [UInt8](repeating: 3, count: 16)
        let ct = try Array(AES._CBC.encrypt(Array("legacy".utf8), using: aesKey, iv: AES._CBC.IV(ivBytes: iv)))
        let text = "0.\(Base64.encode(iv))|\(Base64.encode(ct))"
        let enc = try EncString(text)
        #expect(enc.type == .aesCbc256B64)
        #expect(enc.serialized == text)
        #expect(try enc.decryptLegacy(aesKey: aesKey) == Array("legacy".utf8))
        // Downgrade protection: a 64-byte key refuses unauthenticated type 0.
        #expect(throws: VaultCryptoError.wrongKeyType("a type-0 (unauthenticated) EncString cannot be decrypted with a 64-byte key")) {
            try enc.decrypt(key: key)
        }
    }

    @Test func legacyProtectedUserKey_unwrapsWithUnstretchedMasterKey() throws {
        let master = try MasterKey.derive(password: "pw", email: "a@b.c", kdf: .pbkdf2(iterations: 5000))
        let userKey = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 9))
        let iv = [UInt8](repeating: 1, count: 16)
        let ct = try Array(AES._CBC.encrypt(userKey.exportBytes(), using: SymmetricKey(data: master.exportBytes()), iv: AES._CBC.IV(ivBytes: iv)))
        let protected = try EncString("0.\(Base64.encode(iv))|\(Base64.encode(ct))")
        #expect(try master.decryptUserKey(protected) == userKey)
    }

    @Test func protectedUserKey_roundTrips() throws {
        let master = try MasterKey.derive(password: "correct horse", email: " Someone@Example.com ", kdf: .pbkdf2(iterations: 5000))
        let userKey = SymmetricCryptoKey.generate()
        let protected = master.encryptUserKey(userKey)
        #expect(try master.decryptUserKey(protected) == userKey)
        let wrong = try MasterKey.derive(password: "wrong horse", email: "someone@example.com", kdf: .pbkdf2(iterations: 5000))
        #expect(throws: VaultCryptoError.authenticationFailed) { try wrong.decryptUserKey(protected) }
    }

    @Test func perCipherKey_wrapsAndUnwraps() throws {
        let cipherKey = SymmetricCryptoKey.generate()
        let wrapped = key.wrap(cipherKey)
        #expect(try key.unwrap(wrapped) == cipherKey)
        let field = EncString.encrypt("field", key: cipherKey)
        #expect(throws: VaultCryptoError.authenticationFailed) { try field.decrypt(key: key) }
    }

    @Test func tooFewPbkdf2Iterations_isRejected() {
        #expect(throws: VaultCryptoError.invalidKdfParameters("PBKDF2 iterations 100 is outside the accepted range 5000–2000000")) {
            try MasterKey.derive(password: "p", email: "e", kdf: .pbkdf2(iterations: 100))
        }
    }

    @Test func keyMaterial_isRedactedInDescriptions() throws {
        let master = try MasterKey.derive(password: "p", email: "e", kdf: .pbkdf2(iterations: 5000))
        let printed = "\(key) \(String(reflecting: key)) \(master)"
        #expect(!printed.contains(key.exportBase64()))
        #expect(!printed.contains(Base64.encode(master.exportBytes())))
        #expect(printed.contains("redacted"))
    }

    @Test func codable_isPlainJSONString() throws {
        let enc = EncString.encrypt("x", key: key)
        let json = try JSONEncoder().encode(["name": enc])
        #expect(String(decoding: json, as: UTF8.self) == "{\"name\":\"\(enc.serialized.replacingOccurrences(of: "/", with: "\\/"))\"}")
        #expect(try JSONDecoder().decode([String: EncString].self, from: json)["name"] == enc)
    }

    /// Ids the emulator and the deterministic dependencies make: a version-4 UUID that
    /// Foundation parses back to the same string, the same for the same seed.
    @Test func uuidString_isAVersion4UUID_thatFoundationReadsBack() {
        for seed in UInt64(0)..<200 {
            let id = SeededRandomSource(seed: seed).uuidString()
            #expect(id == SeededRandomSource(seed: seed).uuidString())
            #expect(UUID(uuidString: id)?.uuidString.lowercased() == id)
            let chars = Array(id)
            #expect(chars[14] == "4")
            #expect("89ab".contains(chars[19]))
        }
    }

    @Test func seededRandom_isDeterministic() {
        #expect(SeededRandomSource(seed: 42).bytes(40) == SeededRandomSource(seed: 42).bytes(40))
        #expect(SeededRandomSource(seed: 42).bytes(16) != SeededRandomSource(seed: 43).bytes(16))
    }

    @Test(arguments: [0, 1, 2, 3, 4, 5, 63, 64, 65, 4096, 12_289])
    func base64_matchesFoundation(length: Int) {
        let bytes = SeededRandomSource(seed: UInt64(length)).bytes(length)
        let ours = Base64.encode(bytes)
        #expect(ours == Data(bytes).base64EncodedString())
        #expect(Base64.decode(ours) == bytes)
    }
}

@Suite struct Base64StrictnessTests {
    /// Every 4-character string over a small alphabet with padding in every position: what we
    /// accept, Foundation accepts and decodes to the same bytes; we refuse padding anywhere but
    /// at the end (Foundation on Linux accepts "AA=A").
    @Test func decode_isStrictAboutPadding_andAgreesWithFoundationOnWhatItAccepts() {
        let symbols = Array("Aa+/=9z*".utf8)
        var problems: [String] = []
        for a in symbols { for b in symbols { for c in symbols { for d in symbols {
            let text = String(decoding: [a, b, c, d], as: UTF8.self)
            let ours = Base64.decode(text)
            let wellFormed = text.range(of: #"^[A-Za-z0-9+/]{2}([A-Za-z0-9+/]{2}|[A-Za-z0-9+/]=|==)$"#, options: .regularExpression) != nil
            if wellFormed != (ours != nil) { problems.append("\(text): ours \(String(describing: ours))") }
            if let ours, ours != Data(base64Encoded: text).map({ [UInt8]($0) }) { problems.append("\(text): differs from Foundation") }
        } } } }
        #expect(problems.isEmpty, "\(problems.prefix(10))")
    }

    @Test func longInput_roundTrips_andAByteOutsideTheAlphabetAnywhereIsRefused() {
        let bytes = SeededRandomSource(seed: 9).bytes(4096)
        let encoded = Array(Base64.encode(bytes).utf8)
        #expect(encoded.withUnsafeBytes { Base64.decode($0) } == bytes)
        for position in stride(from: 0, to: encoded.count - 3, by: 97) {
            var broken = encoded
            broken[position] = UInt8(ascii: "*")
            #expect(broken.withUnsafeBytes { Base64.decode($0) } == nil, "position \(position)")
        }
    }
}
