import EventLog
import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultModel

extension VaultLogStore {
    // MARK: Projection

    /// The user's projection: the newest checkpoint plus the fold of the events after it
    /// (cached in memory while unlocked). Saves a new checkpoint when the tail was long.
    public func projection(userId: String) throws -> Projection {
        let keys = try keys(userId)
        var deferred = DeferredSnapshots()
        var (projection, checkpointedAt) = try projections.withLock { $0[userId] } ?? {
            let loaded: Projection
            (loaded, deferred) = try loadCheckpoint(userId: userId, keys: keys)
            return (loaded, loaded.lastSequence)
        }()
        try fold(into: &projection, userId: userId, upTo: .max, key: keys.sealing, deferred: deferred)
        // Checkpoint once enough events were folded since the last one, so a reopen folds
        // at most `checkpointInterval` events.
        if projection.lastSequence - checkpointedAt >= UInt64(checkpointInterval) {
            try saveCheckpoint(projection, keys: keys)
            checkpointedAt = projection.lastSequence
        }
        projections.withLock { $0[userId] = (projection, checkpointedAt) }
        return projection
    }

    /// The projection as of `sequence` (time travel): the newest checkpoint at or before it,
    /// plus the events up to it.
    public func projection(userId: String, at sequence: UInt64) throws -> Projection {
        let keys = try keys(userId)
        var (projection, deferred) = try loadCheckpoint(userId: userId, keys: keys, atOrBefore: sequence)
        try fold(into: &projection, userId: userId, upTo: sequence, key: keys.sealing, deferred: deferred)
        return projection
    }

    /// Events read per batch of a fold: bounds memory however long the log is.
    static let foldBatch = 4096

    /// Folds the user's events after `projection.lastSequence` up to `sequence` into it, in
    /// batches of ``foldBatch`` read in one short transaction each; each batch is opened and
    /// decoded on all cores, then applied in order.
    ///
    /// A compaction may have removed events `projection` has not folded yet (a projection kept in
    /// memory while the log was compacted): the fold then starts again from the snapshot.
    ///
    /// The fold is lazy about snapshots: no operation's cipher is decoded while events are
    /// applied (the fold reads only the small fields of each body); the latest snapshot of each
    /// item still pending is decoded once at the end. Should one of those not decode (a
    /// canonical-looking body with a broken cipher, which only a writer holding the key could
    /// make), the fold runs again eagerly from where it started, so the result, quarantines
    /// included, is what the eager fold gives (``eagerFolds`` makes every fold eager, for tests).
    ///
    /// `checkpointSnapshots`: the snapshots a format-2 checkpoint left undecoded in
    /// `projection` (``CheckpointPayload``); decoded at the end like the fold's own. If one does
    /// not decode, the eager fold starts from the log's beginning (or its compaction snapshot).
    func fold(into projection: inout Projection, userId: String, upTo sequence: UInt64, key: SealingKey,
              deferred checkpointSnapshots: DeferredSnapshots = [:]) throws {
        var start = projection
        var deferred = checkpointSnapshots
        if !Self.eagerFolds.load(ordering: .relaxed) {
            try foldLoop(into: &projection, userId: userId, upTo: sequence, key: key, deferred: &deferred, lazy: true)
            if materialize(deferred, into: &projection, key: key) { return }
            logger.warning("a pending item's latest snapshot does not decode; folding again eagerly", metadata: ["user": "\(userId)"])
            projection = start
        }
        // Eager: the checkpoint's snapshots first; one that does not decode means no checkpoint.
        if !materialize(checkpointSnapshots, into: &start, key: key) { start = Projection(userId: userId) }
        projection = start
        deferred.removeAll()
        try foldLoop(into: &projection, userId: userId, upTo: sequence, key: key, deferred: &deferred, lazy: false)
    }

    /// The oracle of the lazy fold: folds the user's whole log (from the snapshot when
    /// compacted) lazily and eagerly, and compares both with each other and with the projection
    /// this store keeps. Nil when they agree, else what differs. Does not touch the cache.
    package func lazyFoldDisagreement(userId: String) throws -> String? {
        let keys = try keys(userId)
        var lazy = Projection(userId: userId)
        var deferred = DeferredSnapshots()
        try foldLoop(into: &lazy, userId: userId, upTo: .max, key: keys.sealing, deferred: &deferred, lazy: true)
        guard materialize(deferred, into: &lazy, key: keys.sealing) else { return "a deferred snapshot of user \(userId) did not decode" }
        var eager = Projection(userId: userId)
        try foldLoop(into: &eager, userId: userId, upTo: .max, key: keys.sealing, deferred: &deferred, lazy: false)
        if lazy != eager {
            let items = Set(lazy.pending.keys).union(eager.pending.keys).filter { lazy.pending[$0] != eager.pending[$0] }
            return "lazy and eager folds of user \(userId) differ (items \(items.sorted().joined(separator: ", ")); id maps equal: \(lazy.idMap == eager.idMap))"
        }
        let kept = try projection(userId: userId)
        var keptUpToLast = kept
        keptUpToLast.lastSequence = eager.lastSequence
        if keptUpToLast.pending != eager.pending || kept.idMap != eager.idMap {
            return "the projection kept in memory for user \(userId) differs from a fold from scratch"
        }
        return nil
    }

    /// Makes every fold decode each batch's latest snapshots as it goes (the fold before lazy
    /// snapshots): tests compare the two.
    package static let eagerFolds = Atomic<Bool>(false)

    /// The latest snapshots a checkpoint left undecoded, by cipher id, with the sequence of the
    /// event each is from (``CheckpointPayload``).
    typealias DeferredSnapshots = [String: (sequence: UInt64, json: ArraySlice<UInt8>)]

    /// Decodes the latest snapshots a fold left undecoded (in parallel): those of `checkpoint`
    /// still an item's latest version, and those of changes whose latest operation the lazy
    /// fold read without its cipher (``PendingChange/latestIsInLog``). A lazy fold keeps no
    /// plaintext: it marks the change, and the events that are a pending item's latest version
    /// are read again here (one read transaction for all), and only those. False if a snapshot
    /// does not decode, or such an event is gone (compacted meanwhile) or is not that item's
    /// operation.
    func materialize(_ checkpoint: DeferredSnapshots, into projection: inout Projection, key: SealingKey) -> Bool {
        var marked: [(id: String, sequence: UInt64)] = []
        for (id, change) in projection.pending where change.latestIsInLog {
            guard let last = change.versionSequences.last else { return false }
            marked.append((id, last))
        }
        let inLog = marked
        guard !inLog.isEmpty else { return Self.materialize(checkpoint, into: &projection) }
        let userId = projection.userId
        guard let envelopes = try? log.read({ reader in try inLog.map { try reader.envelope(at: $0.sequence) } }) else { return false }
        let opened = parallelMap(count: inLog.count, threshold: 64) { i -> ArraySlice<UInt8>? in
            guard let envelope = envelopes[i], envelope.header.userId == userId, envelope.header.cipherId == inLog[i].id,
                  VaultEventType(rawValue: envelope.header.eventType)?.isOperation == true,
                  let plaintext = try? envelope.open(key: key), let fields = VaultEvent.operationFields(plaintext) else { return nil }
            return plaintext[fields.cipher]
        }
        var resolved = checkpoint
        for (entry, json) in zip(inLog, opened) {
            guard let json else { return false }
            resolved[entry.id] = (entry.sequence, json)
        }
        return Self.materialize(resolved, into: &projection)
    }

    /// ``materialize(_:into:key:)`` for snapshots whose JSON is at hand (a checkpoint's): false
    /// if one does not decode or a change's latest snapshot is still due from the log.
    static func materialize(_ deferred: DeferredSnapshots, into projection: inout Projection) -> Bool {
        // By dictionary index: `pending[id]?.latest = …` moved each change out and back in.
        var indices: [Dictionary<String, PendingChange>.Index] = []
        var jsons: [ArraySlice<UInt8>] = []
        for (id, entry) in deferred {
            if let i = projection.pending.index(forKey: id), projection.pending.values[i].versionSequences.last == entry.sequence {
                indices.append(i)
                jsons.append(entry.json)
            }
        }
        let due = jsons
        let decoded = parallelMap(count: due.count, threshold: 64) { i in
            try? JSONTapeDecoder().decode(Cipher.self, from: due[i])
        }
        guard !decoded.contains(where: { $0 == nil }) else { return false }
        for (i, cipher) in zip(indices, decoded) {
            projection.pending.values[i].latest = cipher!
            projection.pending.values[i].latestIsInLog = false
        }
        return !projection.pending.values.contains { $0.latestIsInLog }
    }

    /// The fold's loop, lazy or eager (see the public form); `deferred`: the checkpoint's
    /// snapshots, dropped when the fold starts again from a compaction snapshot.
    private func foldLoop(into projection: inout Projection, userId: String, upTo sequence: UInt64, key: SealingKey,
                          deferred: inout DeferredSnapshots, lazy: Bool) throws {
        if lazy {
            // Each batch read and opened in one read transaction, where LMDB maps the events.
            try foldBatches(into: &projection, userId: userId, upTo: sequence, key: key, deferred: &deferred,
                            read: { [self] after in try readOpenedBatch(userId: userId, after: after, key: key) },
                            apply: { [self] batch, projection in applyOpened(batch, to: &projection) })
        } else {
            try foldBatches(into: &projection, userId: userId, upTo: sequence, key: key, deferred: &deferred,
                            read: { [self] after in try readBatch(userId: userId, after: after) },
                            apply: { [self] batch, projection in apply(batch, to: &projection, key: key) })
        }
    }

    /// Folds batches of ``foldBatch`` events in order; `read` gives the batch after a sequence
    /// (nil when a compaction removed some of it), `apply` folds one.
    ///
    /// While a full batch is applied, the next one is read (and, lazily, opened) on another
    /// thread, in its own short read transaction as every batch has: the apply is serial, so
    /// the other core would otherwise wait. The prefetch assumes the batch folds up to its last
    /// event, which a fold always does; it is always awaited before the loop returns.
    private func foldBatches<Event: FoldedEvent>(
        into projection: inout Projection, userId: String, upTo sequence: UInt64, key: SealingKey,
        deferred: inout DeferredSnapshots, read: @escaping @Sendable (UInt64) throws -> [Event]?,
        apply: ([Event], inout Projection) -> Void
    ) throws {
        var prefetched: BatchRead<Event>?
        defer { prefetched?.wait() }
        while true {
            let batchRead: [Event]?
            if let pending = prefetched, pending.after == projection.lastSequence {
                prefetched = nil
                batchRead = try pending.result()
            } else {
                prefetched?.wait()
                prefetched = nil
                batchRead = try read(projection.lastSequence)
            }
            guard let batchRead else {
                let horizon = try horizon(userId: userId)
                guard sequence >= horizon, let snapshot = try snapshotProjection(userId: userId, key: key) else {
                    throw OfflineSyncError.compacted(userId: userId, sequence: sequence, horizon: horizon)
                }
                projection = snapshot
                deferred.removeAll()
                continue
            }
            // In sequence order: only a batch that runs past `sequence` needs cutting.
            let batch = (batchRead.last?.header.sequence ?? 0) <= sequence ? batchRead : batchRead.filter { $0.header.sequence <= sequence }
            guard !batch.isEmpty else { return }
            if batch.count == Self.foldBatch, let last = batch.last?.header.sequence, last < sequence {
                prefetched = BatchRead(after: last) { try read(last) }
            }
            // One event that cannot be opened or decoded quarantines its item only.
            apply(batch, &projection)
            guard batch.count == Self.foldBatch else { return }
        }
    }

    /// The user's next batch of envelopes after `after`, or nil when a compaction removed some
    /// of them (the horizon is past `after`).
    private func readBatch(userId: String, after: UInt64) throws -> [Envelope]? {
        try log.read { reader -> [Envelope]? in
            guard try reader.horizon(userId: userId) <= after else { return nil }
            return try reader.envelopes(userId: userId, after: after, limit: Self.foldBatch)
        }
    }

    /// The user's next batch of events after `after`, each opened (on all cores) where LMDB maps
    /// it, inside the batch's read transaction: no copy of an envelope and no plaintext outlives
    /// its opening, and the thread that allocates a plaintext frees it. Nil when a compaction
    /// removed some of the batch. Throws what reading the envelopes throws (an event that is not
    /// the one its index entry names); an event that does not authenticate or decode is returned
    /// as ``OpenedEvent/Opened/failed(_:)``.
    private func readOpenedBatch(userId: String, after: UInt64, key: SealingKey) throws -> [OpenedEvent]? {
        try log.read { reader -> [OpenedEvent]? in
            guard try reader.horizon(userId: userId) <= after else { return nil }
            let mapped = try reader.mappedEvents(userId: userId, after: after, limit: Self.foldBatch)
            // One block context per chunk of the batch, for the ends of every operation in it.
            let batch = parallelMap(count: mapped.count, threshold: 256, state: { KeyedAESCBC.BlockDecryptor?.none }) { i, decryptor in
                // The next event loads while this one's MAC is computed.
                if i + 1 < mapped.count { mapped[i + 1].prefetch() }
                return OpenedEvent(mapped[i], userId: userId, key: key, decryptor: &decryptor)
            }
            for event in batch {
                if case .notAnEvent(let error) = event.opened { throw error }
            }
            return batch
        }
    }

    /// Folds the user's events after `projection.lastSequence` as `reader` sees them (inside a
    /// write transaction: the state a decision in that transaction acts on).
    func foldTail(into projection: inout Projection, reader: LogReader, key: SealingKey) throws {
        // Compacted past what `projection` folded: start from the snapshot this transaction sees.
        if try reader.horizon(userId: projection.userId) > projection.lastSequence {
            guard let (_, payload) = try reader.snapshot(userId: projection.userId, key: key) else { return }
            projection = try Self.decodeSnapshot(payload, userId: projection.userId).projection
        }
        while true {
            let batch = try reader.envelopes(userId: projection.userId, after: projection.lastSequence, limit: Self.foldBatch)
            guard !batch.isEmpty else { return }
            apply(batch, to: &projection, key: key)
            guard batch.count == Self.foldBatch else { return }
        }
    }

    /// Folds opened events into `projection`; one that cannot be opened or decoded quarantines its item.
    ///
    /// An operation that a later one of the batch supersedes is folded without its snapshot
    /// (``decodeEach(_:key:lastOperation:)``). It is still the item's latest version when that
    /// later one was not applied, which happens when an unreadable event between them
    /// quarantined the item: its snapshot is then decoded after the batch (it stays the
    /// placeholder only if it does not decode, and the item is quarantined already).
    private func apply(_ batch: [Envelope], to projection: inout Projection, key: SealingKey) {
        let lastOperation = Self.lastOperations(batch)
        var summarized: [String: Int] = [:]
        for (i, (envelope, result)) in zip(batch, Self.decodeEach(batch, key: key, lastOperation: lastOperation)).enumerated() {
            switch result {
            case .success(let event):
                // A quarantined item's later events are not applied.
                let applied = !projection.isQuarantined(event.cipherId)
                projection.apply(event)
                if applied, event.type.isOperation {
                    summarized[event.cipherId] = lastOperation[event.cipherId].map { $0 > i } == true ? i : nil
                }
            case .failure(let error):
                logger.error("event cannot be read; its item is quarantined", metadata: [
                    "sequence": "\(envelope.header.sequence)", "cipher": "\(envelope.header.cipherId)", "error": "\(error)"])
                projection.quarantine(envelope.header, reason: "\(error)")
            }
        }
        for (id, i) in summarized {
            guard let index = projection.pending.index(forKey: id),
                  projection.pending.values[index].versionSequences.last == batch[i].header.sequence,
                  case .operation(let operation)? = (try? VaultEvent(envelope: batch[i], key: key))?.body else { continue }
            projection.pending.values[index].latest = operation.cipher
        }
    }

    /// The index of each item's last operation in `batch` (an operation before it on the same
    /// item is superseded within the batch).
    static func lastOperations(_ batch: [Envelope]) -> [String: Int] {
        var last: [String: Int] = [:]
        for (i, envelope) in batch.enumerated() where VaultEventType(rawValue: envelope.header.eventType)?.isOperation == true {
            last[envelope.header.cipherId] = i
        }
        return last
    }

    /// ``apply(_:to:key:)`` for events opened by ``readOpenedBatch(userId:after:key:)``, without
    /// decoding any operation's cipher: each canonical operation body was read for its small
    /// fields, and a change whose latest version such an event became is marked
    /// (``PendingChange/latestIsInLog``) for ``materialize(_:into:key:)`` (no plaintext is kept:
    /// the few events still latest at the end are read again).
    func applyOpened(_ batch: [OpenedEvent], to projection: inout Projection) {
        // Read in place: binding each event (`for event in batch`) copied it, header strings
        // and all, and released the copy again.
        batch.withUnsafeBufferPointer { events in
            for i in events.indices {
                switch events[i].opened {
                case .fields(let type, let fields):
                    projection.applyOperationFields(events[i].header, type: type, passwordChanged: fields.passwordChanged,
                                                    baseRevisionDate: fields.baseRevisionDate, at: fields.at)
                case .event(let event):
                    projection.apply(event)
                case .failed(let error), .notAnEvent(let error):
                    let header = events[i].header
                    logger.error("event cannot be read; its item is quarantined", metadata: [
                        "sequence": "\(header.sequence)", "cipher": "\(header.cipherId)", "error": "\(error)"])
                    projection.quarantine(header, reason: "\(error)")
                }
            }
        }
    }

    /// Opens and decodes envelopes for the eager fold, in parallel for large batches (order
    /// kept), one result per envelope so one bad event does not hide the others. An operation
    /// that a later operation on the same item in the batch supersedes has its snapshot left
    /// undecoded (``VaultEvent/operationSummary(header:plaintext:placeholder:)``): the fold
    /// keeps only the newest snapshot. `lastOperation`: ``lastOperations(_:)`` of `envelopes`.
    static func decodeEach(_ envelopes: [Envelope], key: SealingKey, lastOperation: [String: Int]) -> [Result<VaultEvent, any Error>] {
        let placeholder = Projection.undecodedSnapshot
        @Sendable func decodeOne(_ i: Int) throws -> VaultEvent {
            let envelope = envelopes[i]
            if lastOperation[envelope.header.cipherId].map({ $0 > i }) == true {
                let plaintext = try envelope.open(key: key)
                if let event = VaultEvent.operationSummary(header: envelope.header, plaintext: plaintext, placeholder: placeholder) {
                    return event
                }
                return try VaultEvent(header: envelope.header, plaintext: plaintext)
            }
            return try VaultEvent(envelope: envelope, key: key)
        }
        return parallelMap(count: envelopes.count, threshold: 256) { i in Result { try decodeOne(i) } }
    }

    /// The projection to fold on from for a state at `sequence`: the newest checkpoint at or
    /// before it, or the compaction snapshot when no checkpoint after the horizon is that old.
    /// A sequence before the horizon is an error (``OfflineSyncError/compacted(userId:sequence:horizon:)``):
    /// the events that led there are gone.
    func loadCheckpoint(userId: String, keys: UnlockedKeys, atOrBefore sequence: UInt64 = .max) throws -> (Projection, DeferredSnapshots) {
        let horizon = try log.read { try $0.horizon(userId: userId) }
        if horizon > 0, sequence < horizon {
            throw OfflineSyncError.compacted(userId: userId, sequence: sequence, horizon: horizon)
        }
        if let (checkpointSequence, payload) = try log.latestCheckpoint(userId: userId, atOrBefore: sequence, key: keys.sealing),
           checkpointSequence >= horizon {
            do {
                return try CheckpointPayload.decode(payload)
            } catch {
                logger.warning("ignoring unreadable checkpoint", metadata: ["user": "\(userId)", "error": "\(error)"])
            }
        }
        if horizon > 0, let snapshot = try snapshotProjection(userId: userId, key: keys.sealing) {
            return (snapshot, [:])
        }
        return (Projection(userId: userId), [:])
    }

    /// Seals and stores `projection` as a checkpoint at its last sequence.
    package func saveCheckpoint(_ projection: Projection) throws {
        try saveCheckpoint(projection, keys: keys(projection.userId))
    }

    func saveCheckpoint(_ projection: Projection, keys: UnlockedKeys) throws {
        guard projection.lastSequence > 0 else { return }
        try log.saveCheckpoint(userId: projection.userId, sequence: projection.lastSequence,
                               payload: try CheckpointPayload.encode(projection), key: keys.sealing)
    }

    /// The pending state a decision may act on (which items keep their local copy in a sync,
    /// whether an edit goes to the server or into the log).
    ///
    /// Unlocked: from the authenticated projection (every event's MAC checked, sealed
    /// checkpoints), never from the unsealed pending checkpoint, which anyone who can write the
    /// file can rewrite. An item with an event that cannot be read counts as pending (an update
    /// when its change type is unknown), so nothing treats it as settled. Locked (no key, so
    /// nothing can be authenticated): the fold of every header from the first (in a compacted
    /// log, from the snapshot's pending set at the horizon), skipping the checkpoint; headers
    /// are covered by the MACs `verify` checks.
    public func pendingState(userId: String) throws -> HeaderProjection {
        if isUnlocked(userId: userId) {
            return Self.pendingState(of: try projection(userId: userId))
        }
        return try log.read { try headerProjection($0, userId: userId, fromCheckpoint: false).projection }
    }

    /// The pending ids and change types of an authenticated projection.
    static func pendingState(of projection: Projection) -> HeaderProjection {
        var state = HeaderProjection()
        state.lastSequence = projection.lastSequence
        for (id, change) in projection.pending {
            state.pending[id] = change.changeType
            if change.uncertainCreate { state.uncertainCreates.insert(id) }
        }
        for id in (projection.quarantined ?? [:]).keys where state.pending[id] == nil {
            state.pending[id] = .update
        }
        return state
    }

    /// Pending items and their change types from headers alone, for the pending count a locked
    /// vault shows (a badge). Starts from the user's pending checkpoint and folds the headers
    /// after it; when that tail was long, saves a new checkpoint (unless the store is
    /// read-only). The checkpoint is unsealed, so this is a hint: decisions use
    /// ``pendingState(userId:)``, and `vaultlog verify` compares the checkpoint with the log.
    public func pendingFromHeaders(userId: String) throws -> HeaderProjection {
        let (projection, folded) = try log.read { try headerProjection($0, userId: userId) }
        if pendingCheckpointInterval > 0, folded >= pendingCheckpointInterval, let db = pendingCheckpoints,
           !log.isReadOnly {
            do {
                try log.write { txn in
                    // Only if no newer checkpoint was saved meanwhile.
                    let stored = PendingCheckpoint.decode(try txn.get(db, key: Self.userPrefix(userId)))
                    guard (stored?.lastSequence ?? 0) < projection.lastSequence else { return }
                    try txn.put(db, key: Self.userPrefix(userId), value: PendingCheckpoint.encode(projection))
                }
            } catch {
                logger.warning("could not save the pending checkpoint", metadata: ["user": "\(userId)", "error": "\(error)"])
            }
        }
        return projection
    }

    /// The user's pending set from the checkpoint (unless `fromCheckpoint` is false) plus the
    /// headers after it, and how many headers were folded. In a compacted log the fold starts
    /// from the snapshot's pending set at the horizon (kept in the clear for this).
    func headerProjection(_ reader: LogReader, userId: String, fromCheckpoint: Bool = true) throws -> (projection: HeaderProjection, folded: Int) {
        var projection = try snapshotHeaderState(reader, userId: userId) ?? HeaderProjection()
        if fromCheckpoint, let db = pendingCheckpoints, let bytes = try reader.get(db, key: Self.userPrefix(userId)) {
            if let stored = PendingCheckpoint.decode(bytes), try Self.isEventOf(userId, stored.lastSequence, reader) {
                if stored.lastSequence > projection.lastSequence { projection = stored }
            } else {
                logger.warning("ignoring an unreadable pending checkpoint", metadata: ["user": "\(userId)"])
            }
        }
        var folded = 0
        try reader.forEachHeader(userId: userId, after: projection.lastSequence) { header in
            projection.apply(header)
            folded += 1
            return true
        }
        return (projection, folded)
    }

    /// The pending set from headers alone right after `sequence` (time travel while locked). In
    /// a compacted log it starts from the snapshot's pending set at the horizon; a sequence
    /// before the horizon is ``OfflineSyncError/compacted(userId:sequence:horizon:)``.
    public func pendingFromHeaders(userId: String, at sequence: UInt64) throws -> HeaderProjection {
        try log.read { reader in
            var projection = try snapshotHeaderState(reader, userId: userId) ?? HeaderProjection()
            if projection.lastSequence > 0, sequence < projection.lastSequence {
                throw OfflineSyncError.compacted(userId: userId, sequence: sequence, horizon: projection.lastSequence)
            }
            try reader.forEachHeader(userId: userId, after: projection.lastSequence) { header in
                guard header.sequence <= sequence else { return false }
                projection.apply(header)
                return true
            }
            return projection
        }
    }

    /// Whether `sequence` is one of the user's events (a pending checkpoint must end at one).
    static func isEventOf(_ userId: String, _ sequence: UInt64, _ reader: LogReader) throws -> Bool {
        try sequence == 0 || reader.hasEvent(userId: userId, at: sequence)
    }

    /// Pending count from headers (works while locked; a hint, see ``pendingFromHeaders(userId:)``).
    public func pendingCount(userId: String) throws -> Int { try pendingFromHeaders(userId: userId).count }
}

/// A batch read started on another thread (the fold's prefetch), with the sequence it reads after.
private struct BatchRead<Event: Sendable> {
    /// The sequence the batch was read after.
    let after: UInt64
    private let work: BackgroundWork<[Event]?>

    init(after: UInt64, _ read: @escaping @Sendable () throws -> [Event]?) {
        self.after = after
        work = BackgroundWork(read)
    }

    /// Waits for the read to finish (once; later calls return at once).
    func wait() { work.wait() }

    /// The batch, or the read's error.
    func result() throws -> [Event]? { try work.result() }
}

/// What a fold's batch holds: events in sequence order, each with its header.
protocol FoldedEvent: Sendable {
    var header: EventHeader { get }
}

extension Envelope: FoldedEvent {}

/// An event of the lazy fold, opened where LMDB maps it: its header and what its body gave.
struct OpenedEvent: FoldedEvent {
    enum Opened {
        /// A canonical operation's small fields (its cipher left in the log).
        case fields(VaultEventType, VaultEvent.OperationFields)
        /// Any other event, decoded (boxed: the rare case keeps every result small to move).
        indirect case event(VaultEvent)
        /// Why the event cannot be read: its item is quarantined.
        case failed(any Error)
        /// Why the stored bytes are not the event their index entry names (what reading them
        /// as an envelope throws): the fold stops with this error.
        case notAnEvent(any Error)
    }

    let header: EventHeader
    let opened: Opened

    /// Opens `mapped` as an event of `userId`. Not throwing (a batch is opened on all cores
    /// into one array): what reading it as an envelope would throw is ``Opened/notAnEvent(_:)``,
    /// with a header that names only its sequence.
    ///
    /// An operation's small fields sit at the two ends of its canonical body (the date and base
    /// revision before the cipher's JSON, the password flag after it), so only those ends are
    /// decrypted (``headBlocks`` and ``tailBlocks`` AES blocks) once the MAC over the whole
    /// event has matched; a body of any other shape, or too short, is decrypted whole and read
    /// as before.
    ///
    /// `decryptor`: the block context for the ends, kept for the next event of this thread.
    init(_ mapped: MappedEvent, userId: String, key: SealingKey, decryptor: inout KeyedAESCBC.BlockDecryptor?) {
        let body: Result<AuthenticatedBody, EnvelopeError>
        do {
            (header, body) = try mapped.authenticate(userId: userId, key: key)
        } catch {
            header = EventHeader(sequence: mapped.sequence, userId: userId, cipherId: "", eventType: 0, recordedAtMillis: 0)
            opened = .notAnEvent(error)
            return
        }
        do {
            let body = try body.get()
            let type = VaultEventType(rawValue: header.eventType)
            if let type, type.isOperation, let fields = try Self.fieldsFromTheEnds(body, decryptor: &decryptor) {
                opened = .fields(type, fields)
                return
            }
            let plaintext = try body.plaintext().get()
            if let type, type.isOperation, let fields = VaultEvent.operationFields(plaintext) {
                opened = .fields(type, fields)
            } else {
                opened = .event(try VaultEvent(header: header, plaintext: plaintext))
            }
        } catch {
            opened = .failed(error)
        }
    }

    /// The small fields of a canonical operation body, from its ends only; nil when the body
    /// is too short or not of that shape (read it whole).
    private static func fieldsFromTheEnds(_ body: AuthenticatedBody, decryptor: inout KeyedAESCBC.BlockDecryptor?) throws -> VaultEvent.OperationFields? {
        try withUnsafeTemporaryAllocation(byteCount: headBlocks * 16, alignment: 16) { head in
            try withUnsafeTemporaryAllocation(byteCount: tailBlocks * 16, alignment: 16) { tail in
                guard let (tailCount, count) = try body.decryptEnds(headBlocks: headBlocks, tailBlocks: tailBlocks, head: head, tail: tail,
                                                                          decryptor: &decryptor)?.get() else {
                    return nil
                }
                return VaultEvent.operationFields(head: UnsafeRawBufferPointer(head),
                                                  tail: UnsafeRawBufferPointer(rebasing: tail[..<tailCount]), count: count)
            }
        }
    }

    /// AES blocks decrypted at the start of an operation's body: its date and base revision and
    /// the cipher's opening (97 bytes with two canonical dates, 107 with two dates of 33
    /// characters; a longer head is read from the whole body).
    static let headBlocks = 8
    /// AES blocks decrypted at its end: the password flag, the version and up to 16 bytes of padding.
    static let tailBlocks = 3
}
