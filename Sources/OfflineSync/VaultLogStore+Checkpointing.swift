import EventLog
import Foundation
import Logging

extension VaultLogStore {
    // MARK: Checkpoints on the writer's path

    /// Saves the checkpoints that are due for `userId`: the maintenance step for a store that
    /// was read but not written since its log grew (after an import, a first sync, or a first
    /// unlock of a long log), run at a quiet moment. Reads never write, and `append` saves the
    /// due checkpoints after its commits; this does the same without an append: the sealed
    /// projection checkpoint (while unlocked) once ``VaultLogStoreOptions/checkpointInterval``
    /// events passed the last one, and the pending-set checkpoint (for a locked vault's count)
    /// once ``VaultLogStoreOptions/pendingCheckpointInterval`` sequences passed the stored one.
    /// One write transaction when something is due, none otherwise. Returns whether it wrote.
    ///
    /// ```swift
    /// try store.importEvents(from: file)
    /// try store.saveCheckpoints(userId: userId)   // the next open folds a short tail
    /// ```
    @discardableResult
    public func saveCheckpoints(userId: String) throws -> Bool {
        let last = isUnlocked(userId: userId) ? try projection(userId: userId).lastSequence
                                              : try pendingFromHeaders(userId: userId).lastSequence
        guard let due = dueCheckpoints(userId: userId, lastSequence: last) else { return false }
        try log.write { txn in try writeCheckpoints(due, userId: userId, in: txn) }
        noteCheckpointsSaved(due, userId: userId)
        return true
    }

    /// `saveCheckpoints(userId:)` from async code: the write runs on the log's writer thread.
    @discardableResult
    public func saveCheckpoints(userId: String) async throws -> Bool {
        let last = isUnlocked(userId: userId) ? try projection(userId: userId).lastSequence
                                              : try pendingFromHeaders(userId: userId).lastSequence
        guard let due = dueCheckpoints(userId: userId, lastSequence: last) else { return false }
        try await log.writeAsync { txn in try self.writeCheckpoints(due, userId: userId, in: txn) }
        noteCheckpointsSaved(due, userId: userId)
        return true
    }

    /// The checkpoints due after a commit, computed outside any transaction: the sealed
    /// projection checkpoint (its fold, encoding) and the pending-set checkpoint (headers only).
    struct DueCheckpoints: Sendable {
        /// The projection to seal as a checkpoint at its last sequence, and the key.
        var sealed: (sequence: UInt64, payload: [UInt8], key: SealingKey)?
        /// The pending set from headers to store (unsealed).
        var pending: HeaderProjection?
    }

    /// Saves the checkpoints due now that the user's events up to `lastSequence` are committed
    /// (called by the blocking `append` after its commit): reads never write, so a checkpoint is
    /// written here, in one write transaction of its own, and only when one is due:
    ///
    /// - the sealed projection, once ``VaultLogStoreOptions/checkpointInterval`` events were
    ///   appended past the last checkpoint of the projection this store keeps in memory (a store
    ///   that never read the projection has nothing to checkpoint), so a reopen folds at most
    ///   that many events;
    /// - the pending set from headers, once ``VaultLogStoreOptions/pendingCheckpointInterval``
    ///   sequences passed since the stored one, so a locked vault's count reads a short tail.
    ///
    /// A failure is logged, not thrown: the events are committed, and a checkpoint only saves
    /// later reads some work.
    func saveDueCheckpoints(userId: String, lastSequence: UInt64) {
        guard let due = dueCheckpoints(userId: userId, lastSequence: lastSequence) else { return }
        do {
            try log.write { txn in try writeCheckpoints(due, userId: userId, in: txn) }
            noteCheckpointsSaved(due, userId: userId)
        } catch {
            logger.warning("could not save a checkpoint", metadata: ["user": "\(userId)", "error": "\(error)"])
        }
    }

    /// ``saveDueCheckpoints(userId:lastSequence:)`` for the `async` append: the write goes to the
    /// log's writer thread, so no concurrency thread blocks on its flush.
    func saveDueCheckpoints(userId: String, lastSequence: UInt64) async {
        guard let due = dueCheckpoints(userId: userId, lastSequence: lastSequence) else { return }
        do {
            try await log.writeAsync { txn in try self.writeCheckpoints(due, userId: userId, in: txn) }
            noteCheckpointsSaved(due, userId: userId)
        } catch {
            logger.warning("could not save a checkpoint", metadata: ["user": "\(userId)", "error": "\(error)"])
        }
    }

    /// What is due after a commit up to `lastSequence` (nil: nothing), folded and encoded here.
    func dueCheckpoints(userId: String, lastSequence: UInt64) -> DueCheckpoints? {
        guard !log.isReadOnly else { return nil }
        var due = DueCheckpoints()
        if let keys = try? keys(userId), let checkpointedAt = projections.withLock({ $0[userId]?.checkpointedAt }),
           lastSequence >= checkpointedAt, lastSequence - checkpointedAt >= UInt64(checkpointInterval) {
            do {
                let projection = try projection(userId: userId)
                if projection.lastSequence > 0 {
                    due.sealed = (projection.lastSequence, try CheckpointPayload.encode(projection), keys.sealing)
                }
            } catch {
                logger.warning("could not fold the projection for a checkpoint", metadata: ["user": "\(userId)", "error": "\(error)"])
            }
        }
        if pendingCheckpointInterval > 0, let db = pendingCheckpoints {
            do {
                let stored = try pendingCheckpointedAt.withLock({ $0[userId] }) ?? log.read {
                    PendingCheckpoint.decode(try $0.get(db, key: Self.userPrefix(userId)))?.lastSequence ?? 0
                }
                pendingCheckpointedAt.withLock { $0[userId] = stored }
                if lastSequence >= stored, lastSequence - stored >= UInt64(pendingCheckpointInterval) {
                    due.pending = try log.read { try headerProjection($0, userId: userId).projection }
                }
            } catch {
                logger.warning("could not fold the pending set for a checkpoint", metadata: ["user": "\(userId)", "error": "\(error)"])
            }
        }
        return due.sealed == nil && due.pending == nil ? nil : due
    }

    /// Writes `due` in `txn`; a pending set only if no newer one was stored meanwhile.
    func writeCheckpoints(_ due: DueCheckpoints, userId: String, in txn: LogTransaction) throws {
        if let sealed = due.sealed {
            try txn.saveCheckpoint(userId: userId, sequence: sealed.sequence, payload: sealed.payload, key: sealed.key)
        }
        if let pending = due.pending, let db = pendingCheckpoints {
            let stored = PendingCheckpoint.decode(try txn.get(db, key: Self.userPrefix(userId)))
            if (stored?.lastSequence ?? 0) < pending.lastSequence {
                try txn.put(db, key: Self.userPrefix(userId), value: PendingCheckpoint.encode(pending))
            }
        }
    }

    /// Remembers what was saved, so the next commits measure from it.
    private func noteCheckpointsSaved(_ due: DueCheckpoints, userId: String) {
        if let sealed = due.sealed {
            projections.withLock { cache in
                if let entry = cache[userId], entry.checkpointedAt < sealed.sequence { cache[userId]!.checkpointedAt = sealed.sequence }
            }
        }
        if let pending = due.pending {
            pendingCheckpointedAt.withLock { $0[userId] = max($0[userId] ?? 0, pending.lastSequence) }
        }
    }
}
