import Crypto
import Foundation
import VaultCrypto

/// A batch of events sealed into one buffer, envelope `i` at `offsets[i]..<offsets[i + 1]`,
/// each exactly the bytes ``Envelope/seal(header:body:key:iv:)`` makes for it.
///
/// Sealing one event at a time allocated its header, its ciphertext and the joined envelope:
/// three heap blocks per event, and at 10,000 events a batch the allocator's fresh pages (page
/// faults, zeroing) cost more than the AES. Here a batch is one allocation: the layout comes
/// first (every length is known before anything is encrypted), then each event's header, IV,
/// ciphertext and body MAC are written into its own range on all cores, then the short event
/// MACs run in order, because each of a user's events names the event MAC before it.
///
/// Immutable once sealed, so it may be handed from the thread that sealed it to the one that
/// puts it.
final class SealedBatch: @unchecked Sendable {
    /// The envelopes, back to back.
    let buffer: UnsafeMutableRawBufferPointer
    /// The anonymous mapping `buffer` starts, when it is one rather than from `malloc` (it may
    /// be longer: a recycled one).
    private let mapping: UnsafeMutableRawBufferPointer?
    /// Where the mapping goes back when the batch goes (a bulk load's), else unmapped.
    private let pool: BatchBufferPool?
    /// Where each envelope starts, and the end of the last.
    let offsets: [Int]
    /// What the batch was sealed against: its sequences follow `base.lastSequence`, and each of
    /// its users' first event chains onto `base.tips[user]` (the chain start when absent). It
    /// can be put only in a transaction whose log is still in that state.
    let base: SealingBase
    /// The batch's distinct users and each event's slot among them.
    let users: UserSlots
    /// The batch's index entries, in key order.
    let indexEntries: BatchIndexEntries
    /// The MAC of each user's last event in the batch (the chain the next append continues).
    private(set) var chains: [String: [UInt8]] = [:]

    /// The number of events.
    var count: Int { offsets.count - 1 }
    /// The sequence of the batch's first event.
    var firstSequence: UInt64 { base.lastSequence + 1 }
    /// The sequence of its last event.
    var lastSequence: UInt64 { base.lastSequence + UInt64(count) }

    /// Envelope `i`'s bytes (valid while the batch lives).
    func envelope(_ i: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: buffer[offsets[i]..<offsets[i + 1]])
    }

    /// What the batch after this one is sealed against once this one is put: its last sequence
    /// and its users' new chains (other users' tips come from `base` or the store).
    var successorBase: SealingBase {
        SealingBase(lastSequence: lastSequence, tips: base.tips.merging(chains) { _, new in new })
    }

    /// Seals `events` with consecutive sequences after `base.lastSequence`, each user's first
    /// event chained onto `base.tips[user]` (the chain start when absent), the IV of event `i`
    /// being `ivs[16 i ..< 16 i + 16]`; `base` is asked for the batch's distinct users (in order
    /// of first appearance). Throws before anything is written for an id too long for a header,
    /// or when the sequences would pass 2^64 − 1.
    init(_ events: [NewEvent], key: SealingKey, ivs: [UInt8], parallelThreshold: Int, pool: BatchBufferPool? = nil,
         base: (_ users: [String]) throws -> SealingBase) throws {
        precondition(ivs.count == 16 * events.count, "one 16-byte IV per event")
        let users = UserSlots(events)
        let base = try base(users.ids)
        // Sequences come from the file (an import can end at 2^64 − 1): check the room left.
        guard UInt64.max - base.lastSequence >= UInt64(events.count) else {
            throw EventLogError.sequenceSpaceExhausted(last: base.lastSequence)
        }
        let firstSequence = base.lastSequence + 1
        let ivBytes = Envelope.ivBytes, macBytes = Envelope.macBytes
        @Sendable func header(_ i: Int) -> EventHeader {
            let event = events[i]
            return EventHeader(sequence: firstSequence + UInt64(i), userId: event.userId, cipherId: event.cipherId,
                               eventType: event.eventType, recordedAtMillis: event.recordedAtMillis)
        }
        // Layout: header ‖ IV ‖ event MAC ‖ body MAC ‖ ciphertext per event (format 3).
        var offsets = [Int]()
        offsets.reserveCapacity(events.count + 1)
        var headerLengths = [Int]()
        headerLengths.reserveCapacity(events.count)
        var total = 0
        for i in events.indices {
            let length = try Envelope.headerLength(header(i))
            offsets.append(total)
            headerLengths.append(length)
            total += length + ivBytes + macBytes + Envelope.bodyMACLength + AESCBC.ciphertextCount(plaintextCount: events[i].body.count)
        }
        offsets.append(total)
        // New events are written in the current format, which chains each to the one before.
        precondition(Envelope.currentFormatVersion >= Envelope.bodyMACFormatVersion, "sealing writes chained headers and body MACs")
        self.offsets = offsets
        self.base = base
        self.users = users
        self.pool = pool
        (buffer, mapping) = Self.allocate(byteCount: total, pool: pool)

        // Headers (chain start as the previous MAC for now), IVs, ciphertexts and body MACs,
        // each into its own range.
        nonisolated(unsafe) let out = buffer
        let cbc = key.events.cbc, bodies = key.bodies
        let lengths = headerLengths, ends = offsets
        parallelForEach(count: events.count, threshold: parallelThreshold) { i in
            let start = ends[i], headerLength = lengths[i]
            let ivStart = start + headerLength, ctStart = ivStart + ivBytes + macBytes + Envelope.bodyMACLength
            Envelope.writeHeader(header(i), length: headerLength, to: UnsafeMutableRawBufferPointer(rebasing: out[start..<ivStart]))
            ivs.withUnsafeBytes { all in
                let iv = UnsafeRawBufferPointer(rebasing: all[16 * i..<16 * i + 16])
                UnsafeMutableRawBufferPointer(rebasing: out[ivStart..<ivStart + ivBytes]).copyMemory(from: iv)
                let written = events[i].body.withUnsafeBytes { body in
                    cbc.encrypt(body, iv: iv, into: UnsafeMutableRawBufferPointer(rebasing: out[ctStart..<ends[i + 1]]))
                }
                assert(written == ends[i + 1] - ctStart, "event \(i)'s ciphertext fills the range sized for it")
            }
            Envelope.writeBodyMAC(envelope: UnsafeMutableRawBufferPointer(rebasing: out[start..<ends[i + 1]]),
                                  headerLength: headerLength, key: bodies)
        }

        // The event MACs, in order: each of a user's events carries the event MAC of the one before it.
        var lastMAC = [Int](repeating: -1, count: users.ids.count)   // slot → offset of its latest MAC here
        let eventKey = key.events
        for i in events.indices {
            let start = offsets[i], headerLength = headerLengths[i]
            let ivStart = start + headerLength, macStart = ivStart + ivBytes
            let slot = users.slots[i]
            let previousSlot = UnsafeMutableRawBufferPointer(rebasing: out[ivStart - macBytes..<ivStart])
            if lastMAC[slot] >= 0 {
                previousSlot.copyMemory(from: UnsafeRawBufferPointer(rebasing: out[lastMAC[slot]..<lastMAC[slot] + macBytes]))
            } else {
                (base.tips[users.ids[slot]] ?? Envelope.chainStart).withUnsafeBytes { previousSlot.copyMemory(from: $0) }
            }
            lastMAC[slot] = macStart
            Envelope.writeEventMAC(envelope: UnsafeMutableRawBufferPointer(rebasing: out[start..<offsets[i + 1]]),
                                   headerLength: headerLength, key: eventKey)
        }
        for (slot, offset) in lastMAC.enumerated() where offset >= 0 {
            chains[users.ids[slot]] = Array(UnsafeRawBufferPointer(rebasing: out[offset..<offset + macBytes]))
        }
        indexEntries = BatchIndexEntries(users: users)
    }

    deinit {
        guard let mapping else { return buffer.deallocate() }
        if let pool { pool.give(mapping) } else { munmap(mapping.baseAddress, mapping.count) }
    }

    /// At or above this size the buffer is a mapping of its own (see ``allocate(byteCount:pool:)``).
    static let mappedBufferBytes = 1 << 20

    /// The batch's buffer, and the mapping it is the start of if it is one. A large buffer is
    /// an anonymous mapping of its own, returned to the system when the batch goes whichever
    /// thread made it: from `malloc`, a bulk append's buffers, made on the sealing thread,
    /// stayed in that thread's arena (anonymous RSS 35.9 → 39.0 MiB over 12 rounds of 500,000
    /// events, against 20.8 → 23.9 MiB mapped; the slow rise left is LMDB's list of dirty
    /// pages, which grows with the largest commit). Within one bulk load the mappings go round
    /// through `pool`: a fresh one for each batch cost its page faults and the zeroing of
    /// every page, about a tenth of the sealing thread's time.
    private static func allocate(byteCount: Int, pool: BatchBufferPool?)
        -> (buffer: UnsafeMutableRawBufferPointer, mapping: UnsafeMutableRawBufferPointer?) {
        if byteCount >= mappedBufferBytes {
            if let recycled = pool?.take(atLeast: byteCount) {
                return (UnsafeMutableRawBufferPointer(rebasing: recycled[0..<byteCount]), recycled)
            }
            let address = mmap(nil, byteCount, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
            if let address, address != MAP_FAILED {
                let mapping = UnsafeMutableRawBufferPointer(start: address, count: byteCount)
                return (mapping, mapping)
            }
        }
        return (.allocate(byteCount: max(byteCount, 1), alignment: 16), nil)
    }
}

/// The mappings of one bulk load's sealed batches, handed from a batch that was put to the
/// next one sealed (every byte of a batch's range is written when it is sealed, so a recycled
/// mapping needs no clearing). Keeps at most ``maxSpares``; unmaps them when the load is over
/// and its last batch gone, so nothing stays resident after it.
final class BatchBufferPool: @unchecked Sendable {
    private let lock = NSLock()
    private var spares: [UnsafeMutableRawBufferPointer] = []
    /// A load has one batch sealing while another is put: two spares cover it.
    static let maxSpares = 2

    /// A spare of at least `count` bytes, or nil.
    func take(atLeast count: Int) -> UnsafeMutableRawBufferPointer? {
        lock.withLock {
            guard let i = spares.firstIndex(where: { $0.count >= count }) else { return nil }
            return spares.remove(at: i)
        }
    }

    /// Keeps `mapping` for a later batch, or unmaps it when enough are kept.
    func give(_ mapping: UnsafeMutableRawBufferPointer) {
        let kept = lock.withLock {
            guard spares.count < Self.maxSpares else { return false }
            spares.append(mapping)
            return true
        }
        if !kept { munmap(mapping.baseAddress, mapping.count) }
    }

    deinit {
        for mapping in spares { munmap(mapping.baseAddress, mapping.count) }
    }
}

/// What a batch is sealed against: the log's last sequence and the chain tip (the MAC the next
/// event names as its previous) of each of the batch's users.
struct SealingBase: Sendable, Equatable {
    var lastSequence: UInt64
    var tips: [String: [UInt8]]
}

/// A batch's distinct user ids in order of first appearance, and each event's slot among them.
/// A batch has one user, rarely a few: ids are compared with the previous event's and then
/// looked up in a short list, hashed only past a handful.
struct UserSlots: Sendable {
    private(set) var ids: [String] = []
    private(set) var slots: [Int] = []

    init(_ events: [NewEvent]) {
        slots.reserveCapacity(events.count)
        var hashed: [String: Int] = [:]
        var previous = -1
        for event in events {
            let user = event.userId
            if previous >= 0, ids[previous] == user {
                slots.append(previous)
                continue
            }
            let slot: Int
            if let found = ids.count <= 8 ? ids.firstIndex(of: user) : hashed[user] {
                slot = found
            } else {
                slot = ids.count
                ids.append(user)
                if ids.count == 9 { hashed = Dictionary(uniqueKeysWithValues: zip(ids, ids.indices)) } else if ids.count > 9 { hashed[user] = slot }
            }
            slots.append(slot)
            previous = slot
        }
    }
}

extension SealedBatch {
    /// Starts sealing `events` on another thread (see ``EventLogStore/append(batches:key:committed:)``)
    /// against `predicted` (the log as the batch before leaves it), completed from `store` for
    /// users it has no tip for; against `store` as it is when nil.
    static func sealInBackground(_ events: [NewEvent], predicted: SealingBase?, store: EventLogStore,
                                 key: SealingKey, pool: BatchBufferPool) -> BackgroundWork<SealedBatch> {
        BackgroundWork {
            // The first batch of a load is sealed on all cores (nothing runs beside it); the
            // others on this thread alone, beside the transaction putting the batch before (its
            // commit mostly waits for the disk): sealing 10,000 events takes less than their
            // commit, and the transaction's thread keeps a core to itself.
            try SealedBatch(events, key: key, ivs: store.random.bytes(16 * events.count),
                            parallelThreshold: predicted == nil ? LogTransaction.parallelSealThreshold : .max, pool: pool) { users in
                guard var base = predicted else { return try store.read { try $0.sealingBase(for: users, key: key) } }
                let missing = users.filter { base.tips[$0] == nil }
                guard !missing.isEmpty else { return base }
                let tips = try store.read { reader in try missing.map { try reader.chainTip(userId: $0, key: key) } }
                for (user, tip) in zip(missing, tips) { base.tips[user] = tip }
                return base
            }
        }
    }
}
