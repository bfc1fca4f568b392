import Crypto
import Foundation
import LMDB
import Logging
import VaultCrypto

/// An event to append: everything but the sequence, which the log assigns.
public struct NewEvent: Sendable {
    /// The user whose key seals the body.
    public var userId: String
    /// The item the event is about ("" for user-level events).
    public var cipherId: String
    /// The domain's event type code.
    public var eventType: UInt16
    /// When it happened (milliseconds since 1970, UTC).
    public var recordedAtMillis: Int64
    /// The plaintext body; sealed before it touches the disk.
    public var body: [UInt8]

    /// An event to append; the log assigns its sequence and seals it.
    public init(userId: String, cipherId: String, eventType: UInt16, recordedAtMillis: Int64, body: [UInt8]) {
        self.userId = userId
        self.cipherId = cipherId
        self.eventType = eventType
        self.recordedAtMillis = recordedAtMillis
        self.body = body
    }
}

/// A write transaction on the log, handed out by ``EventLogStore/write(_:)``. The domain
/// reaches its own tables through ``SideTable``.
public struct LogTransaction {
    /// The underlying LMDB transaction: the package's own plumbing, never API.
    package let transaction: Transaction
    let store: EventLogStore

    /// A read view inside this write transaction (sees its own uncommitted writes).
    public var reader: LogReader { LogReader(transaction: transaction, store: store) }

    /// The last sequence, including events appended earlier in this transaction.
    public func lastSequence() throws -> UInt64 { try reader.lastSequence() }

    /// Appends sealed events and their index entries; returns their sequences.
    @discardableResult
    public func append(_ newEvents: [NewEvent], key: SealingKey) throws -> [UInt64] {
        guard !newEvents.isEmpty else { return [] }
        let reader = reader
        let sealed = try SealedBatch(newEvents, key: key, ivs: store.random.bytes(16 * newEvents.count),
                                     parallelThreshold: Self.parallelSealThreshold) { try reader.sealingBase(for: $0, key: key) }
        return try put(sealed, key: key)
    }

    /// Whether the log is still in the state `sealed` was sealed against (its last sequence and
    /// its users' chain tips), so that its envelopes can be put as they are.
    func isBase(of sealed: SealedBatch, key: SealingKey) throws -> Bool {
        guard try lastSequence() == sealed.base.lastSequence else { return false }
        for user in sealed.users.ids {
            guard try reader.chainTip(userId: user, key: key) == sealed.base.tips[user] ?? Envelope.chainStart else { return false }
        }
        return true
    }

    /// Puts a batch sealed against this transaction's state (see ``isBase(of:key:)``): its
    /// envelopes, their index entries and its users' head records. Returns the sequences.
    @discardableResult
    func put(_ sealed: SealedBatch, key: SealingKey) throws -> [UInt64] {
        let first = sealed.firstSequence
        let sequences = (0..<UInt64(sealed.count)).map { first + $0 }
        try transaction.withCursor(store.events) { cursor in
            for (i, sequence) in sequences.enumerated() {
                var k = sequence.bigEndian
                try withUnsafeBytes(of: &k) { k in try cursor.put(key: k, value: sealed.envelope(i), flags: .append) }
            }
        }
        // The user index entries (see `BatchIndexEntries`), then each user's head record, all
        // in the same transaction as the events; the item index when it is due.
        try putUserEntries(sealed.indexEntries, first: first)
        for (slot, user) in sealed.users.ids.enumerated() {
            guard let chain = sealed.chains[user] else { continue }
            try putHead(HeadRecord(userId: user, lastSequence: first + UInt64(sealed.indexEntries.lastEventOfUser[slot]), chain: chain), key: key)
        }
        try mergeItemIndexIfDue(last: sealed.lastSequence)
        return sequences
    }

    /// Brings the item index up to date when ``EventLogOptions/itemIndexMergeInterval`` events
    /// or more are past ``LogReader/itemIndexedThrough()``: each event after the mark gets its
    /// entry under the merge's generation, its user and its item, in key order, and the mark
    /// moves to the last sequence. Part of the append's transaction, so the entries and the
    /// mark commit with it. `last`: the log's last sequence when the caller knows it (the event
    /// it just put).
    func mergeItemIndexIfDue(last knownLast: UInt64? = nil) throws {
        let reader = reader
        let indexedThrough = try reader.itemIndexedThrough()
        let last = try knownLast ?? reader.lastSequence()
        guard indexedThrough < last, last - indexedThrough >= UInt64(Swift.max(1, store.itemIndexMergeInterval)) else { return }
        try mergeItemIndex(after: indexedThrough, through: last)
    }

    /// Puts the item index entries of the events in `after + 1 ... last` under generation
    /// `after + 1` (see ``ItemIndex``) and moves the mark to `last`.
    func mergeItemIndex(after: UInt64, through last: UInt64) throws {
        let head = ItemIndex.generationKey(after + 1)
        var table = ItemPrefixTable(head: head)
        var groups: [Int32] = [], sequences: [UInt64] = []
        try reader.forEachUnindexedItemEvent(after: after) { sequence, user, cipher in
            guard sequence <= last else { return }
            groups.append(table.group(user: user, cipher: cipher))
            sequences.append(sequence)
        }
        // The generation is past every earlier merge's (a logout that brought the mark back
        // removed the entries after it), so the entries go at the item index's end; checked,
        // as a damaged index could hold a later key, and then they are put in place.
        let atEnd = try transaction.withCursor(store.items) { cursor in
            try cursor.last().map { $0.key.lexicographicallyPrecedes(head) } ?? true
        }
        try putItemEntries(GroupedIndexEntries(prefixes: table.prefixes, groups: groups, values: sequences), atEnd: atEnd)
        try transaction.put(store.meta, key: LogReader.itemIndexedThroughKey, value: sequenceKey(last))
    }

    func putHead(_ head: HeadRecord, key: SealingKey) throws {
        guard let db = store.heads else { return }
        try transaction.put(db, key: IndexKey.checkpointPrefix(head.userId), value: head.sealed(key: key))
    }

    /// Stores a head record sealed elsewhere, byte for byte (`vaultlog import` of an export's
    /// heads). It must parse and name `userId`; its MAC is checked by `verify` with the key.
    public func putSealedHead(userId: String, bytes: [UInt8]) throws {
        guard let head = HeadRecord(bytes: bytes), head.userId == userId else {
            throw EventLogError.headRecord("the head record given for user \(userId) is malformed")
        }
        let last = try lastSequence()
        guard head.lastSequence <= last else {
            throw EventLogError.headRecord("the head record given for user \(userId) names event \(head.lastSequence) as the user's last, past the last event given (\(last)): events were removed from what is imported")
        }
        guard let db = store.heads else { return }
        try transaction.put(db, key: IndexKey.checkpointPrefix(userId), value: bytes)
    }

    /// Appends one event.
    @discardableResult
    public func append(_ event: NewEvent, key: SealingKey) throws -> UInt64 {
        try append([event], key: key)[0]
    }

    /// Appends an envelope sealed elsewhere, byte for byte, at its own header's sequence, with
    /// its user index entry, and merges the item index when it is due (`vaultlog import` of an
    /// export). The sequence must be after the last one; the bytes are not re-sealed, so they
    /// still verify under the original user key.
    public func appendSealed(_ envelope: Envelope) throws {
        let sequence = envelope.header.sequence
        let last = try lastSequence()
        guard sequence > last else {
            throw EnvelopeError.malformed(sequence: sequence, reason: "sequence is not after the log's last sequence \(last)")
        }
        try transaction.put(store.events, key: sequenceKey(sequence), value: envelope.bytes, flags: .append)
        try putUserEntry(userId: envelope.header.userId, sequence: sequence)
        try mergeItemIndexIfDue(last: sequence)
    }

    /// Batches at least this large are sealed on all cores (sealing is independent per event
    /// once sequences are assigned; smaller batches are not worth the dispatch).
    static let parallelSealThreshold = 64

    /// See ``EventLogStore/deleteUser(_:)``.
    @discardableResult
    public func deleteUser(_ userId: String) throws -> Int {
        let sequences = try reader.sequences(userId: userId, cipherId: nil)
        for sequence in sequences { try transaction.delete(store.events, key: sequenceKey(sequence)) }
        try deleteUserEntries(userId: userId)
        try deleteAll(in: store.index, withPrefix: IndexKey.cipherUserPrefix(userId))
        try deleteItemEntries(userId: userId, generations: try reader.itemGenerations())
        try deleteAll(in: store.checkpoints, withPrefix: IndexKey.checkpointPrefix(userId))
        if let heads = store.heads { try transaction.delete(heads, key: IndexKey.checkpointPrefix(userId)) }
        if let snapshots = store.snapshots {
            try transaction.delete(snapshots, key: SnapshotRecord.key(userId: userId))
            try deleteAll(in: snapshots, withPrefix: SnapshotRecord.itemPrefix(userId: userId))
        }
        // The user's events may have been the log's last: their sequences are given out again,
        // so the item index mark comes back to the last event left (every event up to it is
        // still indexed), or the next events would count as indexed.
        let last = try lastSequence()
        if try reader.itemIndexedThrough() > last {
            try transaction.put(store.meta, key: LogReader.itemIndexedThroughKey, value: sequenceKey(last))
        }
        return sequences.count
    }

    private func deleteAll(in db: Database, withPrefix prefix: [UInt8]) throws {
        try transaction.withCursor(db) { cursor in
            var entry = try cursor.seek(atOrAfter: prefix)
            while let current = entry, current.key.starts(with: prefix) {
                try cursor.deleteCurrent()
                // After a delete the cursor sits on the next entry; re-read it.
                entry = try cursor.seek(atOrAfter: prefix)
            }
        }
    }

    /// See ``EventLogStore/saveCheckpoint(userId:sequence:payload:key:)``.
    /// A checkpoint at or before the user's compaction horizon is not stored: the events after
    /// it up to the horizon are gone, so nothing could fold on from it.
    public func saveCheckpoint(userId: String, sequence: UInt64, payload: [UInt8], key: SealingKey) throws {
        guard try sequence > reader.horizon(userId: userId) else { return }
        let dbKey = IndexKey.checkpoint(userId, sequence)
        var sealed = Checkpoint.header(userId: userId, sequence: sequence)
        try Envelope.sealBody(payload, appendingTo: &sealed, key: key.checkpoints, iv: store.random.bytes(16)[...])
        try transaction.put(store.checkpoints, key: dbKey, value: sealed)
    }
}
