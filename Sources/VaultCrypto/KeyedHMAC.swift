import Crypto
import _CryptoExtras
import Foundation
#if canImport(CLibCrypto)
import CLibCrypto
#endif

/// HMAC-SHA256 (RFC 2104) with its key schedule done once: the SHA-256 states after the
/// key's inner and outer pad blocks are kept, and each message starts from a copy of them.
/// Same MACs as `HMAC<SHA256>` (tested against it and RFC 4231's vectors), without the two
/// SHA-256 blocks of key setup per message and without the generic `DataProtocol` path. Sealing
/// and opening an event, and every EncString, run one of these.
///
/// Where libcrypto is linked (Linux) the states are its plain `SHA256_CTX` structs, so a copy
/// is a copy of 112 bytes; swift-crypto's `SHA256` keeps its state in an object, and the first
/// update of a copy allocated a new one (two allocations per MAC, a tenth of opening a 1 KiB
/// event). Elsewhere it is swift-crypto's `SHA256`.
public struct KeyedHMACSHA256: Sendable {
    #if canImport(CLibCrypto)
    private var inner: SHA256_CTX
    private let outer: SHA256_CTX
    #else
    private var inner: SHA256
    private let outer: SHA256
    #endif

    /// The keyed state for `key` (any length; keys longer than a block are hashed first).
    public init(key: SymmetricKey) {
        var block = key.withUnsafeBytes { Array($0) }
        if block.count > 64 { block = Array(SHA256.hash(data: block)) }
        block += [UInt8](repeating: 0, count: 64 - block.count)
        let innerPad = block.map { $0 ^ 0x36 }, outerPad = block.map { $0 ^ 0x5C }
        for i in block.indices { block[i] = 0 }
        #if canImport(CLibCrypto)
        var inner = SHA256_CTX(), outer = SHA256_CTX()
        SHA256_Init(&inner)
        SHA256_Init(&outer)
        innerPad.withUnsafeBytes { _ = SHA256_Update(&inner, $0.baseAddress, $0.count) }
        outerPad.withUnsafeBytes { _ = SHA256_Update(&outer, $0.baseAddress, $0.count) }
        self.inner = inner
        self.outer = outer
        #else
        var inner = SHA256()
        var outer = SHA256()
        innerPad.withUnsafeBytes { inner.update(bufferPointer: $0) }
        outerPad.withUnsafeBytes { outer.update(bufferPointer: $0) }
        self.inner = inner
        self.outer = outer
        #endif
    }

    /// Adds message bytes.
    public mutating func update(data: UnsafeRawBufferPointer) {
        #if canImport(CLibCrypto)
        if data.count > 0 { _ = SHA256_Update(&inner, data.baseAddress, data.count) }
        #else
        inner.update(bufferPointer: data)
        #endif
    }

    /// Adds message bytes.
    public mutating func update(data: [UInt8]) {
        data.withUnsafeBytes { update(data: $0) }
    }

    /// Adds message bytes.
    public mutating func update(data: ArraySlice<UInt8>) {
        data.withUnsafeBytes { update(data: $0) }
    }

    /// The 32-byte MAC of everything added.
    public func finalize() -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 32) { buffer, count in
            finalize(into: UnsafeMutableRawBufferPointer(buffer))
            count = 32
        }
    }

    /// Writes the 32-byte MAC of everything added to the start of `output` (at least 32 bytes),
    /// without allocating.
    public func finalize(into output: UnsafeMutableRawBufferPointer) {
        precondition(output.count >= 32, "HMAC-SHA256 output needs 32 bytes")
        #if canImport(CLibCrypto)
        var inner = self.inner, outer = self.outer
        let out = output.bindMemory(to: UInt8.self).baseAddress!
        // The inner digest goes to `output` first, then is hashed into the outer state, whose
        // digest overwrites it.
        SHA256_Final(out, &inner)
        SHA256_Update(&outer, out, 32)
        SHA256_Final(out, &outer)
        #else
        var outer = self.outer
        inner.finalize().withUnsafeBytes { outer.update(bufferPointer: $0) }
        outer.finalize().withUnsafeBytes { output.copyMemory(from: $0) }
        #endif
    }
}
