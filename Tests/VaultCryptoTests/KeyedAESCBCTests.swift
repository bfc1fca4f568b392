import Crypto
import _CryptoExtras
import Dispatch
import Foundation
import Synchronization
import Testing
@testable import VaultCrypto

/// The keyed AES-CBC (key schedule once, contexts reused) gives swift-crypto's bytes message
/// after message, whatever the messages before it were: other lengths, other IVs, refused
/// ciphertexts, other threads.
@Suite struct KeyedAESCBCTests {
    static func random(_ count: Int, _ generator: inout some RandomNumberGenerator) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// Encrypts and decrypts a stream of random messages with one keyed instance; every third
    /// decryption is of a ciphertext with broken padding, which must be refused and must not
    /// disturb the next message (a reused context that kept the held-back block or the old IV
    /// would give other bytes).
    @Test func reusedContexts_giveSwiftCryptosBytes() throws {
        var generator = SystemRandomNumberGenerator()
        let key = SymmetricKey(size: .bits256)
        let keyed = KeyedAESCBC(key: key)
        for round in 0..<300 {
            let iv = Self.random(16, &generator)
            let plain = Self.random(Int.random(in: 0...1500, using: &generator), &generator)
            let expected = Array(try AES._CBC.encrypt(plain, using: key, iv: AES._CBC.IV(ivBytes: iv)))
            var sealed = [UInt8](repeating: 0, count: AESCBC.ciphertextCount(plaintextCount: plain.count))
            let written = plain.withUnsafeBytes { p in
                iv.withUnsafeBytes { i in sealed.withUnsafeMutableBytes { keyed.encrypt(p, iv: i, into: $0) } }
            }
            #expect(written == expected.count)
            #expect(sealed == expected)
            let opened = try expected.withUnsafeBytes { c in try iv.withUnsafeBytes { try keyed.decryptVerified(c, iv: $0) } }
            #expect(opened == plain)
            if round % 3 == 0 {
                // Random last block: its padding is almost never valid.
                var broken = expected
                let block = Self.random(16, &generator)
                broken.replaceSubrange((broken.count - 16)..., with: block)
                let fresh = try? AESCBC.decryptVerified(broken, key: key, iv: iv, backend: .swiftCrypto)
                let keyedResult = try? broken.withUnsafeBytes { c in try iv.withUnsafeBytes { try keyed.decryptVerified(c, iv: $0) } }
                #expect(keyedResult == fresh)
            }
        }
        // Not whole blocks, and empty.
        let iv = [UInt8](repeating: 7, count: 16)
        for bad in [[UInt8](repeating: 0, count: 17), []] {
            #expect(throws: VaultCryptoError.self) {
                try bad.withUnsafeBytes { c in try iv.withUnsafeBytes { try keyed.decryptVerified(c, iv: $0) } }
            }
        }
    }

    /// Decrypting only the ends of a message gives the whole decryption's first and last
    /// bytes and its length, for every length and split; too short a message gives nil; broken
    /// padding is refused (every byte of it checked); and the block contexts it reuses (from the
    /// pool, or one kept for many messages), beside the whole decryptions of the same instance,
    /// give each message its own bytes.
    @Test func decryptEnds_givesTheWholeDecryptionsEnds() throws {
        var generator = SystemRandomNumberGenerator()
        let key = SymmetricKey(size: .bits256)
        let keyed = KeyedAESCBC(key: key)
        guard AESCBC.Backend.preferred == .libcrypto else { return }
        let kept = try #require(keyed.blockDecryptor())
        #expect(kept.belongs(to: keyed) && !kept.belongs(to: KeyedAESCBC(key: key)))
        var decryptedAtEnds = 0
        for round in 0..<400 {
            let iv = Self.random(16, &generator)
            let plain = Self.random(Int.random(in: 0...1500, using: &generator), &generator)
            var sealed = Array(try AES._CBC.encrypt(plain, using: key, iv: AES._CBC.IV(ivBytes: iv)))
            let (headBlocks, tailBlocks) = (Int.random(in: 1...8, using: &generator), Int.random(in: 1...3, using: &generator))
            if round % 5 == 4 {
                sealed.replaceSubrange((sealed.count - 16)..., with: Self.random(16, &generator))
            }
            let whole = try? sealed.withUnsafeBytes { c in try iv.withUnsafeBytes { try keyed.decryptVerified(c, iv: $0) } }
            let ends = try? sealed.withUnsafeBytes { c in
                try iv.withUnsafeBytes { i in
                    try withUnsafeTemporaryAllocation(byteCount: (headBlocks + 2) * 16, alignment: 16) { head in
                        try withUnsafeTemporaryAllocation(byteCount: (tailBlocks + 1) * 16, alignment: 16) { tail in
                            // Odd rounds through one context kept for all of them (as a fold's thread keeps one).
                            try (round % 2 == 0 ? keyed.decryptEnds(c, iv: i, headBlocks: headBlocks, tailBlocks: tailBlocks, head: head, tail: tail)
                                 : kept.decryptEnds(c, iv: i, headBlocks: headBlocks, tailBlocks: tailBlocks, head: head, tail: tail)).map {
                                (head: Array(head[..<(headBlocks * 16)]), tail: Array(tail[..<$0.tail]), count: $0.plaintext)
                            }
                        }
                    }
                }
            }
            let longEnough = sealed.count / 16 >= headBlocks + 1 + tailBlocks
            guard let whole else {
                // Broken padding: refused either way (or nil when too short to split).
                #expect(ends == nil)
                continue
            }
            #expect(whole == plain || round % 5 == 4)
            if longEnough {
                let got = try #require(ends, "round \(round)")
                #expect(got.count == whole.count)
                #expect(got.head == Array(whole.prefix(headBlocks * 16)))
                #expect(got.tail == Array(whole.suffix(got.tail.count)))
                #expect(got.tail.count >= tailBlocks * 16 - 16)
                decryptedAtEnds += 1
            } else {
                #expect(ends == nil)
            }
        }
        #expect(decryptedAtEnds > 200)
    }

    /// Many threads share one keyed instance (the fold opens a batch's events on every core):
    /// each gets its own context, and every message decrypts to its plaintext.
    @Test func sharedAcrossThreads_eachMessageItsOwnBytes() throws {
        let key = SymmetricKey(size: .bits256)
        let keyed = KeyedAESCBC(key: key)
        var generator = SystemRandomNumberGenerator()
        let messages = (0..<2_000).map { i in (iv: Self.random(16, &generator), plain: Self.random(i % 700, &generator)) }
        let sealed = try messages.map { Array(try AES._CBC.encrypt($0.plain, using: key, iv: AES._CBC.IV(ivBytes: $0.iv))) }
        let wrong = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 16) { lane in
            for i in stride(from: lane, to: messages.count, by: 16) {
                let opened = try? sealed[i].withUnsafeBytes { c in try messages[i].iv.withUnsafeBytes { try keyed.decryptVerified(c, iv: $0) } }
                if opened != messages[i].plain { wrong.add(1, ordering: .relaxed) }
            }
        }
        #expect(wrong.load(ordering: .relaxed) == 0)
    }
}
