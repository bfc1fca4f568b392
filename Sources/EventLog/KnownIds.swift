import Foundation

/// The item ids of a fold's previous batch, for the headers of its next batch to reuse: a
/// header whose cipher id is one of them gets that string (a reference-count increment)
/// instead of a new one (an allocation, a UTF-8 check and, when the batch is released, a free).
/// A log edits the same items over and over, so nearly every id of a batch was in the one
/// before it.
///
/// Read-only once made, so the threads that open a batch share it without a lock. Made from
/// owned strings and compared byte for byte, so a lookup returns exactly the string the
/// header holds, or nil (the header then makes its own, as without a table).
package struct KnownIds: Sendable {
    /// Open addressing, a power of two long: each slot's ``hash(_:)`` (0: empty) and its id.
    private let hashes: [UInt64]
    private let ids: [String]
    private let mask: Int

    /// The distinct ids of `ids` (an empty id is not kept: it is a user-level event's, and
    /// already allocation-free).
    package init(_ ids: some Collection<String>) {
        let capacity = max(16, (ids.count * 2).nextPowerOfTwo)
        var hashes = [UInt64](repeating: 0, count: capacity)
        var slots = [String](repeating: "", count: capacity)
        let mask = capacity - 1
        for id in ids where !id.isEmpty {
            guard let hash = id.utf8.withContiguousStorageIfAvailable({ Self.hash(UnsafeRawBufferPointer($0)) }) else { continue }
            var i = Int(truncatingIfNeeded: hash) & mask
            while hashes[i] != 0, hashes[i] != hash || slots[i] != id { i = (i + 1) & mask }
            hashes[i] = hash
            slots[i] = id
        }
        self.hashes = hashes
        self.ids = slots
        self.mask = mask
    }

    /// The known id whose UTF-8 bytes are `bytes`, or nil.
    package func id(matching bytes: UnsafeRawBufferPointer) -> String? {
        guard !bytes.isEmpty else { return nil }
        let hash = Self.hash(bytes)
        var i = Int(truncatingIfNeeded: hash) & mask
        while hashes[i] != 0 {
            if hashes[i] == hash, ids[i].utf8.withContiguousStorageIfAvailable({
                $0.count == bytes.count && memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0
            }) == true {
                return ids[i]
            }
            i = (i + 1) & mask
        }
        return nil
    }

    /// A 64-bit hash of `bytes` (FNV-1a over 8-byte words, then a final mix): cheap for the
    /// 36-byte ids items have; not a defence against chosen collisions, which cost only probes.
    static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325 ^ UInt64(bytes.count)
        var offset = 0
        while offset + 8 <= bytes.count {
            h = (h ^ bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* 0x0000_0100_0000_01b3
            offset += 8
        }
        var last: UInt64 = 0
        for (shift, i) in (offset..<bytes.count).enumerated() { last |= UInt64(bytes[i]) << (8 * UInt64(shift)) }
        h = (h ^ last) &* 0x0000_0100_0000_01b3
        return (h ^ (h >> 29)) | 1  // never 0, the empty slot's mark
    }
}

extension Int {
    /// The smallest power of two at least `self` (1 for 0 and 1).
    fileprivate var nextPowerOfTwo: Int { self <= 1 ? 1 : 1 << (Int.bitWidth - (self - 1).leadingZeroBitCount) }
}
