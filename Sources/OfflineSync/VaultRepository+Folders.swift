import Foundation
import VaultCrypto
import VaultModel

extension VaultRepository {
    // MARK: Folders

    /// Creates a folder named `name` (encrypted here with the user key, like item names).
    /// Returns the folder's id: the server's when the server answered, else a temporary id that
    /// items may use as their `folderId` at once; the resolver creates the folder before it
    /// pushes any item and sends the items with the server's id.
    ///
    /// ```swift
    /// let folderId = try await repository.createFolder(name: "Work")
    /// view.folderId = folderId
    /// try await repository.addCipher(view)
    /// ```
    @discardableResult
    public func createFolder(name: String) async throws -> String {
        let userKey = try store.userKey(userId: userId)
        let encrypted = EncString.encrypt(name, key: userKey, random: store.dependencies.random)
        let tempId = store.dependencies.makeId()
        var mayHaveArrived = false
        if let created = try await folderCallOnline(pending: try store.projection(userId: userId), {
            try await $0.createFolder(encryptedName: encrypted)
        }, offlineBecause: { mayHaveArrived = $0.requestMayHaveArrived }) {
            try await store.changeKeptFolders(.put(created), userId: userId)
            return created.id
        }
        var created = OutcomeBody(at: now)
        created.folderName = encrypted.serialized
        var events = [VaultLogStore.PlannedEvent(cipherId: tempId, type: .folderCreated, body: .outcome(created))]
        if mayHaveArrived {
            // The POST may have been applied (a lost answer): announced with its marker, so the
            // resolver finds the folder instead of creating it twice.
            var planned = OutcomeBody(at: now, marker: encrypted.serialized, reason: "the create's answer was lost: it may be on the server")
            planned.folderName = encrypted.serialized
            events.append(.init(cipherId: tempId, type: .folderCreatePlanned, body: .outcome(planned)))
        }
        try await store.append(userId: userId, events: events)
        return tempId
    }

    /// Renames a folder (a temporary id of one created offline, or a server id). Offline, the
    /// new name is pending; the resolver sends it, and it wins over another device's rename.
    public func renameFolder(id: String, name: String) async throws {
        let userKey = try store.userKey(userId: userId)
        let encrypted = EncString.encrypt(name, key: userKey, random: store.dependencies.random)
        let projection = try store.projection(userId: userId)
        // A folder created offline is known to the server under its mapped id.
        if let renamed = try await folderCallOnline(pending: projection, {
            try await $0.renameFolder(id: projection.serverFolderId(id), encryptedName: encrypted)
        }) {
            try await store.changeKeptFolders(.put(renamed), userId: userId)
            return
        }
        var renamed = OutcomeBody(at: now)
        renamed.folderName = encrypted.serialized
        try await store.append(userId: userId, events: [.init(cipherId: id, type: .folderRenamed, body: .outcome(renamed))])
    }

    /// Deletes a folder. Its local items go to no folder at once (as the servers do with theirs);
    /// offline, the delete is pending and the resolver applies it before it pushes any item.
    ///
    /// Beside other callers: the items are read and moved inside one write transaction (offline,
    /// the one that saves the delete; online, one after the server's answer), so an item saved
    /// meanwhile is moved as saved, never put back to an older copy. Online, the folder is
    /// recorded as deleted before the request is sent: a save beside it whose request reaches
    /// the server after the delete (the servers keep a gone folder's id as sent) sees that record
    /// when it stores the answer, and sends the item again in no folder. If the server refuses
    /// the delete, the record is taken back (a save that ran in that moment has left the folder).
    public func deleteFolder(id: String) async throws {
        let projection = try store.projection(userId: userId)
        let folderIds: Set<String> = [id, projection.serverFolderId(id)]
        if server is any FolderServer, projection.folders == nil {
            try await store.markFoldersDeleted(userId: userId, folderIds)
        }
        let deletedOnline: Void?
        do {
            deletedOnline = try await folderCallOnline(pending: projection, { (folders: any FolderServer) -> Void in
                do {
                    try await folders.deleteFolder(id: projection.serverFolderId(id))
                } catch where error.serverErrorKind == .notFound {
                    // Another device deleted it already: what the user asked for holds.
                    logger.info("folder already deleted on the server", metadata: ["folder": "\(id)"])
                }
            })
        } catch {
            try await store.unmarkFoldersDeleted(userId: userId, folderIds)
            throw error
        }
        if deletedOnline != nil {
            try await store.moveLocalCopies(userId: userId, outOf: folderIds)
            return
        }
        _ = try await store.append(userId: userId, events: [.init(cipherId: id, type: .folderDeleted, body: .outcome(OutcomeBody(at: now)))],
                               localChanges: [], alsoInTransaction: { [store, userId] txn in
                                   _ = try store.moveLocalCopies(userId: userId, outOf: folderIds, in: txn)
                               })
    }

    /// Whether the folder a refused save sent is gone (Vaultwarden refuses a folder that is):
    /// deleted on this device since, or by another device (``folderGoneOnServer(_:)``). Then
    /// the save is made again, and goes to no folder.
    func folderDeletedMeanwhile(_ folderId: String?) async throws -> Bool {
        guard let folderId else { return false }
        if try store.isFolderDeleted(userId: userId, folderId: folderId) { return true }
        return try await folderGoneOnServer(folderId)
    }

    /// Whether the server no longer lists the folder `folderId` (another device deleted it and
    /// this device has not synced since), asked after a direct online save that names a folder,
    /// or its refusal; a gone folder is recorded as a sync would
    /// (``VaultLogStore/recordIfFolderGone(_:userId:listing:)``).
    func folderGoneOnServer(_ folderId: String) async throws -> Bool {
        guard let folders = server as? any FolderServer else { return false }
        return try await store.recordIfFolderGone(folderId, userId: userId, listing: folders)
    }

    /// A folder call made on the server when nothing of the user's folders is pending (pending
    /// folder operations go first, in order, through the resolver): `online`'s value, or nil when
    /// the call is to be saved offline instead (no folder routes, something pending, or a failure
    /// other than a rejection; `offlineBecause` sees that failure). Throws a rejection, any
    /// failure when offline saving is off, and, with offline saving off and no server to ask,
    /// that the folder cannot be saved.
    private func folderCallOnline<T>(pending projection: Projection, _ online: (any FolderServer) async throws -> T,
                                     offlineBecause: (any Error) -> Void = { _ in }) async throws -> T? {
        if let folders = server as? any FolderServer, projection.folders == nil {
            do {
                return try await online(folders)
            } catch where Self.isRejection(error) {
                throw error
            } catch {
                guard offlineAllowed else { throw error }
                offlineBecause(error)
                return nil
            }
        }
        guard offlineAllowed else { throw ServerFailure(.unavailable, "the folder cannot be saved: the server port has no folder routes and offline saving is off") }
        return nil
    }

    /// Whether a save into `folderId` goes through the resolver (appended, then resolved at
    /// once): true for a folder created offline (its temporary id). The resolver sends the item
    /// after the folder's create, under the folder's server id, and in no folder (with an
    /// outcome) if another device deleted the folder meanwhile; a direct save would send an id
    /// the server never saw, or one that names nothing (Bitwarden stores it as given). With
    /// offline saving off, a mapped id is sent as the server's id instead.
    func folderNeedsResolver(_ folderId: inout String?) throws -> Bool {
        guard let id = folderId else { return false }
        let projection = try store.projection(userId: userId)
        let createdOffline = projection.folderIdMap?[id] != nil || projection.folders?[id]?.change == .create
        guard createdOffline else { return false }
        if !offlineAllowed, let mapped = projection.folderIdMap?[id] {
            folderId = mapped
            return false
        }
        return offlineAllowed
    }

    /// The folders the app shows: `serverFolders` (from the last sync) with this device's
    /// pending folder operations applied: folders created offline added (under their temporary
    /// id), renames applied, deleted ones left out.
    public func localFolders(serverFolders: [ServerFolder]) throws -> [ServerFolder] {
        let projection = try store.projection(userId: userId)
        return Self.overlay(serverFolders, projection: projection)
    }

    /// ``localFolders(serverFolders:)`` on a projection (pure).
    static func overlay(_ serverFolders: [ServerFolder], projection: Projection) -> [ServerFolder] {
        let pending = projection.folders ?? [:]
        var result: [ServerFolder] = []
        for var folder in serverFolders {
            let local = pending[folder.id] ?? pending.first { projection.folderIdMap?[$0.key] == folder.id }?.value
            if local?.change == .delete { continue }
            if let name = local?.name, let encrypted = try? EncString(name) { folder.name = encrypted }
            result.append(folder)
        }
        let listed = Set(result.map(\.id))
        for folder in pending.values.sorted(by: { ($0.versionSequences.first ?? 0) < ($1.versionSequences.first ?? 0) })
        where folder.change == .create && !listed.contains(projection.serverFolderId(folder.folderId)) {
            if let name = folder.name, let encrypted = try? EncString(name) {
                result.append(ServerFolder(id: folder.folderId, name: encrypted, revisionDate: folder.updatedAt))
            }
        }
        return result
    }
}
