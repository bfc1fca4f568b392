import EventLog
import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultModel

extension VaultLogStore {
    // MARK: Projection and checkpoints

    /// The user's projection: the newest checkpoint plus the fold of the events after it
    /// (cached in memory while unlocked). A read: it never writes (no checkpoint, no write
    /// transaction), so it works on a read-only store and costs no device flush. Checkpoints are
    /// saved by `append` after its commit, and by `saveCheckpoints(userId:)`.
    public func projection(userId: String) throws -> Projection {
        let keys = try keys(userId)
        var deferred = DeferredSnapshots()
        let cached = projections.withLock { $0[userId] }
        var (projection, checkpointedAt) = try cached ?? {
            let loaded: Projection
            (loaded, deferred) = try loadCheckpoint(userId: userId, keys: keys)
            return (loaded, loaded.lastSequence)
        }()
        try fold(into: &projection, userId: userId, upTo: .max, key: keys.sealing, deferred: deferred, resumingChecked: cached != nil)
        projections.withLock { cache in
            // A checkpoint the writer saved meanwhile counts.
            cache[userId] = (projection, max(checkpointedAt, cache[userId]?.checkpointedAt ?? 0))
        }
        return projection
    }

    /// The projection as of `sequence` (time travel): the newest checkpoint at or before it,
    /// plus the events up to it.
    @_spi(Tools) public func projection(userId: String, at sequence: UInt64) throws -> Projection {
        let keys = try keys(userId)
        var (projection, deferred) = try loadCheckpoint(userId: userId, keys: keys, atOrBefore: sequence)
        try fold(into: &projection, userId: userId, upTo: sequence, key: keys.sealing, deferred: deferred)
        return projection
    }

    /// The latest snapshots a checkpoint left undecoded, by cipher id, with the sequence of the
    /// event each is from (``CheckpointPayload``).
    typealias DeferredSnapshots = [String: (sequence: UInt64, json: ArraySlice<UInt8>)]

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

}
