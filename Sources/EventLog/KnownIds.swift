import Foundation

/// The item ids of a fold's previous batch, for the headers of its next batch to reuse: a
/// header whose cipher id is one of them gets that string (a reference-count increment)
/// instead of a new one (an allocation, a UTF-8 check and, when the batch is released, a free).
/// A log edits the same items over and over, so nearly every id of a batch was in the one
/// before it.
///
/// Filled by one thread, then only read, so the threads that open a batch share it (a value)
/// without a lock. Made from owned strings and compared byte for byte, so a lookup returns
/// exactly the string the header holds, or nil (the header then makes its own).
package struct KnownIds: Sendable {
    /// Open addressing, a power of two long: each slot's ``hash(_:)`` (0: empty) and its id.
    private var hashes: [UInt64]
    private var ids: [String]
    private let mask: Int

    /// An empty table with room for `capacity` ids (more are kept until it is half full, then
    /// dropped: a lookup of a dropped id gives nil).
    package init(capacity: Int) {
        let size = max(16, (capacity * 2).nextPowerOfTwo)
        hashes = [UInt64](repeating: 0, count: size)
        ids = [String](repeating: "", count: size)
        mask = size - 1
        room = size / 2
    }

    /// How many more ids the table takes (it stays at most half full).
    private var room: Int

    /// Adds `id` (once; an empty id is not kept: it is a user-level event's, already
    /// allocation-free). Not generic on purpose: a fold adds ids from its batch by index.
    package mutating func insert(_ id: String) {
        guard !id.isEmpty, room > 0,
              let hash = id.utf8.withContiguousStorageIfAvailable({ Self.hash(UnsafeRawBufferPointer($0)) }) else { return }
        var i = Int(truncatingIfNeeded: hash) & mask
        while hashes[i] != 0 {
            if hashes[i] == hash, ids[i] == id { return }
            i = (i + 1) & mask
        }
        hashes[i] = hash
        ids[i] = id
        room -= 1
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
        let prime: UInt64 = 0x0000_0100_0000_01b3
        var h: UInt64 = 0xcbf2_9ce4_8422_2325 ^ UInt64(bytes.count)
        let count = bytes.count
        if count >= 8 {
            var offset = 0
            while offset + 8 <= count {
                h = (h ^ bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* prime
                offset += 8
            }
            // The last 8 bytes again (overlapping): the tail without a loop over bytes.
            if offset < count { h = (h ^ bytes.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)) &* prime }
        } else {
            var last: UInt64 = 0
            for i in 0..<count { last = last << 8 | UInt64(bytes[i]) }
            h = (h ^ last) &* prime
        }
        // A full avalanche (MurmurHash3's finaliser): ids that differ only in their last
        // characters differ only in the high bits of the last multiply, and the table's
        // index is the low bits (without it, 1,000 such ids fell into 4 runs of slots).
        h = (h ^ (h >> 33)) &* 0xff51_afd7_ed55_8ccd
        h = (h ^ (h >> 33)) &* 0xc4ce_b9fe_1a85_ec53
        return (h ^ (h >> 33)) | 1 << 63  // never 0 (the empty slot's mark), the index bits untouched
    }
}

extension Int {
    /// The smallest power of two at least `self` (1 for 0 and 1).
    fileprivate var nextPowerOfTwo: Int { self <= 1 ? 1 : 1 << (Int.bitWidth - (self - 1).leadingZeroBitCount) }
}
