import Crypto
import _CryptoExtras
import Foundation
import Testing
@testable import VaultCrypto

/// The precomputed HMAC-SHA256 and the authenticated CBC decryption give what swift-crypto's
/// own `HMAC<SHA256>` and `AES._CBC` give.
@Suite struct KeyedHMACTests {
    static func hex(_ s: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = s.startIndex
        while i < s.endIndex {
            let j = s.index(i, offsetBy: 2)
            out.append(UInt8(s[i..<j], radix: 16)!)
            i = j
        }
        return out
    }

    /// RFC 4231 test cases 1, 2 and 6 (a 20-byte key, a 4-byte key, a 131-byte key that is
    /// hashed first).
    @Test(arguments: [
        ("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "4869205468657265",
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        ("4a656665", "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        (String(repeating: "aa", count: 131),
         "54657374205573696e67204c6172676572205468616e20426c6f636b2d53697a65204b6579202d2048617368204b6579204669727374",
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
    ])
    func rfc4231Vectors(key: String, message: String, mac: String) {
        var hmac = KeyedHMACSHA256(key: SymmetricKey(data: Self.hex(key)))
        hmac.update(data: Self.hex(message))
        #expect(hmac.finalize() == Self.hex(mac))
    }

    /// Random keys and messages fed in random pieces: the same MAC as `HMAC<SHA256>`; one
    /// keyed state serves many messages.
    @Test func matchesHMACSHA256_overRandomInputs() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let key = SymmetricKey(data: (0..<Int.random(in: 0...100, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) })
            let keyed = KeyedHMACSHA256(key: key)
            let message = (0..<Int.random(in: 0...3000, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            var hmac = keyed
            var rest = message[...]
            while !rest.isEmpty {
                let n = Int.random(in: 1...rest.count, using: &generator)
                hmac.update(data: rest.prefix(n))
                rest = rest.dropFirst(n)
            }
            #expect(hmac.finalize() == Array(HMAC<SHA256>.authenticationCode(for: message, using: key)))
        }
    }

    /// Every length from 0 to 100 bytes round-trips; a corrupted padding is refused, never
    /// returned as plaintext.
    @Test func authenticatedCBC_roundTripsAndRefusesBadPadding() throws {
        let key = SymmetricKey(size: .bits256)
        let iv = (0..<16).map { UInt8($0) }
        for length in 0...100 {
            let plain = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            let ciphertext = Array(try AES._CBC.encrypt(plain, using: key, iv: AES._CBC.IV(ivBytes: iv)))
            #expect(try AuthenticatedCBC.decrypt(ciphertext, key: key, iv: iv) == plain)
            #expect(try AuthenticatedCBC.decrypt(ciphertext, key: key, iv: iv) == Array(try AES._CBC.decrypt(ciphertext, using: key, iv: AES._CBC.IV(ivBytes: iv))))
        }
        // A last block whose padding byte is 0 or above 16 (encrypted without padding).
        for bad: UInt8 in [0, 17, 255] {
            let block = [UInt8](repeating: 1, count: 15) + [bad]
            let ciphertext = Array(try AES._CBC.encrypt(block, using: key, iv: AES._CBC.IV(ivBytes: iv), noPadding: true))
            #expect(throws: VaultCryptoError.self) { try AuthenticatedCBC.decrypt(ciphertext, key: key, iv: iv) }
        }
        // Not whole blocks.
        #expect(throws: VaultCryptoError.self) { try AuthenticatedCBC.decrypt([UInt8](repeating: 0, count: 17), key: key, iv: iv) }
        #expect(throws: VaultCryptoError.self) { try AuthenticatedCBC.decrypt([UInt8](), key: key, iv: iv) }
    }
}
