import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultModel

extension EffectObservingServer: FolderServer {
    /// The folder routes of `base` (a `FolderServer`); a base without them fails every call as
    /// unreachable, as a server port without folder routes leaves folder operations pending.
    private var folders: any FolderServer {
        get throws {
            guard let folders = base as? any FolderServer else {
                throw ServerFailure(.unavailable, "the wrapped server port has no folder routes", mayHaveArrived: false)
            }
            return folders
        }
    }

    /// Passed to `base` as is: a read is not an effect.
    public func listFolders() async throws -> [ServerFolder] { try await folders.listFolders() }

    /// Creates the folder on `base`, then reports `.folderCreated`.
    public func createFolder(encryptedName: EncString) async throws -> ServerFolder {
        let created = try await folders.createFolder(encryptedName: encryptedName)
        try await afterEffect(.folderCreated(serverId: created.id))
        return created
    }

    /// Renames the folder on `base`, then reports `.folderRenamed`.
    public func renameFolder(id: String, encryptedName: EncString) async throws -> ServerFolder {
        let renamed = try await folders.renameFolder(id: id, encryptedName: encryptedName)
        try await afterEffect(.folderRenamed(folderId: id))
        return renamed
    }

    /// Deletes the folder on `base`, then reports `.folderDeleted`.
    public func deleteFolder(id: String) async throws {
        try await folders.deleteFolder(id: id)
        try await afterEffect(.folderDeleted(folderId: id))
    }
}
