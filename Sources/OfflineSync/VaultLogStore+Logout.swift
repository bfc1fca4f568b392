import EventLog
import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultModel

extension VaultLogStore {
    // MARK: Logout

    /// Removes everything of a user: events, checkpoints, local items, session. The one
    /// non-append mutation of the log.
    public func logout(userId: String) throws {
        try log.write { txn in
            try txn.deleteUser(userId)
            let prefix = Self.userPrefix(userId)
            var keys: [[UInt8]] = []
            try txn.scan(ciphers, from: prefix) { key, _ in
                guard key.starts(with: prefix) else { return false }
                keys.append(Array(key))
                return true
            }
            for key in keys { try txn.delete(ciphers, key: key) }
            try txn.delete(accounts, key: Array(userId.utf8))
            if let pendingCheckpoints { try txn.delete(pendingCheckpoints, key: Self.userPrefix(userId)) }
        }
        lock(userId: userId)
        notifyObservers(userId: userId)
    }

    /// ``logout(userId:)``, then closes this store and rewrites its file without free pages
    /// (`EventLogStore.compactFile(at:)`). Deleted records stay in LMDB's free pages until they
    /// are reused: the logged-out account's wrapped user key and its sealed events would still
    /// be in `data.mdb`. After this they are not. The store is closed when this returns (also
    /// when the compaction fails: the logout has happened, the file still holds free pages);
    /// open it again to go on. Every other handle on the directory must be closed first.
    @discardableResult
    public func logoutAndClose(userId: String) throws -> FileCompaction {
        try logout(userId: userId)
        let path = log.path
        close()
        return try EventLogStore.compactFile(at: path)
    }
}
