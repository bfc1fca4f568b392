import Foundation
import Testing
@testable import VaultCrypto
import VaultLogTesting

@Suite struct EncArrayBufferTests {
    let key = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 11))

    static func hex(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            out.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return out
    }

    /// Key bytes 0...63 (AES key 00..1f, MAC key 20..3f), IV a0...af, plaintext
    /// "VaultLog attachment test vector\n" (32 bytes, so PKCS#7 adds a whole block).
    ///
    /// Expected bytes computed once, outside Swift, with Python 3 and the `cryptography` package
    /// (48.0.0): PKCS7(128) padding, AES-256-CBC with the first 32 key bytes, HMAC-SHA256 with
    /// the last 32 over iv ‖ ciphertext, then `bytes([2]) + iv + mac + ciphertext`.
    static let vectorHex = "02a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
        + "a4abde8da770acc8b606c959a9e4a91c0b17c4e68d8bf8022769a4325de02f0f"
        + "20e647cdf6ce6685545c08197e58dbfb622a45d70755f45e4c369c2c4514c6ca"
        + "569ce138f2281d14a7020f0a7ed962dd"

    @Test func fixedIV_matchesAnIndependentlyComputedVector() throws {
        let key = try SymmetricCryptoKey(bytes: Array(0..<64).map(UInt8.init))
        let iv = Array(0xA0..<0xB0).map(UInt8.init)
        let plaintext = Array("VaultLog attachment test vector\n".utf8)
        let expected = Self.hex(Self.vectorHex)
        #expect(EncArrayBuffer.encrypt(plaintext, key: key, iv: iv).bytes == expected)
        #expect(try EncArrayBuffer(bytes: expected).decrypt(key: key) == plaintext)
    }

    @Test(arguments: [0, 1, 15, 16, 17, 4096, 100_003])
    func encryptThenDecrypt_roundTrips(count: Int) throws {
        let random = SeededRandomSource(seed: UInt64(count))
        let plaintext = random.bytes(count)
        let blob = EncArrayBuffer.encrypt(plaintext, key: key, random: random).bytes
        #expect(blob.first == 2)
        #expect(blob.count == EncArrayBuffer.headerCount + AESCBC.ciphertextCount(plaintextCount: count))
        let parsed = try EncArrayBuffer(bytes: blob)
        #expect(parsed.bytes == blob)
        #expect(try parsed.decrypt(key: key) == plaintext)
    }

    @Test func everyFlippedByte_isRefused() throws {
        let blob = EncArrayBuffer.encrypt(Array("attachment".utf8), key: key, random: SeededRandomSource(seed: 3)).bytes
        for index in 1..<blob.count {
            var altered = blob
            altered[index] ^= 0x01
            #expect(throws: VaultCryptoError.authenticationFailed) { try EncArrayBuffer(bytes: altered).decrypt(key: key) }
        }
    }

    @Test func wrongKey_failsAuthentication() throws {
        let blob = EncArrayBuffer.encrypt(Array("attachment".utf8), key: key, random: SeededRandomSource(seed: 3)).bytes
        let other = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 12))
        #expect(throws: VaultCryptoError.authenticationFailed) { try EncArrayBuffer(bytes: blob).decrypt(key: other) }
    }

    @Test func malformedBlobs_areRefusedNamingTheProblem() throws {
        let blob = EncArrayBuffer.encrypt(Array("attachment".utf8), key: key, random: SeededRandomSource(seed: 3)).bytes
        func reason(_ bytes: [UInt8]) -> String? {
            do {
                _ = try EncArrayBuffer(bytes: bytes)
                return nil
            } catch let VaultCryptoError.invalidEncArrayBuffer(reason) {
                return reason
            } catch {
                return "unexpected \(error)"
            }
        }
        #expect(reason([]) == "the data is empty")
        #expect(reason([0] + blob.dropFirst())?.contains("encryption type 0 is not supported") == true)
        #expect(reason(Array(blob.prefix(60)))?.contains("too short") == true)
        #expect(reason(blob + [0])?.contains("not a multiple of 16") == true)
    }

    @Test func sealedAttachment_opensWithTheItemKeyOnly() throws {
        let itemKey = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 20))
        let contents = SeededRandomSource(seed: 21).bytes(3000)
        let sealed = SealedAttachment.seal(fileName: "scan.pdf", contents: contents, itemKey: itemKey,
                                           random: SeededRandomSource(seed: 22))
        #expect(try itemKey.unwrap(sealed.wrappedKey) == sealed.attachmentKey)
        #expect(try sealed.fileName.decryptString(key: itemKey) == "scan.pdf")
        #expect(try SealedAttachment.open(encryptedData: sealed.encryptedData, wrappedKey: sealed.wrappedKey, itemKey: itemKey)
                == contents)
        // The body is under the attachment's own key, not the item key.
        #expect(throws: VaultCryptoError.authenticationFailed) {
            try EncArrayBuffer(bytes: sealed.encryptedData).decrypt(key: itemKey)
        }
    }
}
