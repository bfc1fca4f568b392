import Crypto
import Foundation
import Synchronization
#if canImport(CLibCrypto)
import CLibCrypto
#endif

/// AES-256-CBC under one key with its key schedule done once: what sealing and opening many
/// events under one key calls. Same bytes as ``AESCBC`` (tested against it over random keys,
/// IVs and lengths, and after refused ciphertexts).
///
/// With libcrypto (``AESCBC/Backend/libcrypto``) it keeps a few EVP contexts already set up
/// with the key, for decryption, for encryption and for decrypting chosen blocks: a message then
/// only sets its IV. A fresh
/// context per message (``AESCBC``) allocates the context, looks up its parameters and expands
/// the key every time, which costs about as much as decrypting a 1 KiB event. Any thread may
/// call at any time: a call takes a context from the pool (or makes one) and hands it back.
/// Elsewhere it calls ``AESCBC`` with the key.
public final class KeyedAESCBC: Sendable {
    /// The 32-byte AES key.
    public let key: SymmetricKey
    /// Contexts not in use, one pool per ``Use`` (at most ``spareContexts`` each).
    private let decryptPool = ContextPool(), encryptPool = ContextPool(), blockPool = ContextPool()
    /// Contexts kept for reuse per use: more threads than this just make and free theirs.
    static let spareContexts = 8

    /// What a pooled context is keyed for.
    fileprivate enum Use: CaseIterable {
        case decrypt, encrypt
        /// Block-by-block (ECB) decryption without padding:
        /// ``decryptEnds(_:iv:headBlocks:tailBlocks:head:tail:)`` chains the blocks itself, so a
        /// message needs no IV set-up and no final call.
        case decryptBlocks
    }

    private func pool(_ use: Use) -> ContextPool {
        switch use {
        case .decrypt: decryptPool
        case .encrypt: encryptPool
        case .decryptBlocks: blockPool
        }
    }

    /// The keyed cipher for a 32-byte `key`.
    public init(key: SymmetricKey) {
        precondition(key.bitCount == 256, "AES-256 key must be 32 bytes")
        self.key = key
    }

    deinit {
        #if canImport(CLibCrypto)
        // EVP_CIPHER_CTX_free clears the expanded key before it frees the memory.
        for use in Use.allCases {
            pool(use).spares.withLock { spares in
                for context in spares { EVP_CIPHER_CTX_free(context.pointer) }
            }
        }
        #endif
    }

    /// ``AESCBC/decryptVerified(_:key:iv:backend:)`` with this key: for a ciphertext whose MAC
    /// the caller has checked. Throws ``VaultCryptoError/decryptionFailed`` for a ciphertext that
    /// is not whole blocks or whose padding is malformed.
    public func decryptVerified(_ ciphertext: UnsafeRawBufferPointer, iv: UnsafeRawBufferPointer) throws -> [UInt8] {
        #if canImport(CLibCrypto)
        if AESCBC.Backend.preferred == .libcrypto, ciphertext.count > 0, ciphertext.count % 16 == 0 {
            var failed = false
            // EVP writes up to one block more than it keeps while it holds back the last block.
            let plain = [UInt8](unsafeUninitializedCapacity: ciphertext.count + 16) { buffer, count in
                let written = crypt(ciphertext, encrypting: false, iv: iv, into: UnsafeMutableRawBufferPointer(buffer))
                failed = written == nil
                count = written ?? 0
            }
            if !failed { return plain }
        }
        #endif
        // Not whole blocks, bad padding or no libcrypto: the one-shot path checks and says why.
        return try AESCBC.decryptVerified(ciphertext, key: key, iv: iv)
    }

    /// Decrypts only the first `headBlocks` and the last `tailBlocks` blocks of a ciphertext
    /// whose MAC the caller has checked (CBC decrypts any block from it and the block before
    /// it): for a reader that needs a few fields at the two ends of a long message. The tail's
    /// padding is checked and removed as ``decryptVerified(_:iv:)`` does.
    ///
    /// `head` gets `headBlocks × 16` plaintext bytes and `tail` up to `tailBlocks × 16` (the room
    /// each must have); returns how many of `tail`'s bytes are plaintext and the length of the
    /// whole plaintext. Nil when the ciphertext has fewer than
    /// `headBlocks + 1 + tailBlocks` blocks (decrypt it whole) or there is no libcrypto (the
    /// portable path decrypts whole messages only). Throws ``VaultCryptoError/decryptionFailed``
    /// for malformed padding.
    public func decryptEnds(_ ciphertext: UnsafeRawBufferPointer, iv: UnsafeRawBufferPointer, headBlocks: Int, tailBlocks: Int,
                            head: UnsafeMutableRawBufferPointer, tail: UnsafeMutableRawBufferPointer) throws -> (tail: Int, plaintext: Int)? {
        try blockDecryptor()?.decryptEnds(ciphertext, iv: iv, headBlocks: headBlocks, tailBlocks: tailBlocks, head: head, tail: tail)
    }

    /// A context for many ``BlockDecryptor/decryptEnds(_:iv:headBlocks:tailBlocks:head:tail:)``
    /// calls on one thread (a fold opens thousands of events per thread: one context for all of
    /// them, not one taken from the shared pool and handed back per event). Nil without libcrypto.
    public func blockDecryptor() -> BlockDecryptor? {
        #if canImport(CLibCrypto)
        guard AESCBC.Backend.preferred == .libcrypto, let context = takeContext(.decryptBlocks) else { return nil }
        return BlockDecryptor(owner: self, context: context)
        #else
        return nil
        #endif
    }

    /// A block (ECB) context of one ``KeyedAESCBC``, for one thread at a time; handed back to the
    /// key's pool when released.
    public final class BlockDecryptor {
        #if canImport(CLibCrypto)
        private let owner: KeyedAESCBC
        private var context: Context?

        fileprivate init(owner: KeyedAESCBC, context: Context) {
            self.owner = owner
            self.context = context
        }

        deinit {
            if let context { owner.giveBack(context, .decryptBlocks) }
        }
        #endif

        /// Whether this decryptor decrypts for `cbc`: one of its contexts, still usable (a context
        /// libcrypto refused is freed; the caller then takes another, as a call from the pool does).
        public func belongs(to cbc: KeyedAESCBC) -> Bool {
            belongs(toUnretained: Unmanaged.passUnretained(cbc))
        }

        /// ``belongs(to:)`` for a key held unretained: compares the two objects' addresses and
        /// takes no reference to `cbc` (a fold asks for every event, on every core, and a
        /// reference count taken on the one shared key moved its cache line between the cores:
        /// 3% of a fold's time).
        public func belongs(toUnretained cbc: Unmanaged<KeyedAESCBC>) -> Bool {
            #if canImport(CLibCrypto)
            Unmanaged.passUnretained(owner).toOpaque() == cbc.toOpaque() && context != nil
            #else
            false
            #endif
        }

        /// `out[0..<bytes] ^= other[0..<bytes]`, eight bytes at a time (`bytes` a multiple of 8;
        /// byte by byte, the compiler could not tell the two apart and did not vectorize).
        @inline(__always)
        private static func xor(_ out: UnsafeMutablePointer<UInt8>, with other: UnsafeRawPointer, bytes: Int) {
            let target = UnsafeMutableRawPointer(out)
            for offset in stride(from: 0, to: bytes, by: 8) {
                let word = target.loadUnaligned(fromByteOffset: offset, as: UInt64.self) ^ other.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                target.storeBytes(of: word, toByteOffset: offset, as: UInt64.self)
            }
        }

        /// ``KeyedAESCBC/decryptEnds(_:iv:headBlocks:tailBlocks:head:tail:)`` with this context.
        public func decryptEnds(_ ciphertext: UnsafeRawBufferPointer, iv: UnsafeRawBufferPointer, headBlocks: Int, tailBlocks: Int,
                                head: UnsafeMutableRawBufferPointer, tail: UnsafeMutableRawBufferPointer) throws -> (tail: Int, plaintext: Int)? {
            precondition(headBlocks > 0 && tailBlocks > 0 && iv.count == 16, "decryptEnds: blocks at both ends and a 16-byte IV")
            precondition(head.count >= headBlocks * 16 && tail.count >= tailBlocks * 16, "decryptEnds: output buffers too small")
            #if canImport(CLibCrypto)
            let blocks = ciphertext.count / 16
            guard ciphertext.count % 16 == 0, blocks >= headBlocks + 1 + tailBlocks, let ctx = context?.pointer else { return nil }
            let tailStart = (blocks - tailBlocks) * 16
            let input = ciphertext.bindMemory(to: UInt8.self).baseAddress!
            let headOut = head.bindMemory(to: UInt8.self).baseAddress!, tailOut = tail.bindMemory(to: UInt8.self).baseAddress!
            // Each block decrypted on its own, then chained by hand: plaintext block i is the
            // decrypted block i XOR ciphertext block i - 1 (the IV before block 0).
            var written: Int32 = 0
            guard EVP_CipherUpdate(ctx, headOut, &written, input, Int32(headBlocks * 16)) == 1, written == Int32(headBlocks * 16),
                  EVP_CipherUpdate(ctx, tailOut, &written, input + tailStart, Int32(tailBlocks * 16)) == 1, written == Int32(tailBlocks * 16) else {
                // A context libcrypto refused is not used again.
                EVP_CIPHER_CTX_free(ctx)
                context = nil
                return nil
            }
            Self.xor(headOut, with: iv.baseAddress!, bytes: 16)
            Self.xor(headOut + 16, with: input, bytes: (headBlocks - 1) * 16)
            Self.xor(tailOut, with: input + (tailStart - 16), bytes: tailBlocks * 16)
            // PKCS#7 padding, checked as a whole decryption checks it (the caller checked the MAC).
            let padding = Int(tailOut[tailBlocks * 16 - 1])
            guard (1...16).contains(padding),
                  (tailBlocks * 16 - padding..<tailBlocks * 16).allSatisfy({ tailOut[$0] == UInt8(padding) }) else {
                throw VaultCryptoError.decryptionFailed
            }
            let tailCount = tailBlocks * 16 - padding
            return (tailCount, tailStart + tailCount)
            #else
            return nil
            #endif
        }
    }

    /// ``AESCBC/encrypt(_:key:iv:into:backend:)`` with this key: writes the padded ciphertext to
    /// the start of `output` (at least ``AESCBC/ciphertextCount(plaintextCount:)`` bytes) and
    /// returns its length.
    @discardableResult
    public func encrypt(_ plaintext: UnsafeRawBufferPointer, iv: UnsafeRawBufferPointer,
                        into output: UnsafeMutableRawBufferPointer) -> Int {
        let count = AESCBC.ciphertextCount(plaintextCount: plaintext.count)
        precondition(output.count >= count, "AES-CBC output buffer too small")
        if crypt(plaintext, encrypting: true, iv: iv, into: output) == count { return count }
        return AESCBC.encrypt(plaintext, key: key, iv: iv, into: output)
    }

    /// One message through a keyed context from the pool: the bytes written, or nil when
    /// libcrypto is not there or refused (bad padding on decryption; the context is then freed,
    /// not reused).
    private func crypt(_ input: UnsafeRawBufferPointer, encrypting: Bool, iv: UnsafeRawBufferPointer,
                       into output: UnsafeMutableRawBufferPointer) -> Int? {
        #if canImport(CLibCrypto)
        precondition(iv.count == 16, "AES-CBC IV must be 16 bytes")
        guard AESCBC.Backend.preferred == .libcrypto, input.count < Int(Int32.max) - 16,
              let context = takeContext(encrypting ? .encrypt : .decrypt) else { return nil }
        let ctx = context.pointer
        // The context keeps its cipher and expanded key; this sets the IV and clears what the
        // last message left (held-back block, padding state).
        guard EVP_CipherInit_ex2(ctx, nil, nil, iv.bindMemory(to: UInt8.self).baseAddress, encrypting ? 1 : 0, nil) == 1 else {
            EVP_CIPHER_CTX_free(ctx)
            return nil
        }
        guard let written = LibCryptoCBC.run(ctx, input, into: output) else {
            EVP_CIPHER_CTX_free(ctx)
            return nil
        }
        giveBack(context, encrypting ? .encrypt : .decrypt)
        return written
        #else
        return nil
        #endif
    }

    #if canImport(CLibCrypto)
    /// A spare context for `use`, or a new one keyed now; nil if libcrypto refused.
    private func takeContext(_ use: Use) -> Context? {
        if let spare = pool(use).spares.withLock({ $0.popLast() }) { return spare }
        guard let cipher = use == .decryptBlocks ? LibCryptoCBC.blockCipher : LibCryptoCBC.cipher,
              let ctx = EVP_CIPHER_CTX_new() else { return nil }
        let keyed = key.withUnsafeBytes { k in
            EVP_CipherInit_ex2(ctx, cipher, k.bindMemory(to: UInt8.self).baseAddress, nil, use == .encrypt ? 1 : 0, nil) == 1
        }
        guard keyed, use != .decryptBlocks || EVP_CIPHER_CTX_set_padding(ctx, 0) == 1 else {
            EVP_CIPHER_CTX_free(ctx)
            return nil
        }
        return Context(pointer: ctx)
    }

    /// Keeps `context` for the next call of its use, or frees it when enough are kept.
    fileprivate func giveBack(_ context: Context, _ use: Use) {
        let kept = pool(use).spares.withLock { spares in
            guard spares.count < Self.spareContexts else { return false }
            spares.append(context)
            return true
        }
        if !kept { EVP_CIPHER_CTX_free(context.pointer) }
    }
    #endif
}

/// An EVP context already keyed (a pointer libcrypto owns; moved between threads under its
/// pool's lock only).
private struct Context: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// Spare contexts of one ``KeyedAESCBC`` for one use.
private final class ContextPool: Sendable {
    let spares = Mutex<[Context]>([])
}
