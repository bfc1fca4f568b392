import EventLog
import Foundation
import Logging
import VaultCrypto
import VaultModel

/// How much resolved history a store keeps when it is compacted.
///
/// The events older than ``keepDays`` go into a snapshot: of those, every event of a change
/// still pending or dead-lettered is kept as it was stored (carried in the snapshot, so the
/// resolver and `vaultlog history` read it as before), and the last ``keepVersions`` versions of
/// every item stay readable; the rest is removed. An event that cannot be read, and every
/// event after it, stay in the log.
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
    /// Why the horizon stops where it does (the age limit, an unreadable event), as a sentence.
    public var limitedBy: String
    /// Events of items pending at the horizon, carried in the snapshot as they were stored.
    public var carriedEvents: Int = 0
}

/// What `VaultLogStore.compact(userId:policy:now:eventsPerTransaction:)` did: one or more
/// steps, each a complete compaction in one write transaction.
public struct CompactionResult: Sendable, Equatable {
    /// The plan carried out (over all steps: the first step's previous horizon, the last one's
    /// horizon, the events removed by all of them).
    public var plan: CompactionPlan
    /// Records removed by the writes.
    public var counts: CompactionCounts
    /// How long the longest write transaction took (the longest a save waited), in seconds.
    public var writeSeconds: Double
    /// How long the folds and sealing before the writes took (no transaction held), in seconds.
    public var prepareSeconds: Double = 0
    /// Write transactions (steps); 0 when nothing was removed.
    public var transactions: Int = 0
}

extension CompactionResult {
    init(_ prepared: VaultLogStore.PreparedCompaction, prepareSeconds: Double, counts: CompactionCounts = CompactionCounts(), writeSeconds: Double = 0) {
        self.init(plan: prepared.plan, counts: counts, writeSeconds: writeSeconds, prepareSeconds: prepareSeconds,
                  transactions: prepared.plan.horizon == nil ? 0 : 1)
    }

    /// This result followed by `next`, the step after it.
    func then(_ next: CompactionResult) -> CompactionResult {
        var out = next
        out.plan.currentHorizon = plan.currentHorizon
        out.plan.removableEvents += plan.removableEvents
        out.counts.removedEvents += counts.removedEvents
        out.counts.removedIndexEntries += counts.removedIndexEntries
        out.counts.removedCheckpoints += counts.removedCheckpoints
        out.writeSeconds = max(writeSeconds, next.writeSeconds)
        out.prepareSeconds += prepareSeconds
        out.transactions += transactions
        return out
    }
}

/// One version kept in a snapshot: the operation event as it was, its body opened.
struct KeptVersion: Codable, Sendable, Equatable {
    var sequence: UInt64
    var type: UInt16
    var recordedAtMillis: Int64
    var body: Data
}

/// The sealed payload of a compaction snapshot: the projection at the horizon, and the
/// envelopes (as stored) of the changes still pending there.
struct SnapshotBody: Codable, Sendable {
    var v = 1
    var projection: Projection
    var policy: RetentionPolicy
    var compactedAtMillis: Int64
    var carried: [Data] = []
}

/// The sealed payload of one item's record in a snapshot.
struct KeptVersions: Codable, Sendable {
    var v = 1
    var versions: [KeptVersion]
}
