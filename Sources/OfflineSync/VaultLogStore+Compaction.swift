import EventLog
import Foundation
import Logging
import VaultCrypto
import VaultModel

/// How much resolved history a store keeps when it is compacted.
///
/// Events of an item that is pending, dead-lettered or quarantined are never removed: the
/// horizon only moves to a point where nothing was pending. Of what is older than
/// ``keepDays``, the last ``keepVersions`` versions of every item stay readable in the
/// snapshot (`vaultlog history`); the rest is removed.
public struct RetentionPolicy: Sendable, Codable, Equatable {
    /// Resolved events younger than this many days stay in the log as events. Default 30: the
    /// time Bitwarden keeps an item in the trash, and longer than a usual offline period, so a
    /// conflict that surfaces after a trip can still be explained from the events.
    public var keepDays: Int
    /// Versions kept per item in the snapshot (the last ones before the horizon). Default 5:
    /// the length of Bitwarden's password history, so an older password stays recoverable as
    /// long as the server's own history would show it.
    public var keepVersions: Int

    /// The defaults: 30 days, 5 versions.
    public static let `default` = RetentionPolicy()

    /// A policy; negative values count as 0.
    public init(keepDays: Int = 30, keepVersions: Int = 5) {
        self.keepDays = max(0, keepDays)
        self.keepVersions = max(0, keepVersions)
    }
}

/// What a compaction of one user's log would do (``VaultLogStore/compactionPlan(userId:policy:now:)``)
/// or did.
public struct CompactionPlan: Sendable, Equatable {
    /// The user.
    public var userId: String
    /// The policy applied.
    public var policy: RetentionPolicy
    /// Events recorded after this moment are kept as events (now − ``RetentionPolicy/keepDays``).
    public var cutoff: Date
    /// The horizon before this compaction (0: never compacted).
    public var currentHorizon: UInt64
    /// The new horizon: the sequence of the last event removed; nil when nothing can be removed.
    public var horizon: UInt64?
    /// Events of the user the compaction removes.
    public var removableEvents: Int
    /// Events of the user that stay.
    public var retainedEvents: Int
    /// Items with versions kept in the snapshot, and those versions in all.
    public var itemsWithVersions: Int
    /// Versions kept in the snapshot, over all items.
    public var keptVersions: Int
    /// Why the horizon stops where it does (pending items, the age limit), as a sentence.
    public var limitedBy: String
}

/// What ``VaultLogStore/compact(userId:policy:now:)`` did.
public struct CompactionResult: Sendable, Equatable {
    /// The plan carried out.
    public var plan: CompactionPlan
    /// Records removed by the write.
    public var counts: CompactionCounts
    /// How long the one write transaction took (the longest a save waited for it), in seconds.
    public var writeSeconds: Double
    /// How long the fold and sealing before the write took (no transaction held), in seconds.
    public var prepareSeconds: Double = 0
}

extension CompactionResult {
    init(_ prepared: VaultLogStore.PreparedCompaction, prepareSeconds: Double, counts: CompactionCounts = CompactionCounts(), writeSeconds: Double = 0) {
        self.init(plan: prepared.plan, counts: counts, writeSeconds: writeSeconds, prepareSeconds: prepareSeconds)
    }
}

/// One version kept in a snapshot: the operation event as it was, its body opened.
struct KeptVersion: Codable, Sendable, Equatable {
    var sequence: UInt64
    var type: UInt16
    var recordedAtMillis: Int64
    var body: Data
}

/// The sealed payload of a compaction snapshot: the projection at the horizon.
struct SnapshotBody: Codable, Sendable {
    var v = 1
    var projection: Projection
    var policy: RetentionPolicy
    var compactedAtMillis: Int64
}

/// The sealed payload of one item's record in a snapshot.
struct KeptVersions: Codable, Sendable {
    var v = 1
    var versions: [KeptVersion]
}

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

    /// What ``compact(userId:policy:now:)`` would remove, without changing anything.
    public func compactionPlan(userId: String, policy: RetentionPolicy = .default, now: Date? = nil) throws -> CompactionPlan {
        try prepareCompaction(userId: userId, policy: policy, now: now ?? dependencies.now()).plan
    }

    /// Compacts the user's log under `policy`: the events up to the newest point where nothing
    /// was pending and everything is older than `policy.keepDays` are replaced by a sealed
    /// snapshot (the projection there, and the last `policy.keepVersions` versions of every
    /// item). Reading and sealing happen before the write; the write is one transaction, so a
    /// save waits at most for that one. The file keeps its size (LMDB reuses the freed pages);
    /// ``compactAndClose(userIds:policy:now:)`` also rewrites the file.
    @discardableResult
    public func compact(userId: String, policy: RetentionPolicy = .default, now: Date? = nil) throws -> CompactionResult {
        let (prepared, prepareSeconds) = try timedPreparation(userId: userId, policy: policy, now: now)
        guard prepared.plan.horizon != nil else { return CompactionResult(prepared, prepareSeconds: prepareSeconds) }
        let key = try keys(userId).sealing
        let started = ContinuousClock.now
        let counts = try log.write { try self.writeCompaction(prepared, txn: $0, key: key) }
        return finished(CompactionResult(prepared, prepareSeconds: prepareSeconds, counts: counts, writeSeconds: (ContinuousClock.now - started).seconds))
    }

    /// ``compact(userId:policy:now:)`` with its write on the store's writer thread, for async
    /// callers (for example after a successful sync).
    @discardableResult
    public func compact(userId: String, policy: RetentionPolicy = .default, now: Date? = nil) async throws -> CompactionResult {
        let (prepared, prepareSeconds) = try timedPreparation(userId: userId, policy: policy, now: now)
        guard prepared.plan.horizon != nil else { return CompactionResult(prepared, prepareSeconds: prepareSeconds) }
        let key = try keys(userId).sealing
        let started = ContinuousClock.now
        let counts = try await log.writeAsync { try self.writeCompaction(prepared, txn: $0, key: key) }
        return finished(CompactionResult(prepared, prepareSeconds: prepareSeconds, counts: counts, writeSeconds: (ContinuousClock.now - started).seconds))
    }

    /// Compacts each user's log (each must be unlocked), closes the store and rewrites its file
    /// with LMDB's compacting copy, so the removed events' ciphertext does not stay in free
    /// pages. A kill at any point leaves the old store or the new one, both complete. Every
    /// other handle on the directory must be closed first.
    public func compactAndClose(userIds: [String], policy: RetentionPolicy = .default, now: Date? = nil) throws -> (results: [CompactionResult], file: FileCompaction) {
        var results: [CompactionResult] = []
        do {
            for userId in userIds { results.append(try compact(userId: userId, policy: policy, now: now)) }
        } catch {
            close()
            throw error
        }
        let path = log.path
        close()
        return (results, try EventLogStore.compactFile(at: path))
    }

    /// The versions of `cipherId` kept in the user's snapshot (the last ones before the
    /// horizon), oldest first, as events; empty when none are kept. Needs the vault unlocked.
    public func keptVersions(userId: String, cipherId: String) throws -> [VaultEvent] {
        let keys = try keys(userId)
        guard let payload = try log.read({ try $0.snapshotItem(userId: userId, cipherId: cipherId, key: keys.sealing) }) else { return [] }
        return try Self.decodeKept(payload, userId: userId, cipherId: cipherId).map { version in
            let header = EventHeader(sequence: version.sequence, userId: userId, cipherId: cipherId,
                                     eventType: version.type, recordedAtMillis: version.recordedAtMillis)
            return try VaultEvent(header: header, plaintext: Array(version.body))
        }
    }

    /// The ids of the items with versions kept in the user's snapshot. Needs no key.
    public func itemsWithKeptVersions(userId: String) throws -> [String] {
        try log.read { try $0.snapshotItemIds(userId: userId) }
    }

    // MARK: Internals

    struct PreparedCompaction: Sendable {
        var plan: CompactionPlan
        var payload: [UInt8]
        var items: [String: [UInt8]]
    }

    /// The snapshot's projection at the horizon (authenticated), or nil when never compacted.
    func snapshotProjection(userId: String, key: SealingKey) throws -> Projection? {
        guard let (info, payload) = try log.read({ try $0.snapshot(userId: userId, key: key) }) else { return nil }
        do {
            return try JSONDecoder().decode(SnapshotBody.self, from: Data(payload)).projection
        } catch {
            throw EventLogError.snapshot("the compaction snapshot of user \(userId) (horizon \(info.horizon)) does not decode (\(error)); restore the store from a backup or an export")
        }
    }

    static func decodeKept(_ payload: [UInt8], userId: String, cipherId: String) throws -> [KeptVersion] {
        do {
            return try JSONDecoder().decode(KeptVersions.self, from: Data(payload)).versions
        } catch {
            throw EventLogError.snapshot("the kept versions of item \(cipherId) (user \(userId)) do not decode (\(error))")
        }
    }

    /// Folds the user's log from the current snapshot up to the cutoff, remembering the last
    /// point where nothing was pending (the new horizon) and the versions kept for each item.
    func prepareCompaction(userId: String, policy: RetentionPolicy, now: Date) throws -> PreparedCompaction {
        let keys = try keys(userId)
        let cutoff = now.addingTimeInterval(-Double(policy.keepDays) * 86_400)
        let cutoffMillis = Int64((cutoff.timeIntervalSince1970 * 1000).rounded(.down))
        let currentHorizon = try horizon(userId: userId)
        var projection = try snapshotProjection(userId: userId, key: keys.sealing) ?? Projection(userId: userId)
        var kept: [String: [KeptVersion]] = [:]
        for id in try itemsWithKeptVersions(userId: userId) {
            if let payload = try log.read({ try $0.snapshotItem(userId: userId, cipherId: id, key: keys.sealing) }) {
                kept[id] = try Self.decodeKept(payload, userId: userId, cipherId: id)
            }
        }
        // Nothing was pending at the current horizon, so the header fold starts empty there.
        var headers = HeaderProjection()
        var buffer: [String: [KeptVersion]] = [:]
        var candidate: (sequence: UInt64, projection: Projection, events: Int)?
        var scanned = 0, total = 0
        var stoppedByAge = false
        var after = currentHorizon
        let limit = max(1, policy.keepVersions)
        while true {
            let batch = try log.read { try $0.envelopes(userId: userId, after: after, limit: Self.foldBatch) }
            guard let last = batch.last else { break }
            after = last.header.sequence
            total += batch.count
            for envelope in batch where !stoppedByAge {
                let header = envelope.header
                guard header.recordedAtMillis <= cutoffMillis else { stoppedByAge = true; break }
                scanned += 1
                let plaintext: [UInt8]
                do {
                    plaintext = try envelope.open(key: keys.sealing)
                    let event = try VaultEvent.operationSummary(header: header, plaintext: plaintext, placeholder: Cipher(type: .login))
                        ?? VaultEvent(header: header, plaintext: plaintext)
                    projection.apply(event)
                } catch {
                    // Quarantined: its item now pins the horizon (nothing after it is clean).
                    projection.quarantine(header, reason: "\(error)")
                    headers.apply(header)
                    continue
                }
                headers.apply(header)
                if VaultEventType(rawValue: header.eventType)?.isOperation == true {
                    buffer[header.cipherId, default: []].append(
                        KeptVersion(sequence: header.sequence, type: header.eventType, recordedAtMillis: header.recordedAtMillis, body: Data(plaintext)))
                    if buffer[header.cipherId]!.count > limit { buffer[header.cipherId]!.removeFirst() }
                }
                if projection.pending.isEmpty, (projection.quarantined ?? [:]).isEmpty, headers.pending.isEmpty {
                    Self.merge(buffer, into: &kept, keep: policy.keepVersions)
                    buffer = [:]
                    candidate = (header.sequence, projection, scanned)
                }
            }
        }
        // The policy applies to the whole snapshot, also to versions an earlier policy kept.
        kept = kept.compactMapValues { versions in versions.isEmpty || policy.keepVersions == 0 ? nil : Array(versions.suffix(policy.keepVersions)) }
        let limitedBy: String
        if let earliest = Self.earliestPending(projection) {
            limitedBy = "item \(earliest.cipherId) has had changes pending since event \(earliest.sequence); its events stay until it is resolved"
        } else if stoppedByAge {
            limitedBy = "events after \(Self.iso(cutoff)) are younger than \(policy.keepDays) days"
        } else {
            limitedBy = "every event of the user is old enough and resolved"
        }
        guard let candidate else {
            return PreparedCompaction(plan: CompactionPlan(userId: userId, policy: policy, cutoff: cutoff, currentHorizon: currentHorizon,
                                                           horizon: nil, removableEvents: 0, retainedEvents: total,
                                                           itemsWithVersions: kept.count, keptVersions: kept.values.reduce(0) { $0 + $1.count },
                                                           limitedBy: limitedBy),
                                      payload: [], items: [:])
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let body = SnapshotBody(projection: candidate.projection, policy: policy,
                                compactedAtMillis: Int64((now.timeIntervalSince1970 * 1000).rounded(.down)))
        var items: [String: [UInt8]] = [:]
        for (id, versions) in kept where !versions.isEmpty {
            items[id] = Array(try encoder.encode(KeptVersions(versions: versions)))
        }
        let plan = CompactionPlan(userId: userId, policy: policy, cutoff: cutoff, currentHorizon: currentHorizon,
                                  horizon: candidate.sequence, removableEvents: candidate.events, retainedEvents: total - candidate.events,
                                  itemsWithVersions: items.count, keptVersions: kept.values.reduce(0) { $0 + $1.count },
                                  limitedBy: limitedBy)
        return PreparedCompaction(plan: plan, payload: Array(try encoder.encode(body)), items: items)
    }

    /// Adds the versions seen since the last clean point to the kept ones, the last `keep` per
    /// item. An item whose last version is a permanent delete keeps none: the user asked for it
    /// to be gone, and the delete is resolved at a clean point.
    static func merge(_ buffer: [String: [KeptVersion]], into kept: inout [String: [KeptVersion]], keep: Int) {
        for (id, versions) in buffer {
            if versions.last?.type == VaultEventType.hardDeleted.rawValue || keep == 0 {
                kept[id] = nil
                continue
            }
            kept[id] = Array(((kept[id] ?? []) + versions).suffix(keep))
        }
    }

    /// The pending item whose change started first, and the sequence it started at.
    static func earliestPending(_ projection: Projection) -> (cipherId: String, sequence: UInt64)? {
        var out: (cipherId: String, sequence: UInt64)?
        for (id, change) in projection.pending {
            let first = change.versionSequences.first ?? projection.lastSequence
            if out.map({ first < $0.sequence }) ?? true { out = (id, first) }
        }
        for (id, reason) in projection.quarantined ?? [:] where out == nil {
            out = (id, UInt64(reason.split(separator: ":").first?.split(separator: " ").last ?? "") ?? projection.lastSequence)
        }
        return out
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
        let counts = try txn.compact(userId: plan.userId, through: horizon, payload: prepared.payload, items: prepared.items, key: key)
        if let db = pendingCheckpoints, let bytes = try txn.get(db, key: Self.userPrefix(plan.userId)),
           (PendingCheckpoint.decode(bytes)?.lastSequence ?? 0) <= horizon {
            try txn.delete(db, key: Self.userPrefix(plan.userId))
        }
        return counts
    }

    /// The plan (and what to write) for `compact`, and how long it took.
    func timedPreparation(userId: String, policy: RetentionPolicy, now: Date?) throws -> (PreparedCompaction, Double) {
        let begun = ContinuousClock.now
        let prepared = try prepareCompaction(userId: userId, policy: policy, now: now ?? dependencies.now())
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
