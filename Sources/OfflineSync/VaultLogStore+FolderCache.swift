import EventLog
import Foundation
import VaultCrypto
import VaultModel

/// A change to the folders kept on the device (``VaultLogStore/localFolders(userId:)``).
enum FolderCacheChange: Sendable {
    /// The server has this folder, with this name (created or renamed).
    case put(ServerFolder)
    /// The server no longer has these folders (deleted here or by another device).
    case remove(Set<String>)
}

extension VaultLogStore {
    // MARK: The server's folders, kept on the device

    /// A kept folder's record: its encrypted name, as the server stores it, and its revision.
    private struct KeptFolder: Codable {
        var name: String
        var revisionDate: BitwardenDate?
    }

    /// The folders the app shows for `userId`, offline as well as online: the server's folders
    /// as the last sync, online folder call or resolution left them, with this device's pending
    /// folder operations applied (created offline: listed under the temporary id; renamed: the
    /// new name; deleted: left out). Names stay encrypted (decrypt them with the user key).
    /// The server's come in id order, then those created offline, in the order they were made.
    ///
    /// Beside other callers: reads only, never waits for a write. It sees every folder call that
    /// returned before it started. A sync whose fetch ran before an online folder call (in this
    /// process or another) and whose replace ran after it shows the server's list as fetched
    /// until the next sync; an item is never affected by that (its folder id stays as saved).
    public func localFolders(userId: String) throws -> [ServerFolder] {
        let kept = try keptFolders(userId: userId)
        guard isUnlocked(userId: userId) else { return kept }
        return VaultRepository.overlay(kept, projection: try projection(userId: userId))
    }

    /// The server's folders as kept on the device, without pending operations.
    func keptFolders(userId: String) throws -> [ServerFolder] {
        guard let folderCache else { return [] }
        let prefix = Self.userPrefix(userId)
        return try log.read { reader in
            var folders: [ServerFolder] = []
            var bad: [String] = []
            try reader.scan(folderCache, from: prefix) { key, value in
                guard key.starts(with: prefix) else { return false }
                let id = String(decoding: key.dropFirst(prefix.count), as: UTF8.self)
                if let kept = try? JSONDecoder().decode(KeptFolder.self, from: Data(value)), let name = try? EncString(kept.name) {
                    folders.append(ServerFolder(id: id, name: name, revisionDate: kept.revisionDate))
                } else {
                    bad.append(id)
                }
                return true
            }
            if !bad.isEmpty {
                logger.warning("kept folders that cannot be read are left out until the next sync", metadata: ["folders": "\(bad)"])
            }
            return folders
        }
    }

    /// Applies `change` to the kept folders, inside `txn`.
    func changeKeptFolders(_ change: FolderCacheChange, userId: String, in txn: LogTransaction) throws {
        guard let folderCache else { return }
        switch change {
        case .put(let folder):
            let value = try JSONEncoder().encode(KeptFolder(name: folder.name.serialized, revisionDate: folder.revisionDate))
            try txn.put(folderCache, key: Self.folderKey(userId, folder.id), value: Array(value))
        case .remove(let ids):
            for id in ids { try txn.delete(folderCache, key: Self.folderKey(userId, id)) }
        }
    }

    /// ``changeKeptFolders(_:userId:in:)`` in a write transaction of its own (an online folder call's answer).
    func changeKeptFolders(_ change: FolderCacheChange, userId: String) async throws {
        guard folderCache != nil else { return }
        try await log.writeAsync { [self] txn in try changeKeptFolders(change, userId: userId, in: txn) }
    }

    /// Replaces the user's kept folders with `folders` (a sync's list), inside `txn`.
    func replaceKeptFolders(_ folders: [ServerFolder], userId: String, in txn: LogTransaction) throws {
        guard let folderCache else { return }
        try deleteUserRecords(folderCache, userId: userId, in: txn)
        for folder in folders { try changeKeptFolders(.put(folder), userId: userId, in: txn) }
    }
}
