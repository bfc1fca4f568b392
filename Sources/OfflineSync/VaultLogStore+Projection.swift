import EventLog
import Foundation
import Logging
import VaultCrypto
import VaultModel

extension VaultLogStore {
    // MARK: Projection

    /// The user's projection: the newest checkpoint plus the fold of the events after it
    /// (cached in memory while unlocked). Saves a new checkpoint when the tail was long.
    public func projection(userId: String) throws -> Projection {
        let keys = try keys(userId)
        var (projection, checkpointedAt) = try projections.withLock { $0[userId] } ?? {
            let loaded = try loadCheckpoint(userId: userId, keys: keys)
            return (loaded, loaded.lastSequence)
        }()
        try fold(into: &projection, userId: userId, upTo: .max, key: keys.sealing)
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
        var projection = try loadCheckpoint(userId: userId, keys: keys, atOrBefore: sequence)
        try fold(into: &projection, userId: userId, upTo: sequence, key: keys.sealing)
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
    func fold(into projection: inout Projection, userId: String, upTo sequence: UInt64, key: SealingKey) throws {
        while true {
            let read = try log.read { reader -> [Envelope]? in
                guard try reader.horizon(userId: userId) <= projection.lastSequence else { return nil }
                return try reader.envelopes(userId: userId, after: projection.lastSequence, limit: Self.foldBatch)
            }
            guard let read else {
                let horizon = try horizon(userId: userId)
                guard sequence >= horizon, let snapshot = try snapshotProjection(userId: userId, key: key) else {
                    throw OfflineSyncError.compacted(userId: userId, sequence: sequence, horizon: horizon)
                }
                projection = snapshot
                continue
            }
            let batch = read.filter { $0.header.sequence <= sequence }
            guard !batch.isEmpty else { return }
            // One event that cannot be opened or decoded quarantines its item only.
            apply(batch, to: &projection, key: key)
            guard batch.count == Self.foldBatch else { return }
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
    private func apply(_ batch: [Envelope], to projection: inout Projection, key: SealingKey) {
        for (envelope, result) in zip(batch, Self.decodeEach(batch, key: key)) {
            switch result {
            case .success(let event): projection.apply(event)
            case .failure(let error):
                logger.error("event cannot be read; its item is quarantined", metadata: [
                    "sequence": "\(envelope.header.sequence)", "cipher": "\(envelope.header.cipherId)", "error": "\(error)"])
                projection.quarantine(envelope.header, reason: "\(error)")
            }
        }
    }

    /// Opens and decodes envelopes, in parallel for large batches (order kept). An operation
    /// that a later operation on the same item in the batch supersedes has its snapshot left
    /// undecoded (``VaultEvent/operationSummary(header:plaintext:placeholder:)``): the fold
    /// keeps only the newest snapshot, and decoding the cipher is most of a fold's cost.
    static func decode(_ envelopes: [Envelope], key: SealingKey) throws -> [VaultEvent] {
        try decodeEach(envelopes, key: key).map { try $0.get() }
    }

    /// ``decode(_:key:)`` with one result per envelope, so one bad event does not hide the others.
    static func decodeEach(_ envelopes: [Envelope], key: SealingKey) -> [Result<VaultEvent, any Error>] {
        var latest: [String: Int] = [:]
        for (i, envelope) in envelopes.enumerated() where VaultEventType(rawValue: envelope.header.eventType)?.isOperation == true {
            latest[envelope.header.cipherId] = i
        }
        let lastOperation = latest
        let placeholder = Cipher(type: .login)
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
    func loadCheckpoint(userId: String, keys: UnlockedKeys, atOrBefore sequence: UInt64 = .max) throws -> Projection {
        let horizon = try log.read { try $0.horizon(userId: userId) }
        if horizon > 0, sequence < horizon {
            throw OfflineSyncError.compacted(userId: userId, sequence: sequence, horizon: horizon)
        }
        if let (checkpointSequence, payload) = try log.latestCheckpoint(userId: userId, atOrBefore: sequence, key: keys.sealing),
           checkpointSequence >= horizon {
            do {
                return try JSONDecoder().decode(Projection.self, from: Data(payload))
            } catch {
                logger.warning("ignoring unreadable checkpoint", metadata: ["user": "\(userId)", "error": "\(error)"])
            }
        }
        if horizon > 0, let snapshot = try snapshotProjection(userId: userId, key: keys.sealing) {
            return snapshot
        }
        return Projection(userId: userId)
    }

    /// Seals and stores `projection` as a checkpoint at its last sequence.
    package func saveCheckpoint(_ projection: Projection) throws {
        try saveCheckpoint(projection, keys: keys(projection.userId))
    }

    func saveCheckpoint(_ projection: Projection, keys: UnlockedKeys) throws {
        guard projection.lastSequence > 0 else { return }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try log.saveCheckpoint(userId: projection.userId, sequence: projection.lastSequence,
                               payload: Array(try encoder.encode(projection)), key: keys.sealing)
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
