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

/// A batch's index entries (one per event under its user, one more under its user and item)
/// in key order: a batch's entries then walk the B-tree forward instead of touching a random
/// leaf per event (random order cost ~4 µs per event at 10,000 a batch). Sequences grow, so
/// grouping the entries by key prefix and sorting only the distinct prefixes gives that order;
/// a counting sort keeps the entries in one flat array. Built with the sealed batch (off the
/// transaction's thread in a bulk append), used by the transaction that puts it.
struct BatchIndexEntries: Sendable {
    /// Each group's key prefix, groups in key order.
    private let prefixes: [[UInt8]]
    /// The events of group `g` (their positions in the batch) at `events[starts[g]..<starts[g + 1]]`.
    private let starts: [Int]
    private let events: [Int32]
    /// The position of each user's (by slot) last event in the batch.
    let lastEventOfUser: [Int]

    init(_ batch: [NewEvent], users: UserSlots) {
        var prefixes = users.ids.map(IndexKey.userPrefix)   // group = slot
        var entryGroups: [Int32] = [], entryEvents: [Int32] = []
        entryGroups.reserveCapacity(2 * batch.count)
        entryEvents.reserveCapacity(2 * batch.count)
        var cipherGroups: [CipherGroup: Int32] = [:]
        var lastEventOfUser = [Int](repeating: 0, count: users.ids.count)
        for (i, event) in batch.enumerated() {
            let slot = users.slots[i]
            entryGroups.append(Int32(slot))
            entryEvents.append(Int32(i))
            lastEventOfUser[slot] = i
            guard !event.cipherId.isEmpty else { continue }
            let key = CipherGroup(userSlot: slot, cipherId: event.cipherId)
            let group: Int32
            if let known = cipherGroups[key] {
                group = known
            } else {
                group = Int32(prefixes.count)
                prefixes.append(IndexKey.cipherPrefix(event.userId, event.cipherId))
                cipherGroups[key] = group
            }
            entryGroups.append(group)
            entryEvents.append(Int32(i))
        }
        // Groups in key order, then each group's entries (in event order) by counting sort.
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
        for group in entryGroups { starts[rank[Int(group)] + 1] += 1 }
        for g in prefixes.indices { starts[g + 1] += starts[g] }
        var fill = starts
        var events = [Int32](repeating: 0, count: entryEvents.count)
        for (group, event) in zip(entryGroups, entryEvents) {
            let g = rank[Int(group)]
            events[fill[g]] = event
            fill[g] += 1
        }
        self.prefixes = order.map { prefixes[$0] }
        self.starts = starts
        self.events = events
        self.lastEventOfUser = lastEventOfUser
    }

    /// Calls `body` with every entry's key (its group's prefix then the event's big-endian
    /// sequence, `firstSequence` being event 0's), in key order.
    func forEachKey(firstSequence: UInt64, _ body: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        var key = [UInt8](repeating: 0, count: (prefixes.map(\.count).max() ?? 0) + 8)
        try key.withUnsafeMutableBytes { key in
            for (g, prefix) in prefixes.enumerated() {
                prefix.withUnsafeBytes { key.copyMemory(from: $0) }
                let keyBytes = UnsafeRawBufferPointer(rebasing: key[0..<prefix.count + 8])
                for entry in starts[g]..<starts[g + 1] {
                    let sequence = (firstSequence + UInt64(events[entry])).bigEndian
                    withUnsafeBytes(of: sequence) { key.baseAddress!.advanced(by: prefix.count).copyMemory(from: $0.baseAddress!, byteCount: 8) }
                    try body(keyBytes)
                }
            }
        }
    }
}

/// A user (its slot in the batch) and an item: one group of a batch's item index entries.
struct CipherGroup: Hashable {
    let userSlot: Int
    let cipherId: String
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
