import Foundation
import LMDB

/// The store's lock file held exclusively for a file rewrite
/// (``EventLogStore/lockExclusively(outcome:)``); release it when done.
public typealias ExclusiveStoreLock = StoreLock

extension EventLogStore {
    // MARK: Exclusive access for a file rewrite

    /// Takes the store exclusively for a file rewrite, without waiting: afterwards no other
    /// open of the store exists, in any process, until the returned lock is released (an open
    /// in another process waits for it). Refused while another process (an app's extension,
    /// a `vaultlog` command) has the store open, with `StoreInUseError` naming the store, the
    /// other processes where the system tells, what to do, and `outcome`; a refusal closes
    /// this store (see `Environment.lockExclusively(outcome:)`). Pass the lock to
    /// ``compactFile(at:holding:)`` after ``close()``.
    public func lockExclusively(outcome: String = "nothing was changed") throws -> ExclusiveStoreLock {
        try environment.lockExclusively(outcome: outcome)
    }

    /// Rewrites the closed store at `path` without free pages, atomically, holding `lock`
    /// (from ``lockExclusively(outcome:)``; nil: taken here without waiting, refused while
    /// another open of the store exists). See `Environment.compactFile(at:holding:)`.
    @discardableResult
    public static func compactFile(at path: String, holding lock: ExclusiveStoreLock?) throws -> FileCompaction {
        try Environment.compactFile(at: path, holding: lock)
    }
}

extension LogReader {
    /// The id of the newest commit this read sees, made by any process: every commit of the
    /// store makes it larger, so a reader that finds it unchanged knows that nothing, in this
    /// process or another, was committed meanwhile.
    public var commitID: UInt64 { transaction.id }
}
