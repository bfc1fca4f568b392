import EventLog
import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultModel

extension VaultLogStore {
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
    /// after it, in one read transaction: it never writes (the writer saves pending checkpoints
    /// after its commits). The checkpoint is unsealed, so this is a hint: decisions use
    /// ``pendingState(userId:)``, and `vaultlog verify` compares the checkpoint with the log.
    @_spi(Tools) public func pendingFromHeaders(userId: String) throws -> HeaderProjection {
        try log.read { try headerProjection($0, userId: userId).projection }
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
        // The links are checked as the fold of events checks them, and the end against the
        // head record: a gap stops the count (without the key, MACs stand unchecked).
        var walk = try ChainWalk.start(reader, userId: userId, after: projection.lastSequence)
        var folded = 0
        try reader.forEachHeaderAndMAC(userId: userId, after: projection.lastSequence) { header, mac in
            try walk.step(header, mac: mac, authenticated: true)
            projection.apply(header)
            folded += 1
            return true
        }
        try walk.finish(reader, end: projection.lastSequence, bound: .max, key: nil) { try checkNoLogMark(userId: userId, in: $0, key: nil) }
        return (projection, folded)
    }

    /// The pending set from headers alone right after `sequence` (time travel while locked). In
    /// a compacted log it starts from the snapshot's pending set at the horizon; a sequence
    /// before the horizon is ``OfflineSyncError/compacted(userId:sequence:horizon:)``.
    @_spi(Tools) public func pendingFromHeaders(userId: String, at sequence: UInt64) throws -> HeaderProjection {
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

    /// Pending count from headers (works while locked; a hint: decisions use ``pendingState(userId:)``).
    public func pendingCount(userId: String) throws -> Int { try pendingFromHeaders(userId: userId).count }
}
