import EventLog
import Foundation

extension VaultLogStore {
    // MARK: Compaction with the file rewritten

    /// Compacts each user's log (each must be unlocked), closes the store and rewrites its file
    /// with LMDB's compacting copy, so the removed events' ciphertext does not stay in free
    /// pages. The store is closed when this returns or throws.
    ///
    /// Exclusive: it first takes the store for itself across processes (the store's lock file
    /// held exclusively) and keeps it until the new file is in place, so no other open of the
    /// store exists meanwhile and no commit can be lost by the rewrite. While another process
    /// has the store open (an app's extension, a `vaultlog` command), it is refused **before
    /// anything changes**, with an error (`StoreInUseError`) that names the store and says to
    /// close the other process and run again. An open in another process that begins while
    /// this runs waits for it (``VaultLogStoreOptions/eventLog``'s `rewriteWaitLimit`) and then
    /// sees the new file. Run it where the app can arrange that: at logout, or at start before
    /// the extension runs. `compact(userId:policy:now:eventsPerTransaction:)` alone needs no
    /// exclusivity.
    ///
    /// A kill at any point leaves the old store or the new one, both complete: the
    /// compaction's steps each commit whole, the rewrite renames a flushed copy over the file,
    /// and the kernel drops the lock of a killed process.
    ///
    /// Runs on a thread of its own (the compaction, the copy and its fsyncs block for a while on
    /// a large store); ``compactAndCloseBlocking(userIds:policy:now:)`` is the same on the
    /// caller's thread.
    public func compactAndClose(userIds: [String], policy: RetentionPolicy = .default,
                                now: Date? = nil) async throws -> (results: [CompactionResult], file: FileCompaction) {
        try await Self.offThread { try self.compactAndCloseBlocking(userIds: userIds, policy: policy, now: now) }
    }

    /// ``compactAndClose(userIds:policy:now:)`` on the caller's thread, which it blocks (a
    /// command-line tool, synchronous code).
    public func compactAndCloseBlocking(userIds: [String], policy: RetentionPolicy = .default,
                                        now: Date? = nil) throws -> (results: [CompactionResult], file: FileCompaction) {
        let path = log.path
        let lock: ExclusiveStoreLock
        do {
            lock = try log.lockExclusively(outcome: "nothing was changed")
        } catch {
            close()
            throw error
        }
        defer { lock.release() }
        var results: [CompactionResult] = []
        do {
            for userId in userIds { results.append(try compactBlocking(userId: userId, policy: policy, now: now)) }
        } catch {
            close()
            throw error
        }
        close()
        return (results, try EventLogStore.compactFile(at: path, holding: lock))
    }

    /// Runs `work` on a new thread and resumes with its result: blocking work (a KDF, a file
    /// rewrite) never holds one of the few threads Swift concurrency runs tasks on.
    static func offThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
        }
    }
}
