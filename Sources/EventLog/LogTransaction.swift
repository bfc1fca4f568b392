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
/// reaches its own databases through ``transaction``.
public struct LogTransaction {
    /// The underlying LMDB transaction, for the domain's own databases.
    public let transaction: Transaction
    let store: EventLogStore

    /// A read view inside this write transaction (sees its own uncommitted writes).
    public var reader: LogReader { LogReader(transaction: transaction, store: store) }

    /// The last sequence, including events appended earlier in this transaction.
    public func lastSequence() throws -> UInt64 { try reader.lastSequence() }

    /// Appends sealed events and their index entries; returns their sequences.
    @discardableResult
    public func append(_ newEvents: [NewEvent], key: SealingKey) throws -> [UInt64] {
        guard !newEvents.isEmpty else { return [] }
        let last = try lastSequence()
        // Sequences come from the file (an import can end at 2^64 − 1): check the room left.
        guard UInt64.max - last >= UInt64(newEvents.count) else { throw EventLogError.sequenceSpaceExhausted(last: last) }
        let first = last + 1
        let sequences = (0..<UInt64(newEvents.count)).map { first + $0 }
        var tips: [String: [UInt8]] = [:]
        for user in Set(newEvents.map(\.userId)) { tips[user] = try chainTip(userId: user, key: key) }
        let sealed = try SealedBatch(newEvents, firstSequence: first, key: key, ivs: store.random.bytes(16 * newEvents.count),
                                     previousMACs: tips, parallelThreshold: Self.parallelSealThreshold)
        try transaction.withCursor(store.events) { cursor in
            for (i, sequence) in sequences.enumerated() {
                var k = sequence.bigEndian
                try withUnsafeBytes(of: &k) { k in try cursor.put(key: k, value: sealed.envelope(i), flags: .append) }
            }
        }
        // Index entries in key order: a batch's entries then walk the B-tree forward instead of
        // touching a random leaf per event (random order cost ~4 µs per event at 10,000 a
        // batch). Sequences grow, so grouping them by prefix (one per user, one per user and
        // item) and sorting only the distinct prefixes gives that order without sorting keys.
        var userGroups: [String: [UInt64]] = [:]
        var cipherGroups: [IndexGroup: [UInt64]] = [:]
        for (event, sequence) in zip(newEvents, sequences) {
            userGroups[event.userId, default: []].append(sequence)
            if !event.cipherId.isEmpty { cipherGroups[IndexGroup(userId: event.userId, cipherId: event.cipherId), default: []].append(sequence) }
        }
        var groups = userGroups.map { (IndexKey.userPrefix($0.key), $0.value) }
        groups.sort { $0.0.lexicographicallyPrecedes($1.0) }
        var cipherPrefixed = cipherGroups.map { (IndexKey.cipherPrefix($0.key.userId, $0.key.cipherId), $0.value) }
        cipherPrefixed.sort { $0.0.lexicographicallyPrecedes($1.0) }
        groups += cipherPrefixed   // cipher keys (tag 2) sort after user keys (tag 1)
        try transaction.withCursor(store.index) { cursor in
            var key: [UInt8] = []
            for (prefix, groupSequences) in groups {
                key.removeAll(keepingCapacity: true)
                key.append(contentsOf: prefix)
                key.append(contentsOf: [UInt8](repeating: 0, count: 8))
                try key.withUnsafeMutableBytes { k in
                    for sequence in groupSequences {
                        withUnsafeBytes(of: sequence.bigEndian) { k.baseAddress!.advanced(by: prefix.count).copyMemory(from: $0.baseAddress!, byteCount: 8) }
                        try cursor.put(key: UnsafeRawBufferPointer(k), value: UnsafeRawBufferPointer(start: nil, count: 0))
                    }
                }
            }
        }
        // Each user's head record moves in the same transaction as the events.
        for (user, groupSequences) in userGroups {
            guard let lastOfUser = groupSequences.last, let chain = sealed.chains[user] else { continue }
            try putHead(HeadRecord(userId: user, lastSequence: lastOfUser, chain: chain), key: key)
        }
        return sequences
    }

    /// The MAC a user's next event chains onto: the sealed head record's chain value (checked
    /// with `key`), or, in a store without one (upcast from format 1, or imported without
    /// heads), the MAC of the user's last event; 32 zero bytes for a user with no event.
    /// Following the head rather than the last event keeps a deleted tail detectable after
    /// later appends (the next event names the missing one as its previous).
    func chainTip(userId: String, key: SealingKey) throws -> [UInt8] {
        if let db = store.heads, let bytes = try transaction.get(db, key: IndexKey.checkpointPrefix(userId)) {
            guard let head = HeadRecord(bytes: bytes), head.userId == userId else {
                throw EventLogError.headRecord("the head record of user \(userId) is malformed; nothing was written: run 'vaultlog verify' for a full report")
            }
            guard head.authenticate(bytes, key: key) else {
                throw EventLogError.headRecord("the head record of user \(userId) failed authentication (wrong key or tampered file); nothing was written: run 'vaultlog verify' for a full report")
            }
            return head.chain
        }
        guard let last = try reader.lastSequence(userId: userId), let envelope = try reader.envelope(at: last) else {
            return Envelope.chainStart
        }
        try LogReader.checkIndexed(envelope.header, sequence: last, userId: userId)
        return Array(envelope.mac)
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
        guard let db = store.heads else { return }
        try transaction.put(db, key: IndexKey.checkpointPrefix(userId), value: bytes)
    }

    /// Appends one event.
    @discardableResult
    public func append(_ event: NewEvent, key: SealingKey) throws -> UInt64 {
        try append([event], key: key)[0]
    }

    /// Appends an envelope sealed elsewhere, byte for byte, at its own header's sequence, with
    /// its index entries (`vaultlog import` of an export). The sequence must be after the
    /// last one; the bytes are not re-sealed, so they still verify under the original user key.
    public func appendSealed(_ envelope: Envelope) throws {
        let sequence = envelope.header.sequence
        let last = try lastSequence()
        guard sequence > last else {
            throw EnvelopeError.malformed(sequence: sequence, reason: "sequence is not after the log's last sequence \(last)")
        }
        try transaction.put(store.events, key: sequenceKey(sequence), value: envelope.bytes, flags: .append)
        try transaction.put(store.index, key: IndexKey.user(envelope.header.userId, sequence), value: [])
        if !envelope.header.cipherId.isEmpty {
            try transaction.put(store.index, key: IndexKey.cipher(envelope.header.userId, envelope.header.cipherId, sequence), value: [])
        }
    }

    /// Batches at least this large are sealed on all cores (sealing is independent per event
    /// once sequences are assigned; smaller batches are not worth the dispatch).
    static let parallelSealThreshold = 64

    /// See ``EventLogStore/deleteUser(_:)``.
    @discardableResult
    public func deleteUser(_ userId: String) throws -> Int {
        let sequences = try reader.sequences(userId: userId, cipherId: nil)
        for sequence in sequences { try transaction.delete(store.events, key: sequenceKey(sequence)) }
        for prefix in [IndexKey.userPrefix(userId), IndexKey.cipherUserPrefix(userId)] {
            try deleteAll(in: store.index, withPrefix: prefix)
        }
        try deleteAll(in: store.checkpoints, withPrefix: IndexKey.checkpointPrefix(userId))
        if let heads = store.heads { try transaction.delete(heads, key: IndexKey.checkpointPrefix(userId)) }
        if let snapshots = store.snapshots {
            try transaction.delete(snapshots, key: SnapshotRecord.key(userId: userId))
            try deleteAll(in: snapshots, withPrefix: SnapshotRecord.itemPrefix(userId: userId))
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
