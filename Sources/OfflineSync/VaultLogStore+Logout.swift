import EventLog
import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultModel

extension VaultLogStore {
    // MARK: Logout

    /// Removes everything of a user: events, checkpoints, local items and folders, session. The one
    /// non-append mutation of the log.
    public func logout(userId: String) throws {
        try log.write { txn in
            try txn.deleteUser(userId)
            try deleteUserRecords(ciphers, userId: userId, in: txn)
            if let deletedFolders { try deleteUserRecords(deletedFolders, userId: userId, in: txn) }
            if let folderCache { try deleteUserRecords(folderCache, userId: userId, in: txn) }
            try txn.delete(accounts, key: Array(userId.utf8))
            if let pendingCheckpoints { try txn.delete(pendingCheckpoints, key: Self.userPrefix(userId)) }
        }
        markedUsers.withLock { _ = $0.remove(userId) }
        lock(userId: userId)
        notifyObservers(userId: userId)
    }

    /// ``logout(userId:)``, then closes this store and rewrites its file without free pages
    /// (`EventLogStore.compactFile(at:holding:)`). Deleted records stay in LMDB's free pages until they
    /// are reused: the logged-out account's wrapped user key and its sealed events would still
    /// be in `data.mdb`. After this they are not. The store is closed when this returns (also
    /// when the rewrite fails: the logout has happened, the file still holds free pages);
    /// open it again to go on.
    ///
    /// The logout is a write like any other and happens beside other opens of the store; the
    /// rewrite is exclusive, as in ``compactAndClose(userIds:policy:now:)``: while another
    /// process (an app's extension) has the store open it is refused (`StoreInUseError`,
    /// saying so) and the file is left as it is, never rewritten under another open.
    @discardableResult
    public func logoutAndClose(userId: String) throws -> FileCompaction {
        try logout(userId: userId)
        let path = log.path
        let lock: ExclusiveStoreLock
        do {
            lock = try log.lockExclusively(outcome: "the logout is done, but data.mdb was not rewritten, so its free pages may still hold the account's deleted records; run it again when nothing else has the store open")
        } catch {
            close()
            throw error
        }
        defer { lock.release() }
        close()
        return try EventLogStore.compactFile(at: path, holding: lock)
    }
}
