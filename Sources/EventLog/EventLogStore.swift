import Crypto
import Foundation
import LMDB
import Synchronization
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

    public init(userId: String, cipherId: String, eventType: UInt16, recordedAtMillis: Int64, body: [UInt8]) {
        self.userId = userId
        self.cipherId = cipherId
        self.eventType = eventType
        self.recordedAtMillis = recordedAtMillis
        self.body = body
    }
}

/// Why a store cannot be opened or used.
public enum EventLogError: Error, Sendable, CustomStringConvertible {
    /// The store was written by a newer VaultLog.
    case newerStoreFormat(found: Int, supported: Int)
    /// The store's format marker is unreadable.
    case corruptMetadata(String)
    /// A checkpoint failed authentication or is malformed.
    case checkpoint(String)
    /// A head record (a user's last sequence and chain value) failed authentication or is malformed.
    case headRecord(String)
    /// The underlying LMDB error, with the store path.
    case storage(path: String, LMDBError)
    /// No sequence is left after `last` (the log holds an event at sequence 2^64 − 1, which
    /// only an imported or crafted file can do): nothing more can be appended.
    case sequenceSpaceExhausted(last: UInt64)

    public var description: String {
        switch self {
        case .newerStoreFormat(let found, let supported):
            return "store format v\(found) is newer than this build supports (v\(supported)); upgrade VaultLog to read it (nothing was changed)"
        case .corruptMetadata(let what):
            return "store metadata is corrupt (\(what)); run 'vaultlog verify' for a full report"
        case .checkpoint(let what):
            return "checkpoint: \(what)"
        case .headRecord(let what):
            return what
        case .sequenceSpaceExhausted(let last):
            return "the log's last sequence is \(last), the largest there is: no event can be appended after it (nothing was written); export the events you need and start a new store"
        case .storage(let path, let error):
            if error.isInvalidFile {
                return "\(path): not a VaultLog store (\(error.message)); check the path, or restore the directory from a backup"
            }
            return "\(path): \(error)"
        }
    }
}

/// Options for opening an ``EventLogStore``.
public struct EventLogOptions: Sendable {
    /// LMDB environment options (map size, durability, read-only, ...).
    public var environment = EnvironmentOptions()
    /// Source of IVs. Inject a `SeededRandomSource` only for deterministic replays.
    public var random: any RandomSource = SystemRandomSource()
    /// Diagnostics.
    public var logger = Logger(label: "vaultlog.eventlog")

    public init() {}
}

/// The append-only, sealed event log in one LMDB environment: the entry point of
/// the storage layer.
///
/// ```swift
/// let store = try EventLogStore(path: dir)
/// let key = SealingKey(userKey: userKey)
/// let seqs = try store.append([NewEvent(userId: "u1", cipherId: "c1", eventType: 1,
///                                       recordedAtMillis: 0, body: Array("{}".utf8))], key: key)
/// let body = try store.envelope(at: seqs[0])!.open(key: key)
/// ```
///
/// Databases: `events` (big-endian `UInt64` sequence → envelope, appended with `MDB_APPEND`),
/// `index` (user → sequences, user+cipher → sequences), `checkpoints` (sealed projections),
/// `meta` (format version). The domain adds its own databases with ``openDatabase(_:)`` and
/// writes them together with events in one transaction through ``write(_:)``.
///
/// The log is append-only with one documented exception: ``deleteUser(_:)`` (logout) removes
/// everything of one user.
public final class EventLogStore: Sendable {
    /// The store format this build writes and reads. 2: envelopes of format 2 (each user's
    /// events chained by their MACs) and the `heads` database. A format 1 store is upcast when
    /// opened writable: its events stay as they are (still read), new events are format 2.
    public static let storeFormatVersion = 2

    /// The LMDB environment.
    public let environment: Environment
    /// The directory.
    public var path: String { environment.path }
    let events: Database
    let index: Database
    let checkpoints: Database
    let meta: Database
    /// Per user, the sealed head record (last sequence and chain value); nil only in a store
    /// opened read-only that was written before format 2.
    let heads: Database?
    let random: any RandomSource
    let logger: Logger

    /// Opens (creating if needed and allowed) the store at `path`.
    public init(path: String, options: EventLogOptions = EventLogOptions()) throws {
        do {
            environment = try Environment(path: path, options: options.environment)
        } catch let error as LMDBError {
            throw EventLogError.storage(path: path, error)
        }
        random = options.random
        logger = options.logger
        do {
            let readOnly = options.environment.readOnly
            if readOnly {
                // A read-only open of a store that never had a write has no databases yet.
                let databases = try environment.openExistingDatabases(["events", "index", "checkpoints", "meta"])
                (events, index, checkpoints, meta) = (databases[0], databases[1], databases[2], databases[3])
            } else {
                (events, index, checkpoints, meta) = try environment.write { txn in
                    (try txn.openDatabase("events", create: true), try txn.openDatabase("index", create: true),
                     try txn.openDatabase("checkpoints", create: true), try txn.openDatabase("meta", create: true))
                }
            }
        } catch let error as LMDBError {
            throw EventLogError.storage(path: path, error)
        }
        let writable = !options.environment.readOnly
        let stored = try Self.checkFormat(environment, meta)
        let environment = environment
        do {
            if writable {
                // Creates the store's marker, or upcasts a format 1 store: the marker and the
                // `heads` database change together; no event is rewritten.
                let metaDatabase = meta
                heads = try environment.write { txn in
                    let heads = try txn.openDatabase("heads", create: true)
                    if stored != Self.storeFormatVersion {
                        try txn.put(metaDatabase, key: Array("format".utf8), value: [UInt8(Self.storeFormatVersion)])
                    }
                    return heads
                }
                if let stored, stored < Self.storeFormatVersion {
                    options.logger.info("store upcast", metadata: ["path": "\(path)", "from": "\(stored)", "to": "\(Self.storeFormatVersion)"])
                }
            } else {
                heads = (try? environment.openExistingDatabases(["heads"]))?.first
            }
        } catch let error as LMDBError {
            throw EventLogError.storage(path: path, error)
        }
    }

    /// The stored format (nil for a new store), refusing a corrupt or newer one before anything is changed.
    private static func checkFormat(_ environment: Environment, _ meta: Database) throws -> Int? {
        guard let stored = try environment.read({ try $0.get(meta, key: Array("format".utf8)) }) else { return nil }
        guard stored.count == 1 else { throw EventLogError.corruptMetadata("format marker of \(stored.count) bytes") }
        guard stored[0] >= 1 else { throw EventLogError.corruptMetadata("format marker 0") }
        guard Int(stored[0]) <= storeFormatVersion else {
            throw EventLogError.newerStoreFormat(found: Int(stored[0]), supported: storeFormatVersion)
        }
        return Int(stored[0])
    }

    /// The format marker as stored (1 for a store not yet upcast).
    public func storedFormatVersion() throws -> Int {
        try Self.checkFormat(environment, meta) ?? Self.storeFormatVersion
    }

    /// Opens (creating) a domain database in this environment, e.g. the local `ciphers` cache.
    public func openDatabase(_ name: String) throws -> Database {
        precondition(!["events", "index", "checkpoints", "meta", "heads"].contains(name), "\(name) is reserved by EventLog")
        return try environment.openDatabase(name, create: !environment.options.readOnly)
    }

    // MARK: Writing

    /// Runs `body` in one write transaction in which the domain can update its own databases
    /// and append events; all of it commits together, durably, or not at all.
    /// `body` may run more than once (when the map grows), so keep side effects inside it.
    public func write<T>(_ body: (LogTransaction) throws -> T) throws -> T {
        try environment.write { try body(LogTransaction(transaction: $0, store: self)) }
    }

    /// ``write(_:)`` on the environment's writer thread.
    public func writeAsync<T: Sendable>(_ body: @escaping @Sendable (LogTransaction) throws -> T) async throws -> T {
        try await environment.writeAsync { try body(LogTransaction(transaction: $0, store: self)) }
    }

    /// Appends events in one transaction and returns their sequences (strictly increasing).
    @discardableResult
    public func append(_ newEvents: [NewEvent], key: SealingKey) throws -> [UInt64] {
        try write { try $0.append(newEvents, key: key) }
    }

    /// Appends one event and returns its sequence.
    @discardableResult
    public func append(_ event: NewEvent, key: SealingKey) throws -> UInt64 {
        try append([event], key: key)[0]
    }

    /// Removes every event, index entry and checkpoint of `userId` (logout). The only
    /// non-append mutation of the log. Returns the number of events removed.
    @discardableResult
    public func deleteUser(_ userId: String) throws -> Int {
        try write { try $0.deleteUser(userId) }
    }

    // MARK: Reading

    /// The last sequence appended (0 for an empty log).
    public func lastSequence() throws -> UInt64 {
        try environment.read { try LogReader(transaction: $0, store: self).lastSequence() }
    }

    /// Number of events stored.
    public func eventCount() throws -> Int {
        try environment.read { try $0.count(events) }
    }

    /// Runs `body` with a read-only view (one consistent snapshot).
    public func read<T>(_ body: (LogReader) throws -> T) throws -> T {
        try environment.read { try body(LogReader(transaction: $0, store: self)) }
    }

    /// The envelope at `sequence`, or nil.
    public func envelope(at sequence: UInt64) throws -> Envelope? {
        try read { try $0.envelope(at: sequence) }
    }

    /// Envelopes with sequences in `range` (in order). For large ranges prefer ``stream(from:to:batchSize:)``.
    public func envelopes(in range: ClosedRange<UInt64>) throws -> [Envelope] {
        try read { reader in
            var out: [Envelope] = []
            try reader.forEachEnvelope(from: range.lowerBound, to: range.upperBound) { out.append($0); return true }
            return out
        }
    }

    /// A user's envelopes (optionally only those of one cipher), in order.
    public func envelopes(userId: String, cipherId: String? = nil, after sequence: UInt64 = 0) throws -> [Envelope] {
        try read { reader in
            try reader.sequences(userId: userId, cipherId: cipherId, after: sequence).compactMap { sequence in
                guard let envelope = try reader.envelope(at: sequence) else { return nil }
                try LogReader.checkIndexed(envelope.header, sequence: sequence, userId: userId)
                return envelope
            }
        }
    }

    /// A user's headers (optionally one cipher's), read without a key.
    public func headers(userId: String, cipherId: String? = nil, after sequence: UInt64 = 0) throws -> [EventHeader] {
        try envelopes(userId: userId, cipherId: cipherId, after: sequence).map(\.header)
    }

    /// Streams envelopes from `from` to `to` in batches, each batch in its own short read
    /// transaction, so memory stays bounded by `batchSize` however long the log is.
    public func stream(from: UInt64 = 1, to: UInt64 = .max, batchSize: Int = 4096) -> EnvelopeStream {
        EnvelopeStream(store: self, from: from, to: to, batchSize: batchSize)
    }

    /// Calls `body` for each envelope from `from` to `to`, reading in batches of `batchSize`
    /// (bounded memory; each batch is one snapshot). Stops when `body` returns false.
    public func forEachEnvelope(from: UInt64 = 1, to: UInt64 = .max, batchSize: Int = 4096,
                                _ body: (Envelope) throws -> Bool) throws {
        var next = from
        while next <= to {
            var batch: [Envelope] = []
            batch.reserveCapacity(batchSize)
            try read { reader in
                try reader.forEachEnvelope(from: next, to: to) { envelope in
                    batch.append(envelope)
                    return batch.count < batchSize
                }
            }
            guard let last = batch.last else { return }
            for envelope in batch { guard try body(envelope) else { return } }
            guard last.header.sequence < .max else { return }
            next = last.header.sequence + 1
        }
    }

    // MARK: Checkpoints

    /// Stores a sealed checkpoint (e.g. a projection) of `userId` as of `sequence`.
    public func saveCheckpoint(userId: String, sequence: UInt64, payload: [UInt8], key: SealingKey) throws {
        try write { try $0.saveCheckpoint(userId: userId, sequence: sequence, payload: payload, key: key) }
    }

    /// The newest checkpoint of `userId` at or before `sequence`, opened; nil if none.
    public func latestCheckpoint(userId: String, atOrBefore sequence: UInt64 = .max, key: SealingKey) throws -> (sequence: UInt64, payload: [UInt8])? {
        try read { try $0.latestCheckpoint(userId: userId, atOrBefore: sequence, key: key) }
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
        var chains: [String: [UInt8]] = [:]
        for user in Set(newEvents.map(\.userId)) { chains[user] = try chainTip(userId: user, key: key) }
        let sealed = try Self.seal(newEvents, firstSequence: first, key: key, ivs: store.random.bytes(16 * newEvents.count),
                                   chains: &chains)
        try transaction.withCursor(store.events) { cursor in
            for (sequence, bytes) in zip(sequences, sealed) {
                var k = sequence.bigEndian
                try withUnsafeBytes(of: &k) { k in
                    try bytes.withUnsafeBytes { v in try cursor.put(key: k, value: v, flags: .append) }
                }
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
            guard let lastOfUser = groupSequences.last, let chain = chains[user] else { continue }
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

    /// Seals events with consecutive sequences from `firstSequence`, each user's chained onto
    /// `chains[user]` (its previous MAC; updated to the last MAC sealed). Bodies are encrypted
    /// in parallel for large batches; the MACs then run in order, one extra 32-byte HMAC input
    /// per event (the previous MAC is part of the header).
    static func seal(_ events: [NewEvent], firstSequence: UInt64, key: SealingKey, ivs: [UInt8],
                     chains: inout [String: [UInt8]]) throws -> [[UInt8]] {
        let ciphertexts = try encrypt(events, key: key, ivs: ivs)
        var out: [[UInt8]] = []
        out.reserveCapacity(events.count)
        for (i, event) in events.enumerated() {
            let header = EventHeader(sequence: firstSequence + UInt64(i), userId: event.userId, cipherId: event.cipherId,
                                     eventType: event.eventType, recordedAtMillis: event.recordedAtMillis,
                                     previousMAC: chains[event.userId] ?? Envelope.chainStart)
            var bytes = try Envelope.encodeHeader(header)
            chains[event.userId] = try Envelope.appendMAC(ciphertext: ciphertexts[i], appendingTo: &bytes, key: key.events,
                                                          iv: ivs[16 * i..<16 * i + 16])
            out.append(bytes)
        }
        return out
    }

    /// The bodies' ciphertexts, in parallel for large batches.
    static func encrypt(_ events: [NewEvent], key: SealingKey, ivs: [UInt8]) throws -> [[UInt8]] {
        @Sendable func sealOne(_ i: Int) throws -> [UInt8] {
            try Envelope.encrypt(events[i].body, key: key.events, iv: ivs[16 * i..<16 * i + 16])
        }
        let count = events.count
        let cores = ProcessInfo.processInfo.activeProcessorCount
        guard count >= parallelSealThreshold, cores > 1 else { return try (0..<count).map(sealOne) }
        let results = UnsafeMutableBufferPointer<[UInt8]>.allocate(capacity: count)
        results.initialize(repeating: [])
        defer { results.deinitialize(); results.deallocate() }   // Array(results) copied them: release the originals
        let failure = Mutex<(any Error)?>(nil)
        let chunks = cores * 4
        nonisolated(unsafe) let output = results
        DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
            let range = (count * chunk / chunks)..<(count * (chunk + 1) / chunks)
            do {
                for i in range { output[i] = try sealOne(i) }
            } catch {
                failure.withLock { $0 = error }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
        return Array(results)
    }

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
    public func saveCheckpoint(userId: String, sequence: UInt64, payload: [UInt8], key: SealingKey) throws {
        let dbKey = IndexKey.checkpoint(userId, sequence)
        var sealed = Checkpoint.header(userId: userId, sequence: sequence)
        try Envelope.sealBody(payload, appendingTo: &sealed, key: key.checkpoints, iv: store.random.bytes(16)[...])
        try transaction.put(store.checkpoints, key: dbKey, value: sealed)
    }
}

/// A read view of the log within one transaction.
public struct LogReader {
    /// The underlying LMDB transaction, for the domain's own databases.
    public let transaction: Transaction
    let store: EventLogStore

    /// The last sequence (0 when empty).
    public func lastSequence() throws -> UInt64 {
        try transaction.withCursor(store.events) { cursor in
            guard let last = try cursor.last() else { return 0 }
            guard last.key.count == 8 else {
                throw EnvelopeError.malformed(sequence: nil, reason: "event key of \(last.key.count) bytes")
            }
            return readBE(last.key, at: 0, as: UInt64.self)
        }
    }

    /// The sequence an `events` key names.
    static func sequence(ofKey key: UnsafeRawBufferPointer) throws -> UInt64 {
        guard key.count == 8 else { throw EnvelopeError.malformed(sequence: nil, reason: "event key of \(key.count) bytes") }
        return readBE(key, at: 0, as: UInt64.self)
    }

    /// Every read checks that an envelope is the event its key names: the MAC binds the header's
    /// sequence, so a valid envelope copied under another key is not that event (and reading it
    /// as one would make a scan go back to an earlier sequence, forever).
    static func checkKey(_ sequence: UInt64, _ header: EventHeader) throws {
        guard header.sequence == sequence else { throw EnvelopeError.keyMismatch(key: sequence, headerSequence: header.sequence) }
    }

    /// An event reached through a user's index entry must be that user's, under its own key.
    static func checkIndexed(_ header: EventHeader, sequence: UInt64, userId: String) throws {
        try checkKey(sequence, header)
        guard header.userId == userId else {
            throw EnvelopeError.malformed(sequence: sequence, reason: "the index lists it under user \(userId) but its header names user \(header.userId)")
        }
    }

    /// The envelope at `sequence`, or nil.
    public func envelope(at sequence: UInt64) throws -> Envelope? {
        guard let bytes = try transaction.get(store.events, key: sequenceKey(sequence)) else { return nil }
        let envelope = try Envelope(bytes: bytes)
        try Self.checkKey(sequence, envelope.header)
        return envelope
    }

    /// Visits envelopes in `from...to` in order while `body` returns true.
    public func forEachEnvelope(from: UInt64, to: UInt64, _ body: (Envelope) throws -> Bool) throws {
        try transaction.scan(store.events, from: sequenceKey(from)) { key, value in
            let sequence = try Self.sequence(ofKey: key)
            guard sequence <= to else { return false }
            let envelope = try Envelope(bytes: Array(value))
            try Self.checkKey(sequence, envelope.header)
            return try body(envelope)
        }
    }

    /// Visits headers in `from...to` without decoding bodies (works while locked).
    public func forEachHeader(from: UInt64 = 1, to: UInt64 = .max, _ body: (EventHeader) throws -> Bool) throws {
        try transaction.scan(store.events, from: sequenceKey(from)) { key, value in
            let sequence = try Self.sequence(ofKey: key)
            guard sequence <= to else { return false }
            let header = try Envelope.parseHeader(raw: value).header
            try Self.checkKey(sequence, header)
            return try body(header)
        }
    }

    /// Sequences of a user's events (or of one cipher's), in order, after `after`.
    public func sequences(userId: String, cipherId: String?, after: UInt64 = 0) throws -> [UInt64] {
        guard after < .max else { return [] }
        let prefix = cipherId.map { IndexKey.cipherPrefix(userId, $0) } ?? IndexKey.userPrefix(userId)
        var out: [UInt64] = []
        try transaction.scan(store.index, from: prefix + sequenceKey(after + 1)) { key, _ in
            guard key.count == prefix.count + 8, key.starts(with: prefix) else { return false }
            out.append(readBE(key, at: prefix.count, as: UInt64.self))
            return true
        }
        return out
    }

    /// The sequence of the user's last event (from the index), or nil.
    public func lastSequence(userId: String) throws -> UInt64? {
        let prefix = IndexKey.userPrefix(userId)
        var found: UInt64?
        try transaction.scan(store.index, from: prefix + [UInt8](repeating: 0xFF, count: 8), reverse: true) { key, _ in
            if key.count == prefix.count + 8, key.starts(with: prefix) { found = readBE(key, at: prefix.count, as: UInt64.self) }
            return false
        }
        return found
    }

    /// Every stored head record, by user id, as stored (sealed; for `vaultlog export`).
    public func sealedHeads() throws -> [String: [UInt8]] {
        guard let db = store.heads else { return [:] }
        var out: [String: [UInt8]] = [:]
        try transaction.scan(db) { _, value in
            let bytes = Array(value)
            if let head = HeadRecord(bytes: bytes) { out[head.userId] = bytes }
            return true
        }
        return out
    }

    /// Whether the index lists an event of `userId` at `sequence`.
    public func hasEvent(userId: String, at sequence: UInt64) throws -> Bool {
        try transaction.get(store.index, key: IndexKey.user(userId, sequence)) != nil
    }

    /// Visits the headers of a user's events after `after`, in order, through the index and
    /// without copying bodies (no key needed). Stops when `body` returns false.
    public func forEachHeader(userId: String, after: UInt64 = 0, _ body: (EventHeader) throws -> Bool) throws {
        guard after < .max else { return }
        let prefix = IndexKey.userPrefix(userId)
        try transaction.scan(store.index, from: prefix + sequenceKey(after + 1)) { key, _ in
            guard key.count == prefix.count + 8, key.starts(with: prefix) else { return false }
            guard let value = try transaction.getRaw(store.events, key: UnsafeRawBufferPointer(rebasing: key[prefix.count...])) else {
                return true
            }
            let header = try Envelope.parseHeader(raw: value).header
            try Self.checkIndexed(header, sequence: readBE(key, at: prefix.count, as: UInt64.self), userId: userId)
            return try body(header)
        }
    }

    /// Up to `limit` of a user's envelopes after `after`, in order (a bounded batch for folds
    /// over long logs; call again after the last one's sequence).
    public func envelopes(userId: String, after: UInt64, limit: Int) throws -> [Envelope] {
        guard after < .max else { return [] }
        let prefix = IndexKey.userPrefix(userId)
        var out: [Envelope] = []
        out.reserveCapacity(Swift.min(limit, 4096))
        try transaction.scan(store.index, from: prefix + sequenceKey(after + 1)) { key, _ in
            guard out.count < limit, key.count == prefix.count + 8, key.starts(with: prefix) else { return false }
            if let value = try transaction.getRaw(store.events, key: UnsafeRawBufferPointer(rebasing: key[prefix.count...])) {
                let envelope = try Envelope(bytes: Array(value))
                try Self.checkIndexed(envelope.header, sequence: readBE(key, at: prefix.count, as: UInt64.self), userId: userId)
                out.append(envelope)
            }
            return true
        }
        return out
    }

    /// The user ids that have events (from the index, no key needed).
    public func userIds() throws -> [String] {
        var users: [String] = []
        var cursorKey: [UInt8] = [IndexKey.userTag]
        while true {
            var found: String?
            try transaction.scan(store.index, from: cursorKey) { key, _ in
                guard key.first == IndexKey.userTag, key.count > 2 else { return false }
                let length = Int(key[1])
                guard key.count >= 2 + length else { return false }
                found = String(decoding: key[2..<2 + length], as: UTF8.self)
                return false
            }
            guard let user = found else { return users }
            users.append(user)
            // Skip past every key of this user: prefix followed by 0xFF…
            cursorKey = IndexKey.userPrefix(user) + [UInt8](repeating: 0xFF, count: 9)
        }
    }

    /// See ``EventLogStore/latestCheckpoint(userId:atOrBefore:key:)``.
    public func latestCheckpoint(userId: String, atOrBefore sequence: UInt64, key: SealingKey) throws -> (sequence: UInt64, payload: [UInt8])? {
        let prefix = IndexKey.checkpointPrefix(userId)
        var found: (UInt64, [UInt8])?
        try transaction.scan(store.checkpoints, from: IndexKey.checkpoint(userId, sequence), reverse: true) { k, v in
            guard k.count == prefix.count + 8, k.starts(with: prefix) else { return false }
            found = (readBE(k, at: prefix.count, as: UInt64.self), Array(v))
            return false
        }
        guard let (checkpointSequence, sealed) = found else { return nil }
        let headerLength = Checkpoint.header(userId: userId, sequence: checkpointSequence).count
        guard sealed.count >= headerLength + 64, sealed[0..<headerLength].elementsEqual(Checkpoint.header(userId: userId, sequence: checkpointSequence)) else {
            throw EventLogError.checkpoint("checkpoint of \(userId) at \(checkpointSequence) is malformed")
        }
        do {
            let payload = try Envelope.openBody(sealed, headerLength: headerLength, key: key.checkpoints, sequence: checkpointSequence)
            return (checkpointSequence, payload)
        } catch {
            throw EventLogError.checkpoint("checkpoint of \(userId) at \(checkpointSequence) failed authentication (wrong key or tampered file)")
        }
    }

    /// Sequences of all checkpoints of a user.
    public func checkpointSequences(userId: String) throws -> [UInt64] {
        let prefix = IndexKey.checkpointPrefix(userId)
        var out: [UInt64] = []
        try transaction.scan(store.checkpoints, from: prefix) { k, _ in
            guard k.count == prefix.count + 8, k.starts(with: prefix) else { return false }
            out.append(readBE(k, at: prefix.count, as: UInt64.self))
            return true
        }
        return out
    }
}

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

/// A user and item, grouping a batch's index entries.
struct IndexGroup: Hashable {
    let userId: String
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

/// An `AsyncSequence` of envelopes read in bounded batches; see ``EventLogStore/stream(from:to:batchSize:)``.
public struct EnvelopeStream: AsyncSequence, Sendable {
    public typealias Element = Envelope
    let store: EventLogStore
    let from: UInt64
    let to: UInt64
    let batchSize: Int

    public func makeAsyncIterator() -> Iterator {
        Iterator(store: store, next: from, to: to, batchSize: batchSize)
    }

    /// Reads the next batch when the current one is used up.
    public struct Iterator: AsyncIteratorProtocol {
        let store: EventLogStore
        var next: UInt64
        let to: UInt64
        let batchSize: Int
        var buffer: [Envelope] = []
        var position = 0
        var finished = false

        init(store: EventLogStore, next: UInt64, to: UInt64, batchSize: Int) {
            self.store = store
            self.next = next
            self.to = to
            self.batchSize = Swift.max(1, batchSize)
        }

        public mutating func next() async throws -> Envelope? {
            if position == buffer.count {
                guard !finished, next <= to else { return nil }
                buffer.removeAll(keepingCapacity: true)
                position = 0
                let (from, to, size) = (next, self.to, batchSize)
                var batch = buffer
                try store.read { reader in
                    try reader.forEachEnvelope(from: from, to: to) { envelope in
                        batch.append(envelope)
                        return batch.count < size
                    }
                }
                buffer = batch
                guard let last = buffer.last else { finished = true; return nil }
                if last.header.sequence == .max { finished = true } else { next = last.header.sequence + 1 }
            }
            defer { position += 1 }
            return buffer[position]
        }
    }
}
