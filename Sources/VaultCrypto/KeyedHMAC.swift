import Crypto
import _CryptoExtras
import Foundation

/// HMAC-SHA256 (RFC 2104) with its key schedule done once: the SHA-256 states after the
/// key's inner and outer pad blocks are kept, and each message starts from a copy of them.
/// Same MACs as `HMAC<SHA256>` (tested against it and RFC 4231's vectors), without the two
/// SHA-256 blocks of key setup per message and without the generic `DataProtocol` path: SHA-256
/// is fed through `update(bufferPointer:)`. Sealing and opening an event, and every EncString,
/// run one of these.
public struct KeyedHMACSHA256: Sendable {
    private var inner: SHA256
    private let outer: SHA256

    /// The keyed state for `key` (any length; keys longer than a block are hashed first).
    public init(key: SymmetricKey) {
        var block = key.withUnsafeBytes { Array($0) }
        if block.count > 64 { block = Array(SHA256.hash(data: block)) }
        block += [UInt8](repeating: 0, count: 64 - block.count)
        var inner = SHA256()
        var outer = SHA256()
        (block.map { $0 ^ 0x36 }).withUnsafeBytes { inner.update(bufferPointer: $0) }
        (block.map { $0 ^ 0x5C }).withUnsafeBytes { outer.update(bufferPointer: $0) }
        for i in block.indices { block[i] = 0 }
        self.inner = inner
        self.outer = outer
    }

    /// Adds message bytes.
    public mutating func update(data: UnsafeRawBufferPointer) {
        inner.update(bufferPointer: data)
    }

    /// Adds message bytes.
    public mutating func update(data: [UInt8]) {
        data.withUnsafeBytes { inner.update(bufferPointer: $0) }
    }

    /// Adds message bytes.
    public mutating func update(data: ArraySlice<UInt8>) {
        data.withUnsafeBytes { inner.update(bufferPointer: $0) }
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
        var outer = self.outer
        inner.finalize().withUnsafeBytes { outer.update(bufferPointer: $0) }
        outer.finalize().withUnsafeBytes { output.copyMemory(from: $0) }
    }
}
