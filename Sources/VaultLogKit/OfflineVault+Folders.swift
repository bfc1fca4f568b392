import Foundation
@_spi(Tools) import OfflineSync
import VaultModel

/// A folder as the vault screen lists it.
///
/// ```swift
/// for folder in try vault.folders() { print(folder.name, folder.isPending ? "(not synced yet)" : "") }
/// ```
public struct VaultFolder: Sendable, Equatable, Identifiable {
    /// The folder's id: the server's, or a temporary one for a folder created offline until the
    /// resolver created it on the server (``OfflineVault/currentFolderId(of:)`` maps it then).
    /// Items use it as their `folderId`.
    public var id: String
    /// The decrypted name.
    public var name: String
    /// True when it was created or renamed on this device and the server does not have that yet.
    public var isPending: Bool

    /// A folder value.
    public init(id: String, name: String, isPending: Bool) {
        self.id = id
        self.name = name
        self.isPending = isPending
    }
}

extension OfflineVault {
    // MARK: Folders

    /// The account's folders, offline as well as online: the server's, as the last sync (or a
    /// folder call made here) left them, with every folder change saved on this device applied
    /// (created: listed under a temporary id; renamed: the new name; deleted: left out), sorted
    /// by name (then by id).
    ///
    /// Beside other callers: reads only, never waits for a save; it sees every folder call that
    /// returned before it started. A sync that fetched before an online folder call and stored
    /// its list after it shows the list as fetched until the next sync (items keep their folder).
    public func folders() throws -> [VaultFolder] {
        do {
            let userId = try unlockedUser()
            let key = try store.userKey(userId: userId)
            let projection = try store.projection(userId: userId)
            let pending = projection.folders ?? [:]
            let pendingIds = Set(pending.keys).union(pending.keys.compactMap { projection.folderIdMap?[$0] })
            return try store.localFolders(userId: userId).map { folder in
                VaultFolder(id: folder.id, name: try folder.name.decryptString(key: key), isPending: pendingIds.contains(folder.id))
            }.sorted { a, b in
                let order = a.name.compare(b.name, options: [.caseInsensitive, .numeric])
                return order == .orderedSame ? a.id < b.id : order == .orderedAscending
            }
        } catch {
            throw VaultError.wrapping(error)
        }
    }

    /// Creates a folder (its name encrypted with the user key, like item fields). Returns its
    /// id: the server's when the server answered, else a temporary id that items may use as
    /// their `folderId` at once. The next sync creates the folder on the server before it sends
    /// any item, exactly once even when an answer is lost, and sends the items under its
    /// server id.
    ///
    /// Beside other callers: durable when it returns; two creates of the same name make two
    /// folders, as on the server.
    @discardableResult
    public func createFolder(name: String) async throws -> String {
        try await vaultCall { try await repository().createFolder(name: name) }
    }

    /// Renames a folder (a server id, or the temporary id of one created offline). Offline the
    /// new name waits for the next sync and wins over another device's rename of the folder;
    /// a folder another device deleted meanwhile stays deleted.
    public func renameFolder(id: String, name: String) async throws {
        try await vaultCall { try await repository().renameFolder(id: id, name: name) }
    }

    /// Deletes a folder. Its items go to no folder at once, on this device as on the server;
    /// offline the delete waits for the next sync, which applies it before any item is sent.
    ///
    /// Beside other callers: an item saved into the folder while the delete runs (another
    /// screen, another process) ends in no folder on the server too, with what it saved.
    public func deleteFolder(id: String) async throws {
        try await vaultCall { try await repository().deleteFolder(id: id) }
    }

    /// Discards a folder's waiting change (create, rename or delete), for one the server keeps
    /// refusing: every sync tries a folder change again and reports the refusal
    /// (`FolderReport` with `failed` in the sync's resolution report), and a logout refuses while
    /// one waits. Nothing is sent. A create never sent is dropped and its items go to no
    /// folder; a rename leaves the server's name; a delete leaves the folder on the server (the
    /// next sync lists it again). The operations stay in the log's history.
    ///
    /// Beside other callers: waits for a sync's resolution in progress (this process or
    /// another); a change of the folder saved meanwhile is kept
    /// (`FolderDiscardResult.newerChangePending`).
    @discardableResult
    public func discardFolderChange(id: String) async throws -> FolderDiscardResult {
        let result = try await vaultCall { try await resolver.discardPendingFolderChange(userId: try unlockedUser(), folderId: id) }
        publishStatus()
        return result
    }

    /// The id a folder has now: the server's id once a folder created offline reached the
    /// server, the id given otherwise.
    public func currentFolderId(of id: String) throws -> String {
        do {
            return try store.projection(userId: try unlockedUser()).serverFolderId(id)
        } catch {
            throw VaultError.wrapping(error)
        }
    }
}
