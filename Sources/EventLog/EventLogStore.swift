import Crypto
import Foundation
import LMDB
import Synchronization
import Logging
import VaultCrypto

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
/// `users` (user → its sequences, ``UserIndex``), `items` (merge generation + user + cipher →
/// sequences, up to `meta["itemIndexedThrough"]`, ``ItemIndex``), `index` (user + cipher →
/// sequences in a store of format 1–4),
/// `checkpoints` (sealed projections), `meta` (format version).
/// The domain adds its own tables with ``openSideTable(_:)`` and writes them together with
/// events in one transaction through ``write(_:)``.
///
/// The log is append-only with two documented exceptions: ``deleteUser(_:)`` (logout) removes
/// everything of one user, and ``LogTransaction/compact(userId:through:payload:state:items:key:)``
/// replaces a user's oldest events with a sealed snapshot.
public final class EventLogStore: Sendable {
    /// The store format this build writes and reads. 2: envelopes of format 2 (each user's
    /// events chained by their MACs) and the `heads` database. A format 1 store is upcast when
    /// opened writable: its events stay as they are (still read), new events are format 2.
    /// 3: the `snapshots` database (compaction snapshots, see ``LogTransaction/compact(userId:through:payload:state:items:key:)``);
    /// an older build must not open a compacted store and fold it as if it started at sequence 1.
    /// 4: the item index is brought up to date in merges (``EventLogOptions/itemIndexMergeInterval``)
    /// and `meta["itemIndexedThrough"]` says how far it goes; an older build would miss the
    /// events after it in one item's history. A format 3 store is upcast with the mark at its
    /// last sequence (its writer indexed every event's item with the event).
    /// 5: a merge's item entries go under its generation (``IndexKey/itemTag``), appended at
    /// the index's end; an older build would not see them. The entries of a format 1–4 store
    /// stay as they are and are still read; its mark too.
    /// 6: the user index is the `users` database (``UserIndex``: each user's sequences packed
    /// in a tree of their own, appended at its end); an older build would find no user's events.
    /// A format 1–5 store opened writable is upcast in one transaction (its `0x01` entries move
    /// from `index` to `users`); opened read-only it is refused (``EventLogError/olderStoreFormat(path:found:current:)``).
    /// 7: new events are written in envelope format 3 (a body MAC beside the event MAC,
    /// `Envelope+BodyMAC.swift`); an older build would refuse each new event as a newer
    /// envelope. Nothing is rewritten: a format 6 store's events stay format 2 and read as before.
    /// 8: the item index is the `items` database (``ItemIndex``: one key per merge and item,
    /// its sequences packed as 8-byte values); an older build would find no item's merged events.
    /// A format 5–7 store opened writable is upcast in one transaction (its `0x03` entries move
    /// from `index` to `items`); opened read-only it is refused, as a format 1–5 store is.
    public static let storeFormatVersion = 8

    /// The LMDB environment: the package's own plumbing, never API (``StorageOptions`` opens
    /// it, ``sizes()`` reports on it).
    package let environment: Environment
    /// The directory.
    public var path: String { environment.path }
    let events: Database
    let index: Database
    /// The user index (``UserIndex``).
    let users: Database
    /// The item index (``ItemIndex``).
    let items: Database
    let checkpoints: Database
    let meta: Database
    /// Per user, the sealed head record (last sequence and chain value); nil only in a store
    /// opened read-only that was written before format 2.
    let heads: Database?
    /// Per user, the compaction snapshot and its per-item records; nil only in a store opened
    /// read-only that was written before format 3.
    let snapshots: Database?
    let random: any RandomSource
    let logger: Logger
    /// See ``EventLogOptions/itemIndexMergeInterval``.
    let itemIndexMergeInterval: Int

    /// Opens (creating if needed and allowed) the store at `path`.
    public init(path: String, options: EventLogOptions = EventLogOptions()) throws {
        do {
            environment = try Environment(path: path, options: options.environment.environmentOptions)
        } catch let error as LMDBError {
            throw EventLogError.storage(path: path, error)
        }
        random = options.random
        logger = options.logger
        itemIndexMergeInterval = max(0, options.itemIndexMergeInterval)
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
                // Creates the store's marker, or upcasts an older store: the marker, the `heads`
                // and `snapshots` databases and the item index mark change together; no event
                // is rewritten.
                let metaDatabase = meta, eventsDatabase = events, indexDatabase = index
                (heads, snapshots, users, items) = try environment.write { txn in
                    let heads = try txn.openDatabase("heads", create: true)
                    let snapshots = try txn.openDatabase("snapshots", create: true)
                    let users = try txn.openDatabase(UserIndex.databaseName, create: true, fixedSizeDuplicates: true)
                    let items = try txn.openDatabase(ItemIndex.databaseName, create: true, fixedSizeDuplicates: true)
                    var moved = 0
                    if let stored, stored < Self.userDatabaseFormatVersion {
                        moved = try Self.moveUserEntries(txn, index: indexDatabase, users: users, interruption: options.upcastInterruption)
                    }
                    if let stored, stored < ItemIndex.formatVersion {
                        _ = try Self.moveItemEntries(txn, index: indexDatabase, items: items, movedBefore: moved,
                                                     interruption: options.upcastInterruption)
                    }
                    if stored != Self.storeFormatVersion {
                        try txn.put(metaDatabase, key: Array("format".utf8), value: [UInt8(Self.storeFormatVersion)])
                    }
                    if stored.map({ $0 < 4 }) ?? true {
                        // A new store has indexed nothing; before format 4 every event's item
                        // entry was written with the event.
                        let indexed = try txn.withCursor(eventsDatabase) { cursor in
                            try cursor.last().flatMap { try? LogReader.sequence(ofKey: $0.key) } ?? 0
                        }
                        try txn.put(metaDatabase, key: LogReader.itemIndexedThroughKey, value: sequenceKey(stored == nil ? 0 : indexed))
                    }
                    return (heads, snapshots, users, items)
                }
                if let stored, stored < Self.storeFormatVersion {
                    options.logger.info("store upcast", metadata: ["path": "\(path)", "from": "\(stored)", "to": "\(Self.storeFormatVersion)"])
                }
            } else {
                try Self.checkReadable(path: path, stored: stored)
                let indexes = try environment.openExistingDatabases([UserIndex.databaseName, ItemIndex.databaseName])
                (users, items) = (indexes[0], indexes[1])
                heads = (try? environment.openExistingDatabases(["heads"]))?.first
                snapshots = (try? environment.openExistingDatabases(["snapshots"]))?.first
            }
        } catch let error as LMDBError {
            throw EventLogError.storage(path: path, error)
        }
    }

    /// The stored format (nil for a new store), refusing a corrupt or newer one before anything is changed.
    private static func checkFormat(_ environment: Environment, _ meta: Database) throws -> Int? {
        let (marker, mark) = try environment.read { txn in
            (try txn.get(meta, key: Array("format".utf8)), try txn.get(meta, key: LogReader.itemIndexedThroughKey))
        }
        guard let stored = marker else { return nil }
        guard stored.count == 1 else { throw EventLogError.corruptMetadata("format marker of \(stored.count) bytes") }
        guard stored[0] >= 1 else { throw EventLogError.corruptMetadata("format marker 0") }
        guard Int(stored[0]) <= storeFormatVersion else {
            throw EventLogError.newerStoreFormat(found: Int(stored[0]), supported: storeFormatVersion)
        }
        if let mark, mark.count != 8 {
            throw EventLogError.corruptMetadata("item index mark of \(mark.count) bytes (expected 8)")
        }
        return Int(stored[0])
    }

    /// The format marker as stored (1 for a store not yet upcast).
    public func storedFormatVersion() throws -> Int {
        try Self.checkFormat(environment, meta) ?? Self.storeFormatVersion
    }

    /// Opens (creating) a domain database in this environment; the domain's own are
    /// ``SideTable``s (``openSideTable(_:)``).
    package func openDatabase(_ name: String) throws -> Database {
        precondition(!["events", "index", "checkpoints", "meta", "heads", "snapshots", UserIndex.databaseName, ItemIndex.databaseName].contains(name), "\(name) is reserved by EventLog")
        return try environment.openDatabase(name, create: !environment.options.readOnly)
    }

    // MARK: Writing

    /// Runs `body` in one write transaction in which the domain can update its own databases
    /// and append events; all of it commits together, durably, or not at all.
    /// `body` may run more than once (when the map grows), so keep side effects inside it.
    public func write<T>(_ body: (LogTransaction) throws -> T) throws -> T {
        try environment.write { try body(LogTransaction(transaction: $0, store: self)) }
    }

    /// ``write(_:)`` with group commit for blocking callers on several threads: writes that
    /// queue up while a commit is in progress share the next one (see
    /// `Environment.writeGrouped(_:)`). `body` may run on another caller's thread.
    public func writeGrouped<T>(_ body: (LogTransaction) throws -> T) throws -> T {
        try environment.writeGrouped { try body(LogTransaction(transaction: $0, store: self)) }
    }

    /// Announces a grouped write that `body` prepares and then makes with
    /// ``writeGrouped(_:)``: a commit about to start waits a little for it (see
    /// `Environment.announcingWrite(_:)`).
    public func announcingWrite<T>(_ body: () throws -> T) rethrows -> T {
        try environment.announcingWrite(body)
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

    /// Appends `batches` in order, each in its own transaction: a batch is atomic and durable
    /// when it is reported, exactly as if ``append(_:key:)`` had been called for it. For bulk
    /// loads: while one batch is put and committed (mostly waiting for the disk), the next one
    /// is sealed on other threads, which a caller alternating `append` calls cannot arrange.
    ///
    /// The next batch is sealed against the log as the current one leaves it. When that is not
    /// the log it meets (another writer appended in between), it is sealed again inside its own
    /// transaction, so the log is always what the same appends made one by one would give.
    ///
    /// - Parameter committed: called on the calling thread after each batch's commit with the
    ///   batch's number (from 0) and its sequences (for progress); an error it throws stops the
    ///   load after that batch.
    /// - Returns: each batch's sequences, in order (empty for an empty batch).
    /// - Throws: the first error. The batches reported to `committed` before it are appended
    ///   and durable; the failing batch and the ones after it are not.
    @discardableResult
    public func append(batches: some Sequence<[NewEvent]>, key: SealingKey,
                       committed: (_ batch: Int, _ sequences: Range<UInt64>) throws -> Void = { _, _ in }) throws -> [Range<UInt64>] {
        var iterator = batches.makeIterator()
        guard var events = iterator.next() else { return [] }
        var appended: [Range<UInt64>] = []
        let pool = BatchBufferPool()
        var sealing = startSealing(events, after: nil, key: key, pool: pool)
        while true {
            let following = iterator.next()
            let sealed = try sealing?.result()
            var next: BackgroundWork<SealedBatch>?
            do {
                if let following { next = startSealing(following, after: sealed, key: key, pool: pool) }
                let sequences = try write { txn -> Range<UInt64> in
                    guard let sealed else { let last = try txn.lastSequence(); return last + 1..<last + 1 }
                    guard try txn.isBase(of: sealed, key: key) else {
                        let sequences = try txn.append(events, key: key)
                        return sequences[0]..<sequences[sequences.count - 1] + 1
                    }
                    try txn.put(sealed, key: key)
                    return sealed.firstSequence..<sealed.lastSequence + 1
                }
                appended.append(sequences)
                try committed(appended.count - 1, sequences)
            } catch {
                next?.wait()   // let the sealing finish before its inputs go
                throw error
            }
            guard let following else { return appended }
            events = following
            sealing = next
        }
    }

    /// Starts sealing `events` on another thread against the log as `previous` (a batch about
    /// to be put) leaves it, or as it is now; nil for an empty batch.
    private func startSealing(_ events: [NewEvent], after previous: SealedBatch?, key: SealingKey,
                              pool: BatchBufferPool) -> BackgroundWork<SealedBatch>? {
        events.isEmpty ? nil : SealedBatch.sealInBackground(events, predicted: previous?.successorBase, store: self, key: key, pool: pool)
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
        try read { try $0.eventCount() }
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
