import EventLog
import Foundation
import VaultModel

extension VaultLogStore {
    // MARK: Deleted folders

    /// The key of a folder's record in a side table (deleted, kept): the user and the folder's id.
    static func folderKey(_ userId: String, _ folderId: String) -> [UInt8] {
        userPrefix(userId) + Array(folderId.utf8)
    }

    /// Records that the folders `folderIds` are deleted (on this device, or found gone from the
    /// server's list after a save named one), inside `txn`. Written before an online delete is
    /// sent and with every delete that moves local copies, so that a save running beside the
    /// delete (in this process or another) sees it when it stores the server's answer
    /// (``applyOnlineResult(_:userId:)``). Folder ids are never reused, so the record stays
    /// true; a logout removes the user's records.
    func markFoldersDeleted(userId: String, _ folderIds: Set<String>, in txn: LogTransaction) throws {
        guard let deletedFolders else { return }
        for id in folderIds { try txn.put(deletedFolders, key: Self.folderKey(userId, id), value: [1]) }
    }

    /// ``markFoldersDeleted(userId:_:in:)`` in a write transaction of its own.
    func markFoldersDeleted(userId: String, _ folderIds: Set<String>) async throws {
        try await log.writeAsync { [self] txn in try markFoldersDeleted(userId: userId, folderIds, in: txn) }
    }

    /// Takes back the record of ``markFoldersDeleted(userId:_:)`` (the server refused the delete:
    /// the folder stays).
    func unmarkFoldersDeleted(userId: String, _ folderIds: Set<String>) async throws {
        try await log.writeAsync { [self] txn in try unmarkFoldersDeleted(userId: userId, folderIds, in: txn) }
    }

    /// ``unmarkFoldersDeleted(userId:_:)`` inside `txn` (also a discarded offline delete).
    func unmarkFoldersDeleted(userId: String, _ folderIds: Set<String>, in txn: LogTransaction) throws {
        guard let deletedFolders else { return }
        for id in folderIds { try txn.delete(deletedFolders, key: Self.folderKey(userId, id)) }
    }

    /// Whether `folders` (the server) no longer lists `folderId`: another device deleted it and
    /// this device has not heard of it, so a save that names it sent an id the server does not
    /// have (Bitwarden stores it as given, Vaultwarden refuses the save). One folder list read.
    /// When the folder is gone, this device records what a sync would have, in one write
    /// transaction (``moveLocalCopies(userId:outOf:)``: the deleted-folder record later saves
    /// read, the kept folders, its local items moved to no folder). False when the list cannot
    /// be read.
    func recordIfFolderGone(_ folderId: String, userId: String, listing folders: any FolderServer) async throws -> Bool {
        let listed: [ServerFolder]
        do {
            listed = try await folders.listFolders()
        } catch {
            logger.info("could not list the folders to check a save's folder", metadata: ["folder": "\(folderId)", "error": "\(error)"])
            return false
        }
        guard !listed.contains(where: { $0.id == folderId }) else { return false }
        logger.info("the save's folder was deleted by another device; the item goes to no folder", metadata: ["folder": "\(folderId)"])
        _ = try await moveLocalCopies(userId: userId, outOf: [folderId])
        return true
    }

    /// Whether `folderId` was deleted on this device (``markFoldersDeleted(userId:_:in:)``).
    func isFolderDeleted(userId: String, folderId: String) throws -> Bool {
        guard let deletedFolders else { return false }
        return try log.read { reader in try reader.get(deletedFolders, key: Self.folderKey(userId, folderId)) != nil }
    }

    /// Applies a direct online call's local changes in one write transaction, with every upsert
    /// that names a folder deleted on this device stored in no folder instead (read in the same
    /// transaction, so a delete that committed before is always seen). Returns those copies: the
    /// server's answer named a deleted folder, and a save must send the item again.
    func applyOnlineResult(_ changes: [LocalChange], userId: String) async throws -> [Cipher] {
        try await log.writeAsync { [self] txn -> [Cipher] in
            var moved: [Cipher] = []
            for change in changes {
                guard case .upsert(var cipher) = change, let folderId = cipher.folderId, let deletedFolders,
                      try txn.get(deletedFolders, key: Self.folderKey(userId, folderId)) != nil else {
                    try apply(change, userId: userId, in: txn)
                    continue
                }
                cipher.folderId = nil
                moved.append(cipher)
                try apply(.upsert(cipher), userId: userId, in: txn)
            }
            return moved
        }
    }

    /// Removes every record of `table` under the user's key prefix (a logout).
    func deleteUserRecords(_ table: SideTable, userId: String, in txn: LogTransaction) throws {
        for key in try userKeys(table, userId: userId, in: txn) { try txn.delete(table, key: key) }
    }

    /// The keys of `table` under the user's key prefix, in key order.
    func userKeys(_ table: SideTable, userId: String, in txn: LogTransaction) throws -> [[UInt8]] {
        let prefix = Self.userPrefix(userId)
        var keys: [[UInt8]] = []
        try txn.scan(table, from: prefix) { key, _ in
            guard key.starts(with: prefix) else { return false }
            keys.append(Array(key))
            return true
        }
        return keys
    }
}
