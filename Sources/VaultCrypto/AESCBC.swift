import Crypto
import _CryptoExtras
import Foundation
#if canImport(CLibCrypto)
import CLibCrypto
#endif

/// AES-256-CBC with PKCS#7 padding: the cipher under every EncString and every sealed event.
///
/// Two implementations give the same bytes (tested against each other over random keys, IVs and
/// lengths):
/// - ``Backend/libcrypto``: OpenSSL's EVP interface from the system's libcrypto (Debian's
///   `libssl-dev`), on Linux. One call does one key schedule and writes straight into the output
///   array; a 600-byte event encrypts in about a microsecond here.
/// - ``Backend/swiftCrypto``: swift-crypto's `AES._CBC`, everywhere. It goes through `Data`
///   (a copy in, a copy out) and is several times slower per small message.
///
/// ``Backend/preferred`` is libcrypto where it is linked and its AES-256-CBC could be fetched,
/// swift-crypto otherwise.
public enum AESCBC {
    /// Which implementation runs.
    public enum Backend: String, Sendable, CaseIterable, CustomStringConvertible {
        /// OpenSSL's libcrypto (EVP), linked as a system library on Linux.
        case libcrypto
        /// swift-crypto's `AES._CBC` (portable).
        case swiftCrypto = "swift-crypto"

        /// The fastest available implementation.
        public static let preferred: Backend = {
            #if canImport(CLibCrypto)
            if LibCryptoCBC.cipher != nil { return .libcrypto }
            #endif
            return .swiftCrypto
        }()

        /// The implementations this build can run (libcrypto only where it is linked).
        public static var available: [Backend] {
            #if canImport(CLibCrypto)
            if LibCryptoCBC.cipher != nil { return [.libcrypto, .swiftCrypto] }
            #endif
            return [.swiftCrypto]
        }

        /// The name and, for libcrypto, the library's version (what `vaultlog info` prints).
        public var description: String {
            switch self {
            case .swiftCrypto: return rawValue
            case .libcrypto:
                #if canImport(CLibCrypto)
                return "libcrypto \(LibCryptoCBC.version)"
                #else
                return rawValue
                #endif
            }
        }
    }

    /// The length of the padded ciphertext of `plaintextCount` bytes (PKCS#7 always adds 1 to 16).
    @inlinable
    public static func ciphertextCount(plaintextCount: Int) -> Int { plaintextCount / 16 * 16 + 16 }

    /// The padded ciphertext of `plaintext` under a 32-byte `key` and 16-byte `iv`.
    public static func encrypt(
        _ plaintext: UnsafeRawBufferPointer, key: SymmetricKey, iv: UnsafeRawBufferPointer,
        backend: Backend = .preferred
    ) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: ciphertextCount(plaintextCount: plaintext.count)) { buffer, count in
            count = encrypt(plaintext, key: key, iv: iv, into: UnsafeMutableRawBufferPointer(buffer), backend: backend)
        }
    }

    /// Writes the padded ciphertext of `plaintext` to the start of `output`, which must hold
    /// ``ciphertextCount(plaintextCount:)`` bytes, and returns that count. Sealing a batch of
    /// events writes each ciphertext straight into the batch's buffer this way.
    @discardableResult
    public static func encrypt(
        _ plaintext: UnsafeRawBufferPointer, key: SymmetricKey, iv: UnsafeRawBufferPointer,
        into output: UnsafeMutableRawBufferPointer, backend: Backend = .preferred
    ) -> Int {
        precondition(iv.count == 16, "AES-CBC IV must be 16 bytes")
        precondition(key.bitCount == 256, "AES-256 key must be 32 bytes")
        let count = ciphertextCount(plaintextCount: plaintext.count)
        precondition(output.count >= count, "AES-CBC output buffer too small")
        #if canImport(CLibCrypto)
        if backend == .libcrypto, LibCryptoCBC.encrypt(plaintext, key: key, iv: iv, into: output) == count { return count }
        #endif
        // Encryption with a valid 32-byte key and 16-byte IV cannot fail.
        let ciphertext = try! AES._CBC.encrypt(plaintext, using: key, iv: AES._CBC.IV(ivBytes: iv))
        ciphertext.copyBytes(to: output)
        return count
    }

    /// The padded ciphertext of `plaintext`.
    public static func encrypt(
        _ plaintext: some DataProtocol, key: SymmetricKey, iv: some DataProtocol, backend: Backend = .preferred
    ) -> [UInt8] {
        withContiguousBytes(plaintext) { p in
            withContiguousBytes(iv) { i in encrypt(p, key: key, iv: i, backend: backend) }
        }
    }

    /// Decrypts a ciphertext whose MAC the caller has already verified (encrypt-then-MAC): the
    /// PKCS#7 padding is checked and removed by libcrypto, or on the plain byte array on the
    /// portable path, not in constant time. Constant time is not needed once the MAC matched
    /// (nothing about the padding reaches anyone who cannot forge the MAC). Unauthenticated data
    /// must use ``decryptUnauthenticated(_:key:iv:)``.
    ///
    /// Throws ``VaultCryptoError/decryptionFailed`` for a ciphertext that is not whole blocks or
    /// whose padding is malformed.
    public static func decryptVerified(
        _ ciphertext: UnsafeRawBufferPointer, key: SymmetricKey, iv: UnsafeRawBufferPointer,
        backend: Backend = .preferred
    ) throws -> [UInt8] {
        precondition(iv.count == 16, "AES-CBC IV must be 16 bytes")
        guard key.bitCount == 256 else { throw VaultCryptoError.invalidKeyLength(expected: 32, actual: key.bitCount / 8) }
        guard ciphertext.count > 0, ciphertext.count % 16 == 0 else { throw VaultCryptoError.decryptionFailed }
        #if canImport(CLibCrypto)
        // libcrypto checks and strips the padding itself; a refusal (bad padding) goes the
        // portable way below, which refuses it too, with the same error.
        if backend == .libcrypto, let plain = LibCryptoCBC.decrypt(ciphertext, key: key, iv: iv) { return plain }
        #endif
        var plain = try swiftCryptoDecryptBlocks(ciphertext, key: key, iv: iv)
        guard let last = plain.last, last >= 1, last <= 16, Int(last) <= plain.count,
              plain.suffix(Int(last)).allSatisfy({ $0 == last }) else { throw VaultCryptoError.decryptionFailed }
        plain.removeLast(Int(last))
        return plain
    }

    /// ``decryptVerified(_:key:iv:backend:)`` for any contiguous bytes.
    public static func decryptVerified(
        _ ciphertext: some DataProtocol, key: SymmetricKey, iv: some DataProtocol, backend: Backend = .preferred
    ) throws -> [UInt8] {
        try withContiguousBytes(ciphertext) { c in
            try withContiguousBytes(iv) { i in try decryptVerified(c, key: key, iv: i, backend: backend) }
        }
    }

    /// Decrypts data no MAC vouches for (legacy type-0 EncStrings), with swift-crypto's
    /// constant-time padding removal. Throws ``VaultCryptoError/decryptionFailed``.
    public static func decryptUnauthenticated(_ ciphertext: [UInt8], key: SymmetricKey, iv: [UInt8]) throws -> [UInt8] {
        do {
            return try Array(AES._CBC.decrypt(ciphertext, using: key, iv: AES._CBC.IV(ivBytes: iv)))
        } catch {
            throw VaultCryptoError.decryptionFailed
        }
    }

    private static func swiftCryptoDecryptBlocks(_ ciphertext: UnsafeRawBufferPointer, key: SymmetricKey, iv: UnsafeRawBufferPointer) throws -> [UInt8] {
        do {
            return Array(try AES._CBC.decrypt(ciphertext, using: key, iv: AES._CBC.IV(ivBytes: iv), noPadding: true))
        } catch {
            throw VaultCryptoError.decryptionFailed
        }
    }

    /// Runs `body` on `bytes` without a copy when they are contiguous (arrays, slices, `Data`).
    private static func withContiguousBytes<R>(_ bytes: some DataProtocol, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        if let result = try bytes.withContiguousStorageIfAvailable({ try body(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        return try Array(bytes).withUnsafeBytes(body)
    }
}

#if canImport(CLibCrypto)
/// The EVP calls. A context per call (its allocation is a few percent of a small message; the
/// key schedule is most of the rest), so any thread may call at any time.
enum LibCryptoCBC {
    /// AES-256-CBC fetched once from the default provider (an implicit fetch per call would look
    /// it up every time); nil if the provider has none, and then swift-crypto is used.
    nonisolated(unsafe) static let cipher: OpaquePointer? = EVP_CIPHER_fetch(nil, "AES-256-CBC", nil)
    /// AES-256 block by block (ECB), for decrypting chosen blocks of a CBC message
    /// (``KeyedAESCBC/decryptEnds(_:iv:headBlocks:tailBlocks:head:tail:)``).
    nonisolated(unsafe) static let blockCipher: OpaquePointer? = EVP_CIPHER_fetch(nil, "AES-256-ECB", nil)

    static var version: String { String(cString: OpenSSL_version(Int32(OPENSSL_VERSION_STRING))) }

    /// Writes the ciphertext to `output` and returns its length; nil if libcrypto refused (the
    /// caller falls back to swift-crypto).
    static func encrypt(_ plaintext: UnsafeRawBufferPointer, key: SymmetricKey, iv: UnsafeRawBufferPointer,
                        into output: UnsafeMutableRawBufferPointer) -> Int? {
        crypt(plaintext, encrypting: true, key: key, iv: iv, into: output)
    }

    /// The plaintext, padding checked and removed by libcrypto; nil if libcrypto refused
    /// (malformed padding included). Setting "no padding" would cost a parameter lookup by name
    /// per call in OpenSSL 3, more than the padding check.
    static func decrypt(_ ciphertext: UnsafeRawBufferPointer, key: SymmetricKey, iv: UnsafeRawBufferPointer) -> [UInt8]? {
        var ok = true
        // EVP writes up to one block more than it keeps while it holds back the last block.
        let out = [UInt8](unsafeUninitializedCapacity: ciphertext.count + 16) { buffer, count in
            let written = crypt(ciphertext, encrypting: false, key: key, iv: iv, into: UnsafeMutableRawBufferPointer(buffer))
            ok = written != nil
            count = written ?? 0
        }
        return ok ? out : nil
    }

    /// One whole message through a fresh context (PKCS#7 padding added or checked and removed):
    /// the number of bytes written to `output`, or nil if libcrypto refused.
    private static func crypt(_ input: UnsafeRawBufferPointer, encrypting: Bool, key: SymmetricKey, iv: UnsafeRawBufferPointer,
                              into output: UnsafeMutableRawBufferPointer) -> Int? {
        guard let cipher, input.count < Int(Int32.max) - 16, let ctx = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(ctx) }
        let initialised = key.withUnsafeBytes { k in
            EVP_CipherInit_ex2(ctx, cipher, k.bindMemory(to: UInt8.self).baseAddress, iv.bindMemory(to: UInt8.self).baseAddress,
                               encrypting ? 1 : 0, nil) == 1
        }
        guard initialised else { return nil }
        return run(ctx, input, into: output)
    }

    /// Runs one whole message through `ctx`, already set up with key and IV: the number of bytes
    /// written to `output`, or nil if libcrypto refused (malformed padding on decryption).
    static func run(_ ctx: OpaquePointer, _ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Int? {
        let out = output.bindMemory(to: UInt8.self).baseAddress!
        var updated: Int32 = 0
        var final: Int32 = 0
        if input.count > 0 {
            guard EVP_CipherUpdate(ctx, out, &updated, input.bindMemory(to: UInt8.self).baseAddress, Int32(input.count)) == 1 else { return nil }
        }
        guard EVP_CipherFinal_ex(ctx, out + Int(updated), &final) == 1 else { return nil }
        return Int(updated + final)
    }
}
#endif
