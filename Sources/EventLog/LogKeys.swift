import Crypto
import Foundation
import LMDB
import Synchronization
import Logging
import VaultCrypto

/// Sealed-checkpoint framing: `"VLCK" ‖ version ‖ userIdLength ‖ userId ‖ sequence` then the
/// sealed body; the MAC covers that header, so a checkpoint cannot be moved to another user or
/// sequence.
enum Checkpoint {
    static func header(userId: String, sequence: UInt64) -> [UInt8] {
        var out = Array("VLCK".utf8)
        out.append(1)
        let user = Array(userId.utf8.prefix(Envelope.maxIdLength))
        out.append(UInt8(user.count))
        out.append(contentsOf: user)
        appendBE(sequence, to: &out)
        return out
    }
}

/// A user's head record: the sequence of the user's last event and its MAC (the chain value),
/// sealed with the user's head key, so deleting the tail of a user's events is detected:
/// `"VLHD" ‖ 0x01 ‖ userIdLength ‖ userId ‖ lastSequence(8, BE) ‖ chain(32) ‖ MAC(32)`, the
/// HMAC-SHA256 covering every byte before it. Updated in the transaction of every append.
struct HeadRecord: Equatable {
    static let magic = Array("VLHD".utf8)
    let userId: String
    let lastSequence: UInt64
    let chain: [UInt8]

    init(userId: String, lastSequence: UInt64, chain: [UInt8]) {
        self.userId = userId
        self.lastSequence = lastSequence
        self.chain = chain
    }

    /// Parses the stored bytes (nil when they are not a head record); the MAC is not checked.
    init?(bytes: [UInt8]) {
        guard bytes.count >= 4 + 1 + 1 + 8 + 32 + 32, bytes.starts(with: Self.magic), bytes[4] == 1 else { return nil }
        let length = Int(bytes[5])
        guard bytes.count == 6 + length + 8 + 32 + 32,
              let user = String(validating: bytes[6..<6 + length], as: UTF8.self) else { return nil }
        userId = user
        lastSequence = bytes[(6 + length)..<(14 + length)].reduce(0) { $0 << 8 | UInt64($1) }
        chain = Array(bytes[(14 + length)..<(46 + length)])
    }

    /// The last sequence of a stored head record, read in place (nil when it does not parse).
    static func lastSequence(raw: UnsafeRawBufferPointer) -> UInt64? {
        guard raw.count >= 6, raw.starts(with: magic), raw[4] == 1 else { return nil }
        let length = Int(raw[5])
        guard raw.count == 6 + length + 8 + 32 + 32 else { return nil }
        return raw[(6 + length)..<(14 + length)].reduce(0) { $0 << 8 | UInt64($1) }
    }

    func unsealed() -> [UInt8] {
        var out = Self.magic + [1]
        let user = Array(userId.utf8.prefix(Envelope.maxIdLength))
        out.append(UInt8(user.count))
        out.append(contentsOf: user)
        appendBE(lastSequence, to: &out)
        out.append(contentsOf: chain)
        return out
    }

    func sealed(key: SealingKey) -> [UInt8] {
        var out = unsealed()
        var hmac = key.heads.hmac
        hmac.update(data: out)
        out.append(contentsOf: hmac.finalize())
        return out
    }

    /// Whether `bytes` (this record as stored) carry a valid MAC under `key`.
    func authenticate(_ bytes: [UInt8], key: SealingKey) -> Bool {
        guard bytes.count > 32 else { return false }
        var hmac = key.heads.hmac
        hmac.update(data: bytes[..<(bytes.count - 32)])
        return constantTimeEquals(Array(hmac.finalize()), bytes.suffix(32))
    }
}

/// Index entries to put, in key order: entries put in key order walk the B-tree forward
/// instead of touching a random leaf each (random order cost ~4 µs per entry at 10,000 a
/// batch). Each entry's key is its group's prefix then a big-endian sequence; sequences grow
/// within a group, so sorting only the distinct prefixes gives the order, and a counting sort
/// keeps the entries in one flat array.
struct GroupedIndexEntries: Sendable {
    /// Each group's key prefix, groups in key order.
    let prefixes: [[UInt8]]
    /// The values of group `g` at `values[starts[g]..<starts[g + 1]]`, in the order given.
    let starts: [Int]
    let values: [UInt64]

    /// `groups[e]` is entry `e`'s index into `prefixes`, `values[e]` its sequence (or offset,
    /// see ``forEachGroup(adding:_:)``); each group's values must grow.
    init(prefixes: [[UInt8]], groups: [Int32], values: [UInt64]) {
        let order = prefixes.indices.sorted { a, b in
            prefixes[a].withUnsafeBufferPointer { x in
                prefixes[b].withUnsafeBufferPointer { y in
                    let common = memcmp(x.baseAddress!, y.baseAddress!, min(x.count, y.count))
                    return common != 0 ? common < 0 : x.count < y.count
                }
            }
        }
        var rank = [Int](repeating: 0, count: prefixes.count)
        for (position, group) in order.enumerated() { rank[group] = position }
        var starts = [Int](repeating: 0, count: prefixes.count + 1)
        for group in groups { starts[rank[Int(group)] + 1] += 1 }
        for g in prefixes.indices { starts[g + 1] += starts[g] }
        var fill = starts
        var sorted = [UInt64](repeating: 0, count: values.count)
        for (group, value) in zip(groups, values) {
            let g = rank[Int(group)]
            sorted[fill[g]] = value
            fill[g] += 1
        }
        self.prefixes = order.map { prefixes[$0] }
        self.starts = starts
        self.values = sorted
    }
}

/// A batch's entries under its users (one per event): per user (its ``UserIndex`` key), the
/// offsets of its events in the batch. Built with the sealed batch (off the transaction's
/// thread in a bulk append), used by the transaction that puts it
/// (``LogTransaction/putUserEntries(_:first:)``). The entries under each item follow in
/// merges (``LogTransaction/mergeItemIndexIfDue()``).
struct BatchIndexEntries: Sendable {
    let entries: GroupedIndexEntries
    /// The position of each user's (by slot) last event in the batch.
    let lastEventOfUser: [Int]

    /// `users`: the batch's users and each event's slot among them.
    init(users: UserSlots) {
        var lastEventOfUser = [Int](repeating: 0, count: users.ids.count)
        for (i, slot) in users.slots.enumerated() { lastEventOfUser[slot] = i }
        self.lastEventOfUser = lastEventOfUser
        entries = GroupedIndexEntries(prefixes: users.ids.map(UserIndex.key), groups: users.slots.map { Int32($0) },
                                      values: users.slots.indices.map { UInt64($0) })
    }
}

/// The distinct (user, item) key prefixes of a merge, each numbered by first appearance. An
/// open-addressing table over the ids' bytes: a merge looks up tens of thousands of events,
/// and a dictionary keyed by each one's prefix built as an array spent most of the merge
/// allocating and hashing those arrays.
struct ItemPrefixTable {
    /// What every prefix starts with (``ItemIndex/generationKey(_:)`` of the merge).
    let head: [UInt8]
    /// Prefix of group `g`: `head` then the user and cipher ids (``ItemIndex/key(head:user:cipher:)``).
    private(set) var prefixes: [[UInt8]] = []
    /// `(hash, group + 1)` per slot, 0 for empty; the count is a power of two.
    private var slots = [(Int, Int32)](repeating: (0, 0), count: 64)

    init(head: [UInt8]) { self.head = head }

    mutating func group(user: UnsafeRawBufferPointer, cipher: UnsafeRawBufferPointer) -> Int32 {
        var hasher = Hasher()
        hasher.combine(bytes: user)
        hasher.combine(user.count)
        hasher.combine(bytes: cipher)
        let hash = hasher.finalize()
        let mask = slots.count - 1
        var slot = hash & mask
        while slots[slot].1 != 0 {
            let group = slots[slot].1 - 1
            if slots[slot].0 == hash, Self.matches(prefixes[Int(group)], after: head.count, user: user, cipher: cipher) { return group }
            slot = (slot + 1) & mask
        }
        let group = Int32(prefixes.count)
        prefixes.append(ItemIndex.key(head: head, user: user, cipher: cipher))
        slots[slot] = (hash, group + 1)
        if 2 * prefixes.count > slots.count { grow() }
        return group
    }

    /// Whether `prefix` names `user` and `cipher` after its first `h` bytes.
    private static func matches(_ prefix: [UInt8], after h: Int, user: UnsafeRawBufferPointer, cipher: UnsafeRawBufferPointer) -> Bool {
        guard prefix.count == h + 2 + user.count + cipher.count else { return false }
        return prefix.withUnsafeBytes { p in
            Int(p[h]) == user.count && Int(p[h + 1 + user.count]) == cipher.count
                && (user.count == 0 || memcmp(p.baseAddress! + h + 1, user.baseAddress!, user.count) == 0)
                && (cipher.count == 0 || memcmp(p.baseAddress! + h + 2 + user.count, cipher.baseAddress!, cipher.count) == 0)
        }
    }

    private mutating func grow() {
        let old = slots
        slots = [(Int, Int32)](repeating: (0, 0), count: 2 * old.count)
        let mask = slots.count - 1
        for entry in old where entry.1 != 0 {
            var slot = entry.0 & mask
            while slots[slot].1 != 0 { slot = (slot + 1) & mask }
            slots[slot] = entry
        }
    }
}

/// Keys of the `index` and `checkpoints` databases. Ids are length-prefixed, so one id can
/// never be a prefix of another's keys.
enum IndexKey {
    static let userTag: UInt8 = 0x01
    static let cipherTag: UInt8 = 0x02

    static func userPrefix(_ user: String) -> [UInt8] {
        let u = Array(user.utf8)
        return [userTag, UInt8(truncatingIfNeeded: u.count)] + u
    }

    static func user(_ user: String, _ sequence: UInt64) -> [UInt8] {
        userPrefix(user) + sequenceKey(sequence)
    }

    static func cipherUserPrefix(_ user: String) -> [UInt8] {
        let u = Array(user.utf8)
        return [cipherTag, UInt8(truncatingIfNeeded: u.count)] + u
    }

    static func cipherPrefix(_ user: String, _ cipher: String) -> [UInt8] {
        let c = Array(cipher.utf8)
        return cipherUserPrefix(user) + [UInt8(truncatingIfNeeded: c.count)] + c
    }

    /// Item entries written by merges in a store of format 5–7: `0x03 ‖ generation(8, BE) ‖
    /// userLength ‖ user ‖ cipherLength ‖ cipher ‖ sequence(8, BE)`, one key per event. Since
    /// format 8 a merge writes `items` instead (``ItemIndex``), and the upcast moves these there.
    /// The `0x02` entries without a generation are those of format 1–4 stores, still read.
    static let itemTag: UInt8 = 0x03

    /// A format 5–7 store's entry for one event (``itemTag``).
    static func formerItem(_ generation: UInt64, _ user: String, _ cipher: String, _ sequence: UInt64) -> [UInt8] {
        [itemTag] + ItemIndex.key(generation, user, cipher) + sequenceKey(sequence)
    }

    /// The merge generation that holds the entry of event `sequence`: the last of `generations`
    /// (in order) at or before it, nil when none is. Generations are the first sequence of
    /// each merge and merges cover disjoint ranges in order, so this is the merge that covered
    /// the event (``LogReader/itemGenerations()``).
    static func generation(of sequence: UInt64, in generations: [UInt64]) -> UInt64? {
        var low = 0, high = generations.count   // first index whose generation is after `sequence`
        while low < high {
            let mid = (low + high) / 2
            if generations[mid] <= sequence { low = mid + 1 } else { high = mid }
        }
        return low == 0 ? nil : generations[low - 1]
    }

    static func cipher(_ user: String, _ cipher: String, _ sequence: UInt64) -> [UInt8] {
        cipherPrefix(user, cipher) + sequenceKey(sequence)
    }

    static func checkpointPrefix(_ user: String) -> [UInt8] {
        let u = Array(user.utf8)
        return [UInt8(truncatingIfNeeded: u.count)] + u
    }

    static func checkpoint(_ user: String, _ sequence: UInt64) -> [UInt8] {
        checkpointPrefix(user) + sequenceKey(sequence)
    }
}
