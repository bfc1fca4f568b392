import EventLog
import Foundation
import Logging
import VaultCrypto
import VaultModel

extension VaultLogStore {
    // MARK: Compaction

    /// The user's compaction horizon (0 when the log was never compacted): the projection at it
    /// is in the snapshot, states before it are gone. Needs no key.
    public func horizon(userId: String) throws -> UInt64 {
        try log.read { try $0.horizon(userId: userId) }
    }

    /// The user's snapshot as stored (horizon, chain value, events removed so far), without a
    /// key; nil when the log was never compacted.
    public func snapshotInfo(userId: String) throws -> SnapshotInfo? {
        try log.read { try $0.snapshotInfo(userId: userId) }
    }

    /// What `compact(userId:policy:now:eventsPerTransaction:)` would remove, without changing anything.
    public func compactionPlan(userId: String, policy: RetentionPolicy = .default, now: Date? = nil) throws -> CompactionPlan {
        try prepareCompaction(userId: userId, policy: policy, now: now ?? dependencies.now(), maxEvents: .max).plan
    }

    /// Events one compaction step removes at most: the write transaction of a step that large
    /// took about 150 ms on the benchmark machine, so a save never waits longer than that.
    public static let compactionEventsPerTransaction = 20_000

    /// Compacts the user's log under `policy`: the events older than `policy.keepDays` are
    /// replaced by a sealed snapshot (the projection after the last of them, every event of the
    /// changes still pending there, and the last `policy.keepVersions` versions of every item).
    /// Reading and sealing happen outside any transaction. The removal goes in steps of at most
    /// `eventsPerTransaction` events, each a complete compaction in one write transaction, so a
    /// save waits at most for one step, and a crash between steps leaves a valid store
    /// compacted part of the way. The file keeps its size (LMDB reuses the freed pages);
    /// ``compactAndClose(userIds:policy:now:)`` also rewrites the file.
    ///
    /// Safe beside other callers in this process and in other processes that have the store
    /// open (an app and its extension): each step's write is one transaction like any save,
    /// and a step whose plan another compaction overtook is refused without writing.
    ///
    /// The writes commit on the store's writer thread; ``compactBlocking(userId:policy:now:eventsPerTransaction:)``
    /// is the same on the caller's thread (tools, synchronous code).
    @discardableResult
    public func compact(userId: String, policy: RetentionPolicy = .default, now: Date? = nil,
                        eventsPerTransaction: Int = compactionEventsPerTransaction) async throws -> CompactionResult {
        let now = now ?? dependencies.now()
        var result: CompactionResult?
        while true {
            let (prepared, prepareSeconds) = try timedPreparation(userId: userId, policy: policy, now: now, maxEvents: eventsPerTransaction)
            guard prepared.plan.horizon != nil else { return result ?? CompactionResult(prepared, prepareSeconds: prepareSeconds) }
            let key = try keys(userId).sealing
            let started = ContinuousClock.now
            let counts = try await log.writeAsync { try self.writeCompaction(prepared, txn: $0, key: key) }
            let step = finished(CompactionResult(prepared, prepareSeconds: prepareSeconds, counts: counts, writeSeconds: (ContinuousClock.now - started).seconds))
            result = result.map { $0.then(step) } ?? step
            guard prepared.reachedLimit else { return result! }
        }
    }

    /// ``compact(userId:policy:now:eventsPerTransaction:)`` committing on the caller's thread,
    /// which it blocks (a command-line tool, synchronous code). Named apart so that async code,
    /// top-level code included, never picks it by accident.
    @discardableResult
    public func compactBlocking(userId: String, policy: RetentionPolicy = .default, now: Date? = nil,
                        eventsPerTransaction: Int = compactionEventsPerTransaction) throws -> CompactionResult {
        let now = now ?? dependencies.now()
        var result: CompactionResult?
        while true {
            let (prepared, prepareSeconds) = try timedPreparation(userId: userId, policy: policy, now: now, maxEvents: eventsPerTransaction)
            guard prepared.plan.horizon != nil else { return result ?? CompactionResult(prepared, prepareSeconds: prepareSeconds) }
            let key = try keys(userId).sealing
            let started = ContinuousClock.now
            let counts = try log.write { try self.writeCompaction(prepared, txn: $0, key: key) }
            let step = finished(CompactionResult(prepared, prepareSeconds: prepareSeconds, counts: counts, writeSeconds: (ContinuousClock.now - started).seconds))
            result = result.map { $0.then(step) } ?? step
            guard prepared.reachedLimit else { return result! }
        }
    }

    /// The events of `cipherId` the user's snapshot keeps, oldest first: its last versions before
    /// the horizon and, for an item pending there, every event of its pending change. Empty
    /// when there are none. Needs the vault unlocked.
    public func keptVersions(userId: String, cipherId: String) throws -> [VaultEvent] {
        let keys = try keys(userId)
        var events: [UInt64: VaultEvent] = [:]
        if let payload = try log.read({ try $0.snapshotItem(userId: userId, cipherId: cipherId, key: keys.sealing) }) {
            for version in try Self.decodeKept(payload, userId: userId, cipherId: cipherId).versions {
                let header = EventHeader(sequence: version.sequence, userId: userId, cipherId: cipherId,
                                         eventType: version.type, recordedAtMillis: version.recordedAtMillis)
                events[version.sequence] = try VaultEvent(header: header, plaintext: Array(version.body))
            }
        }
        // An item pending at the horizon: every event of its change, as stored.
        for bytes in try snapshotBody(userId: userId, key: keys.sealing)?.carried ?? [] {
            let envelope = try Envelope(bytes: Array(bytes))
            if envelope.header.cipherId == cipherId { events[envelope.header.sequence] = try VaultEvent(envelope: envelope, key: keys.sealing) }
        }
        return events.keys.sorted().map { events[$0]! }
    }

    /// The ids of the items with versions kept in the user's snapshot. Needs no key.
    public func itemsWithKeptVersions(userId: String) throws -> [String] {
        try log.read { try $0.snapshotItemIds(userId: userId) }
    }

    // MARK: Internals

    struct PreparedCompaction: Sendable {
        var plan: CompactionPlan
        var payload: [UInt8]
        var state: [UInt8]
        var items: [String: [UInt8]]
        /// The fold stopped at the step's event limit (more may be removable).
        var reachedLimit = false
    }

    /// The snapshot's body (authenticated), or nil when never compacted.
    func snapshotBody(userId: String, key: SealingKey) throws -> SnapshotBody? {
        guard let (_, payload) = try log.read({ try $0.snapshot(userId: userId, key: key) }) else { return nil }
        return try Self.decodeSnapshot(payload, userId: userId)
    }

    static func decodeSnapshot(_ payload: [UInt8], userId: String) throws -> SnapshotBody {
        do {
            return try JSONDecoder().decode(SnapshotBody.self, from: Data(payload))
        } catch {
            throw EventLogError.snapshot("the compaction snapshot of user \(userId) does not decode (\(error)); restore the store from a backup or an export")
        }
    }

    /// The snapshot's projection at the horizon (authenticated), or nil when never compacted.
    func snapshotProjection(userId: String, key: SealingKey) throws -> Projection? {
        try snapshotBody(userId: userId, key: key)?.projection
    }

    /// The pending set from headers at the horizon, as the snapshot keeps it in the clear (for a
    /// locked vault); nil when never compacted. A state that does not parse counts as nothing
    /// pending, like an unreadable pending checkpoint: it is a hint, and `verify` reports it.
    func snapshotHeaderState(_ reader: LogReader, userId: String) throws -> HeaderProjection? {
        guard let info = try reader.snapshotInfo(userId: userId) else { return nil }
        var state = PendingCheckpoint.decode(info.state) ?? HeaderProjection()
        state.lastSequence = info.horizon
        return state
    }

    /// An event the snapshot carries (of an item pending at the horizon), opened; nil if none.
    func carriedEvent(at sequence: UInt64, userId: String, key: SealingKey) throws -> VaultEvent? {
        guard let body = try snapshotBody(userId: userId, key: key) else { return nil }
        for bytes in body.carried {
            let envelope = try Envelope(bytes: Array(bytes))
            if envelope.header.sequence == sequence, envelope.header.userId == userId { return try VaultEvent(envelope: envelope, key: key) }
        }
        return nil
    }

    static func decodeKept(_ payload: [UInt8], userId: String, cipherId: String) throws -> KeptVersions {
        do {
            return try JSONDecoder().decode(KeptVersions.self, from: Data(payload))
        } catch {
            throw EventLogError.snapshot("the kept versions of item \(cipherId) (user \(userId)) do not decode (\(error))")
        }
    }

    /// Folds the user's log from the current snapshot up to the cutoff (or the first event that
    /// cannot be read): the last event folded is the new horizon. Collects the versions kept for
    /// each item and, for every item still pending there, the envelopes of its pending change,
    /// which the snapshot carries (the resolver reads intermediate versions by sequence).
    func prepareCompaction(userId: String, policy: RetentionPolicy, now: Date, maxEvents: Int) throws -> PreparedCompaction {
        let keys = try keys(userId)
        let cutoff = now.addingTimeInterval(-Double(policy.keepDays) * 86_400)
        let cutoffMillis = Int64((cutoff.timeIntervalSince1970 * 1000).rounded(.down))
        // The snapshot, its horizon and its pending set from one read transaction, so they
        // cannot come from two different compactions.
        let (stored, storedState) = try log.read { reader in
            (try reader.snapshot(userId: userId, key: keys.sealing), try snapshotHeaderState(reader, userId: userId))
        }
        let snapshot = try stored.map { try Self.decodeSnapshot($0.payload, userId: userId) }
        let currentHorizon = stored?.info.horizon ?? 0
        var projection = snapshot?.projection ?? Projection(userId: userId)
        var headers = storedState ?? HeaderProjection()
        // The envelopes of each pending item's change so far (carried from the last snapshot).
        var runs: [String: [Data]] = [:]
        for bytes in snapshot?.carried ?? [] {
            guard let envelope = try? Envelope(bytes: Array(bytes)) else { continue }
            runs[envelope.header.cipherId, default: []].append(bytes)
        }
        var kept: [String: [KeptVersion]] = [:]
        for id in try itemsWithKeptVersions(userId: userId) {
            if let payload = try log.read({ try $0.snapshotItem(userId: userId, cipherId: id, key: keys.sealing) }) {
                kept[id] = try Self.decodeKept(payload, userId: userId, cipherId: id).versions
            }
        }
        var added: [String: [KeptVersion]] = [:]
        var folded = 0, total = 0
        var stop: String?
        var reachedLimit = false
        var after = currentHorizon
        let limit = max(1, policy.keepVersions)
        while true {
            let batch = try log.read { try $0.envelopes(userId: userId, after: after, limit: Self.foldBatch) }
            guard let last = batch.last else { break }
            after = last.header.sequence
            total += batch.count
            for envelope in batch where stop == nil {
                guard folded < maxEvents else {
                    stop = "one step removes at most \(maxEvents) events; the next step goes on"
                    reachedLimit = true
                    break
                }
                let header = envelope.header
                guard header.recordedAtMillis <= cutoffMillis else {
                    stop = "events after \(Self.iso(cutoff)) are younger than \(policy.keepDays) days"
                    break
                }
                let plaintext: [UInt8]
                let event: VaultEvent
                do {
                    plaintext = try envelope.open(key: keys.sealing)
                    event = try VaultEvent.operationSummary(header: header, plaintext: plaintext, placeholder: Projection.undecodedSnapshot)
                        ?? VaultEvent(header: header, plaintext: plaintext)
                } catch {
                    // The event stays for `verify`, and so does everything after it.
                    stop = "event \(header.sequence) of item \(header.cipherId) cannot be read (\(error)); it and the events after it stay (an integrity check, VaultLogStore.verify, gives a full report)"
                    break
                }
                projection.apply(event)
                headers.apply(header)
                folded += 1
                let id = header.cipherId
                guard !id.isEmpty else { continue }
                if projection.pending[id] != nil { runs[id, default: []].append(Data(envelope.bytes)) } else { runs[id] = nil }
                if event.type.isOperation {
                    added[id, default: []].append(
                        KeptVersion(sequence: header.sequence, type: header.eventType, recordedAtMillis: header.recordedAtMillis, body: Data(plaintext)))
                    if added[id]!.count > limit { added[id]!.removeFirst() }
                }
            }
        }
        Self.merge(added, into: &kept, keep: policy.keepVersions)
        // The policy applies to the whole snapshot, also to versions an earlier policy kept.
        kept = kept.compactMapValues { versions in versions.isEmpty || policy.keepVersions == 0 ? nil : Array(versions.suffix(policy.keepVersions)) }
        let limitedBy = stop ?? "every event of the user is old enough"
        let keptCount = kept.values.reduce(0) { $0 + $1.count }
        guard folded > 0 else {
            return PreparedCompaction(plan: CompactionPlan(userId: userId, policy: policy, cutoff: cutoff, currentHorizon: currentHorizon,
                                                           horizon: nil, removableEvents: 0, retainedEvents: total,
                                                           itemsWithVersions: kept.count, keptVersions: keptCount, limitedBy: limitedBy,
                                                           carriedEvents: snapshot?.carried.count ?? 0),
                                      payload: [], state: [], items: [:])
        }
        // The fold read superseded snapshots as summaries (placeholders): a pending item's latest
        // snapshot is what the resolver sends, so it is decoded from its envelope in full.
        for (id, change) in projection.pending {
            guard let sequence = change.versionSequences.last,
                  let bytes = runs[id]?.last(where: { (try? Envelope.parseHeader(Array($0)).header.sequence) == sequence }) else { continue }
            if let cipher = try VaultEvent(envelope: Envelope(bytes: Array(bytes)), key: keys.sealing).operation?.cipher {
                projection.pending[id]?.latest = cipher
            }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let carried = runs.keys.sorted().flatMap { runs[$0]! }
        let body = SnapshotBody(projection: projection, policy: policy,
                                compactedAtMillis: Int64((now.timeIntervalSince1970 * 1000).rounded(.down)), carried: carried)
        var items: [String: [UInt8]] = [:]
        for (id, versions) in kept where !versions.isEmpty {
            items[id] = Array(try encoder.encode(KeptVersions(versions: versions)))
        }
        let plan = CompactionPlan(userId: userId, policy: policy, cutoff: cutoff, currentHorizon: currentHorizon,
                                  horizon: projection.lastSequence, removableEvents: folded, retainedEvents: total - folded,
                                  itemsWithVersions: items.count, keptVersions: keptCount, limitedBy: limitedBy,
                                  carriedEvents: carried.count)
        return PreparedCompaction(plan: plan, payload: Array(try encoder.encode(body)), state: PendingCheckpoint.encode(headers), items: items,
                                  reachedLimit: reachedLimit)
    }

    /// Adds the versions folded by this compaction to the kept ones, the last `keep` per item.
    /// An item whose last version is a permanent delete keeps none: the user asked for it to be
    /// gone (while the delete is pending, its change's envelopes are carried all the same).
    static func merge(_ buffer: [String: [KeptVersion]], into kept: inout [String: [KeptVersion]], keep: Int) {
        for (id, versions) in buffer {
            if versions.last?.type == VaultEventType.hardDeleted.rawValue || keep == 0 {
                kept[id] = nil
                continue
            }
            kept[id] = Array(((kept[id] ?? []) + versions).suffix(keep))
        }
    }

    /// The write of a prepared compaction: refused when another compaction moved the horizon
    /// meanwhile; drops the pending hint when it names a removed event.
    func writeCompaction(_ prepared: PreparedCompaction, txn: LogTransaction, key: SealingKey) throws -> CompactionCounts {
        let plan = prepared.plan
        guard let horizon = plan.horizon else { return CompactionCounts() }
        let now = try txn.reader.horizon(userId: plan.userId)
        guard now == plan.currentHorizon else {
            throw EventLogError.snapshot("user \(plan.userId) was compacted by another caller meanwhile (horizon \(now)); nothing was written: run the compaction again")
        }
        let counts = try txn.compact(userId: plan.userId, through: horizon, payload: prepared.payload, state: prepared.state,
                                     items: prepared.items, key: key)
        if let db = pendingCheckpoints, let bytes = try txn.get(db, key: Self.userPrefix(plan.userId)),
           (PendingCheckpoint.decode(bytes)?.lastSequence ?? 0) <= horizon {
            try txn.delete(db, key: Self.userPrefix(plan.userId))
        }
        return counts
    }

    /// The plan (and what to write) for `compact`, and how long it took.
    func timedPreparation(userId: String, policy: RetentionPolicy, now: Date, maxEvents: Int) throws -> (PreparedCompaction, Double) {
        let begun = ContinuousClock.now
        let prepared = try prepareCompaction(userId: userId, policy: policy, now: now, maxEvents: max(1, maxEvents))
        return (prepared, (ContinuousClock.now - begun).seconds)
    }

    /// Logs a compaction that wrote, and returns it.
    func finished(_ result: CompactionResult) -> CompactionResult {
        logger.info("log compacted", metadata: [
            "user": "\(result.plan.userId)", "horizon": "\(result.plan.horizon ?? 0)",
            "removed": "\(result.counts.removedEvents)", "write_ms": "\(Int(result.writeSeconds * 1000))"])
        return result
    }

    static func iso(_ date: Date) -> String { date.formatted(.iso8601) }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
