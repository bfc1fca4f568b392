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
            if Self.materialize(deferred, into: &projection) { return }
            logger.warning("a pending item's latest snapshot does not decode; folding again eagerly", metadata: ["user": "\(userId)"])
            projection = start
        }
        // Eager: the checkpoint's snapshots first; one that does not decode means no checkpoint.
        if !Self.materialize(checkpointSnapshots, into: &start) { start = Projection(userId: userId) }
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
        guard Self.materialize(deferred, into: &lazy) else { return "a deferred snapshot of user \(userId) did not decode" }
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

    /// The JSON of the latest snapshot of items, by cipher id, with the sequence of its event.
    typealias DeferredSnapshots = [String: (sequence: UInt64, json: ArraySlice<UInt8>)]

    /// Decodes the deferred snapshots of items still pending whose latest version they are (in
    /// parallel); false if one does not decode.
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
        }
        return true
    }

    /// The fold's loop; with `deferred`, lazy (see the public form).
    ///
    /// While a full batch is opened and applied, the next one is read on another thread (its
    /// own short read transaction, as every batch has): reading and applying run on one core
    /// each, so the other core would otherwise wait. The prefetch assumes the batch folds up to
    /// its last event, which a fold always does; it is always awaited before the loop returns.
    private func foldLoop(into projection: inout Projection, userId: String, upTo sequence: UInt64, key: SealingKey,
                          deferred: inout DeferredSnapshots, lazy: Bool) throws {
        var prefetched: BatchRead?
        defer { prefetched?.wait() }
        while true {
            let read: [Envelope]?
            if let pending = prefetched, pending.after == projection.lastSequence {
                prefetched = nil
                read = try pending.result()
            } else {
                prefetched?.wait()
                prefetched = nil
                read = try readBatch(userId: userId, after: projection.lastSequence)
            }
            guard let read else {
                let horizon = try horizon(userId: userId)
                guard sequence >= horizon, let snapshot = try snapshotProjection(userId: userId, key: key) else {
                    throw OfflineSyncError.compacted(userId: userId, sequence: sequence, horizon: horizon)
                }
                projection = snapshot
                deferred.removeAll()
                continue
            }
            // In sequence order: only a batch that runs past `sequence` needs cutting.
            let batch = (read.last?.header.sequence ?? 0) <= sequence ? read : read.filter { $0.header.sequence <= sequence }
            guard !batch.isEmpty else { return }
            if batch.count == Self.foldBatch, let last = batch.last?.header.sequence, last < sequence {
                prefetched = BatchRead(after: last) { [self] in try readBatch(userId: userId, after: last) }
            }
            // One event that cannot be opened or decoded quarantines its item only.
            if lazy {
                applyLazily(batch, to: &projection, key: key, deferred: &deferred)
            } else {
                apply(batch, to: &projection, key: key)
            }
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

    /// ``apply(_:to:key:)`` without decoding any operation's cipher: each canonical operation
    /// body is read for its small fields, and the cipher's JSON of an event that became its
    /// item's latest version is kept in `deferred` for ``materialize(_:into:)``.
    private func applyLazily(_ batch: [Envelope], to projection: inout Projection, key: SealingKey,
                             deferred: inout DeferredSnapshots) {
        /// An opened event: a canonical operation's small fields and its plaintext, or a decoded
        /// event (boxed: the rare case keeps every result small to move).
        enum Opened {
            case fields(VaultEventType, VaultEvent.OperationFields, [UInt8])
            indirect case event(VaultEvent)
        }
        let opened = parallelMap(count: batch.count, threshold: 256) { i in
            Result { () -> Opened in
                let envelope = batch[i]
                guard let type = VaultEventType(rawValue: envelope.header.eventType), type.isOperation else {
                    return .event(try VaultEvent(envelope: envelope, key: key))
                }
                let plaintext = try envelope.open(key: key)
                if let fields = VaultEvent.operationFields(plaintext) { return .fields(type, fields, plaintext) }
                return .event(try VaultEvent(header: envelope.header, plaintext: plaintext))
            }
        }
        for (envelope, result) in zip(batch, opened) {
            let header = envelope.header
            switch result {
            case .success(.fields(let type, let fields, let plaintext)):
                // Applied (not skipped for a quarantine) and now the item's latest version.
                if projection.applyOperationFields(header, type: type, passwordChanged: fields.passwordChanged,
                                                   baseRevisionDate: fields.baseRevisionDate, at: fields.at) {
                    deferred[header.cipherId] = (header.sequence, plaintext[fields.cipher])
                }
            case .success(.event(let event)):
                // A quarantined item's later events are not applied: its latest version stays.
                let applied = !projection.isQuarantined(event.cipherId)
                projection.apply(event)
                if applied, event.type.isOperation { deferred[event.cipherId] = nil }
            case .failure(let error):
                logger.error("event cannot be read; its item is quarantined", metadata: [
                    "sequence": "\(header.sequence)", "cipher": "\(header.cipherId)", "error": "\(error)"])
                projection.quarantine(header, reason: "\(error)")
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

    /// A stream of the user's pending count (for a UI badge): the current count first, then
    /// a new value after every change to the log.
    public func pendingCountUpdates(userId: String) -> AsyncStream<Int> {
        let (stream, continuation) = AsyncStream<Int>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let token = UUID()
        observers.withLock { $0[token] = (userId, continuation) }
        continuation.onTermination = { [weak self] _ in _ = self?.observers.withLock { $0.removeValue(forKey: token) } }
        continuation.yield((try? pendingCount(userId: userId)) ?? 0)
        return stream
    }

    func notifyObservers(userId: String) {
        let targets = observers.withLock { $0.values.filter { $0.userId == userId }.map(\.continuation) }
        guard !targets.isEmpty, let count = try? pendingCount(userId: userId) else { return }
        for continuation in targets { continuation.yield(count) }
    }
}

/// A batch read started on another thread (the fold's prefetch), with the sequence it reads after.
private struct BatchRead {
    /// The sequence the batch was read after.
    let after: UInt64
    private let work: BackgroundWork<[Envelope]?>

    init(after: UInt64, _ read: @escaping @Sendable () throws -> [Envelope]?) {
        self.after = after
        work = BackgroundWork(read)
    }

    /// Waits for the read to finish (once; later calls return at once).
    func wait() { work.wait() }

    /// The batch, or the read's error.
    func result() throws -> [Envelope]? { try work.result() }
}
