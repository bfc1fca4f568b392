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

    /// Every length from 0 to 100 bytes round-trips on every backend; a corrupted padding is
    /// refused, never returned as plaintext.
    @Test(arguments: AESCBC.Backend.available)
    func verifiedCBC_roundTripsAndRefusesBadPadding(backend: AESCBC.Backend) throws {
        let key = SymmetricKey(size: .bits256)
        let iv = (0..<16).map { UInt8($0) }
        for length in 0...100 {
            let plain = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            let ciphertext = Array(try AES._CBC.encrypt(plain, using: key, iv: AES._CBC.IV(ivBytes: iv)))
            #expect(try AESCBC.decryptVerified(ciphertext, key: key, iv: iv, backend: backend) == plain)
            #expect(try AESCBC.decryptVerified(ciphertext, key: key, iv: iv, backend: backend) == Array(try AES._CBC.decrypt(ciphertext, using: key, iv: AES._CBC.IV(ivBytes: iv))))
        }
        // A last block whose padding byte is 0 or above 16, or whose padding bytes differ
        // (encrypted without padding).
        for block in [[UInt8](repeating: 1, count: 15) + [0], [UInt8](repeating: 1, count: 15) + [17],
                      [UInt8](repeating: 1, count: 15) + [255], [UInt8](repeating: 1, count: 14) + [2, 3]] {
            let ciphertext = Array(try AES._CBC.encrypt(block, using: key, iv: AES._CBC.IV(ivBytes: iv), noPadding: true))
            #expect(throws: VaultCryptoError.self) { try AESCBC.decryptVerified(ciphertext, key: key, iv: iv, backend: backend) }
        }
        // Not whole blocks.
        #expect(throws: VaultCryptoError.self) { try AESCBC.decryptVerified([UInt8](repeating: 0, count: 17), key: key, iv: iv, backend: backend) }
        #expect(throws: VaultCryptoError.self) { try AESCBC.decryptVerified([UInt8](), key: key, iv: iv, backend: backend) }
    }

    /// Every backend encrypts to the same bytes as swift-crypto's `AES._CBC` and decrypts what
    /// the others encrypted: random keys, IVs and lengths (0 to 5,000 bytes, every length up to
    /// 64), plaintexts given as arrays, slices and `Data`.
    @Test func cbcBackends_agreeByteForByte() throws {
        var generator = SystemRandomNumberGenerator()
        let lengths = Array(0...64) + (0..<60).map { _ in Int.random(in: 65...5_000, using: &generator) }
        for length in lengths {
            let key = SymmetricKey(size: .bits256)
            let iv = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let plain = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let reference = Array(try AES._CBC.encrypt(plain, using: key, iv: AES._CBC.IV(ivBytes: iv)))
            for backend in AESCBC.Backend.available {
                #expect(AESCBC.encrypt(plain, key: key, iv: iv, backend: backend) == reference, "\(backend), \(length) bytes")
                #expect(AESCBC.encrypt(([0] + plain)[1...], key: key, iv: iv[...], backend: backend) == reference)
                #expect(AESCBC.encrypt(Data(plain), key: key, iv: Data(iv), backend: backend) == reference)
                #expect(try AESCBC.decryptVerified(reference, key: key, iv: iv, backend: backend) == plain)
            }
        }
    }

    /// On Linux the package links libcrypto and uses it; a build where libcrypto's AES-256-CBC
    /// went missing would fall back to swift-crypto silently and lose the speed.
    @Test func linuxUsesLibcrypto() {
        #if os(Linux)
        #expect(AESCBC.Backend.preferred == .libcrypto)
        #expect(AESCBC.Backend.preferred.description.hasPrefix("libcrypto "))
        #endif
    }
}

@Suite struct ConstantTimeEqualsTests {
    /// The word-at-a-time comparison of bytes in memory (what checks every event's MAC) agrees
    /// with the byte-by-byte one: equal buffers of every length up to 41 bytes match, a change
    /// of any one bit of either side anywhere (the words and the bytes after them) does not,
    /// and buffers of different lengths never match.
    @Test func inMemory_agreesWithTheByteByByteComparison() {
        var rng = SystemRandomNumberGenerator()
        for count in 0...41 {
            let a = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
            a.withUnsafeBytes { l in
                let copy = Array(l)
                copy.withUnsafeBytes { r in
                    #expect(constantTimeEquals(l, r) && constantTimeEquals(a, copy), "length \(count)")
                }
                for position in 0..<count {
                    for bit in [0, 7] {
                        var changed = copy
                        changed[position] ^= 1 << bit
                        changed.withUnsafeBytes { r in
                            #expect(!constantTimeEquals(l, r) && !constantTimeEquals(r, l), "length \(count), byte \(position), bit \(bit)")
                            #expect(constantTimeEquals(a, changed) == false)
                        }
                    }
                }
                let longer = copy + [0]
                longer.withUnsafeBytes { r in #expect(!constantTimeEquals(l, UnsafeRawBufferPointer(r))) }
            }
        }
    }
}
