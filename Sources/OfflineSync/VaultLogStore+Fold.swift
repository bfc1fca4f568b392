import EventLog
import Foundation
import Logging
import VaultCrypto
import VaultJSON
import VaultModel

extension VaultLogStore {
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
    /// included, is what the eager fold gives (``lazyFoldDisagreement(userId:)`` compares the two).
    ///
    /// `checkpointSnapshots`: the snapshots a format-2 checkpoint left undecoded in
    /// `projection` (``CheckpointPayload``); decoded at the end like the fold's own. If one does
    /// not decode, the eager fold starts from the log's beginning (or its compaction snapshot).
    ///
    /// Every event's link to the user's event before it is checked, and the fold's end against
    /// the user's head record (``ChainWalk``): a log with a gap throws
    /// `EventLogError.chainBroken(userId:sequence:reason:)` and nothing is folded.
    ///
    /// `resumingChecked`: `projection` is the one this process keeps, folded with the log's
    /// beginning checked, so only the links after it and the end are checked.
    func fold(into projection: inout Projection, userId: String, upTo sequence: UInt64, key: SealingKey,
              deferred checkpointSnapshots: DeferredSnapshots = [:], resumingChecked: Bool = false) throws {
        var start = projection
        var deferred = checkpointSnapshots
        var walk = try foldLoop(into: &projection, userId: userId, upTo: sequence, key: key, deferred: &deferred, lazy: true,
                                checkingBeginning: !resumingChecked)
        if !materialize(deferred, into: &projection, key: key) {
            logger.warning("a pending item's latest snapshot does not decode; folding again eagerly", metadata: ["user": "\(userId)"])
            // Eager: the checkpoint's snapshots first; one that does not decode means no checkpoint.
            if !materialize(checkpointSnapshots, into: &start, key: key) { start = Projection(userId: userId) }
            projection = start
            deferred.removeAll()
            walk = try foldLoop(into: &projection, userId: userId, upTo: sequence, key: key, deferred: &deferred, lazy: false)
        }
        let end = projection.lastSequence
        try log.read { reader in
            try walk.finish(reader, end: end, bound: sequence, key: key) { try checkNoLogMark(userId: userId, in: $0, key: key) }
        }
    }

    /// The oracle of the lazy fold: folds the user's whole log (from the snapshot when
    /// compacted) lazily and eagerly, and compares both with each other and with the projection
    /// this store keeps. Nil when they agree, else what differs. Does not touch the cache.
    package func lazyFoldDisagreement(userId: String) throws -> String? {
        let keys = try keys(userId)
        var lazy = Projection(userId: userId)
        var deferred = DeferredSnapshots()
        _ = try foldLoop(into: &lazy, userId: userId, upTo: .max, key: keys.sealing, deferred: &deferred, lazy: true)
        guard materialize(deferred, into: &lazy, key: keys.sealing) else { return "a deferred snapshot of user \(userId) did not decode" }
        var eager = Projection(userId: userId)
        _ = try foldLoop(into: &eager, userId: userId, upTo: .max, key: keys.sealing, deferred: &deferred, lazy: false)
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
    /// snapshots, dropped when the fold starts again from a compaction snapshot. Returns the
    /// chain walk where the fold ended, for its check against the head record.
    private func foldLoop(into projection: inout Projection, userId: String, upTo sequence: UInt64, key: SealingKey,
                          deferred: inout DeferredSnapshots, lazy: Bool, checkingBeginning: Bool = true) throws -> ChainWalk {
        let after = projection.lastSequence
        var walk = try log.read { try ChainWalk.start($0, userId: userId, after: after, checkingBeginning: checkingBeginning) }
        if lazy {
            // Each batch read and opened in one read transaction, where LMDB maps the events.
            try foldBatches(into: &projection, userId: userId, upTo: sequence, key: key, deferred: &deferred, walk: &walk,
                            read: { [self] after, previous in
                                // The previous batch's ids, for this batch's headers to reuse.
                                let knownIds = previous.map { batch in
                                    var ids = KnownIds(capacity: batch.count)
                                    for i in batch.indices { ids.insert(batch[i].header.cipherId) }
                                    return ids
                                }
                                return try readOpenedBatch(userId: userId, after: after, key: key, knownIds: knownIds)
                            },
                            apply: { [self] batch, projection, walk in try applyOpened(batch, to: &projection, walk: &walk) })
        } else {
            try foldBatches(into: &projection, userId: userId, upTo: sequence, key: key, deferred: &deferred, walk: &walk,
                            read: { [self] after, _ in try readBatch(userId: userId, after: after) },
                            apply: { [self] batch, projection, walk in try apply(batch, to: &projection, key: key, walk: &walk) })
        }
        return walk
    }

    /// Folds batches of ``foldBatch`` events in order; `read` gives the batch after a sequence
    /// (nil when a compaction removed some of it), given the batch before it when there is one,
    /// and `apply` folds one.
    ///
    /// While a full batch is applied, the next one is read (and, lazily, opened) on another
    /// thread, in its own short read transaction as every batch has: the apply is serial, so
    /// the other core would otherwise wait. The prefetch assumes the batch folds up to its last
    /// event, which a fold always does; it is always awaited before the loop returns.
    private func foldBatches<Event: FoldedEvent>(
        into projection: inout Projection, userId: String, upTo sequence: UInt64, key: SealingKey,
        deferred: inout DeferredSnapshots, walk: inout ChainWalk, read: @escaping @Sendable (UInt64, [Event]?) throws -> [Event]?,
        apply: ([Event], inout Projection, inout ChainWalk) throws -> Void
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
                batchRead = try read(projection.lastSequence, nil)
            }
            guard let batchRead else {
                let horizon = try horizon(userId: userId)
                guard sequence >= horizon, let snapshot = try snapshotProjection(userId: userId, key: key) else {
                    throw OfflineSyncError.compacted(userId: userId, sequence: sequence, horizon: horizon)
                }
                projection = snapshot
                deferred.removeAll()
                try log.read { try walk.restart($0, at: snapshot.lastSequence) }
                continue
            }
            // In sequence order: only a batch that runs past `sequence` needs cutting.
            let batch = (batchRead.last?.header.sequence ?? 0) <= sequence ? batchRead : batchRead.filter { $0.header.sequence <= sequence }
            guard !batch.isEmpty else { return }
            if batch.count == Self.foldBatch, let last = batch.last?.header.sequence, last < sequence {
                prefetched = BatchRead(after: last) { try read(last, batch) }
            }
            // One event that cannot be opened or decoded quarantines its item only; a broken
            // link stops the fold.
            try apply(batch, &projection, &walk)
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
    private func readOpenedBatch(userId: String, after: UInt64, key: SealingKey, knownIds: KnownIds?) throws -> [OpenedEvent]? {
        try log.read { reader -> [OpenedEvent]? in
            guard try reader.horizon(userId: userId) <= after else { return nil }
            // Each event lent in place (on all cores), one block context per chunk of the
            // batch for the ends of every operation in it; only the opened results leave.
            let batch = try reader.mapEventsInPlace(userId: userId, after: after, limit: Self.foldBatch, key: key,
                                                    parallelThreshold: 256, knownIds: knownIds) { event, decryptor in
                OpenedEvent(event, userId: userId, decryptor: &decryptor)
            }
            // By a flag: `for event in batch` copied every event, matching `opened` its payload.
            if let i = batch.firstIndex(where: \.isNotAnEvent), case .notAnEvent(let error) = batch[i].opened { throw error }
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
        // `projection` is the store's cached one (its beginning checked when it was folded).
        var walk = try ChainWalk.start(reader, userId: projection.userId, after: projection.lastSequence, checkingBeginning: false)
        while true {
            let batch = try reader.envelopes(userId: projection.userId, after: projection.lastSequence, limit: Self.foldBatch)
            if !batch.isEmpty { try apply(batch, to: &projection, key: key, walk: &walk) }
            guard batch.count == Self.foldBatch else { break }
        }
        try walk.finish(reader, end: projection.lastSequence, bound: .max, key: key) {
            try checkNoLogMark(userId: projection.userId, in: $0, key: key)
        }
    }

    /// Folds opened events into `projection`; one that cannot be opened or decoded quarantines its item.
    ///
    /// An operation that a later one of the batch supersedes is folded without its snapshot
    /// (``decodeEach(_:key:lastOperation:)``). It is still the item's latest version when that
    /// later one was not applied, which happens when an unreadable event between them
    /// quarantined the item: its snapshot is then decoded after the batch (it stays the
    /// placeholder only if it does not decode, and the item is quarantined already).
    private func apply(_ batch: [Envelope], to projection: inout Projection, key: SealingKey, walk: inout ChainWalk) throws {
        let lastOperation = Self.lastOperations(batch)
        var summarized: [String: Int] = [:]
        for (i, (envelope, result)) in zip(batch, Self.decodeEach(batch, key: key, lastOperation: lastOperation)).enumerated() {
            // Decoded, or authenticated and then not decodable: its stored MAC is the writer's.
            let authenticated = if case .failure(let error) = result { !(error is EnvelopeError) } else { true }
            try walk.step(envelope.header, mac: envelope.chainValue, authenticated: authenticated)
            switch result {
            case .success(let event):
                // A quarantined item's later events are not applied.
                let applied = !projection.isQuarantined(event.cipherId)
                projection.apply(event)
                if applied, event.type.isOperation {
                    summarized[event.cipherId] = lastOperation[event.cipherId].map { $0 > i } == true ? i : nil
                }
            case .failure(let error):
                quarantine(envelope.header, error, in: &projection)
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
    func applyOpened(_ batch: [OpenedEvent], to projection: inout Projection, walk: inout ChainWalk) throws {
        // Read in place: binding each event (`for event in batch`) copied it, header strings
        // and all, and released the copy again.
        try batch.withUnsafeBufferPointer { events in
            for i in events.indices {
                // No copy of the header: only the fields each call reads (a header passed from
                // the buffer to a call that also mutates `walk` or `projection` was copied,
                // strings retained, for each call; one copy per event was 3% of a fold).
                let sequence = events[i].header.sequence
                try walk.step(sequence: sequence, previous: events[i].header.chainMAC, mac: events[i].chainValue,
                              authenticated: events[i].authenticated)
                switch events[i].opened {
                case .fields(let type, let fields):
                    projection.applyOperationFields(sequence: sequence, cipherId: events[i].header.cipherId, type: type,
                                                    passwordChanged: fields.passwordChanged,
                                                    baseRevisionDate: fields.baseRevisionDate, at: fields.at)
                case .event(let event):
                    projection.apply(event)
                case .failed(let error), .notAnEvent(let error):
                    quarantine(events[i].header, error, in: &projection)
                }
            }
        }
    }

    /// The one way a fold sets an item aside: an event of it that cannot be opened or decoded
    /// is logged and quarantines its item (and only it).
    private func quarantine(_ header: EventHeader, _ error: any Error, in projection: inout Projection) {
        logger.error("event cannot be read; its item is quarantined", metadata: [
            "sequence": "\(header.sequence)", "cipher": "\(header.cipherId)", "error": "\(error)"])
        projection.quarantine(header, reason: "\(error)")
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
