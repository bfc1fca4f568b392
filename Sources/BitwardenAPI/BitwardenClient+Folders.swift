import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultModel

extension BitwardenClient: FolderServer {
    // MARK: Folders

    /// `PUT /api/folders/{id}` with a new encrypted name.
    public func updateFolder(id: String, name: EncString) async throws -> Folder {
        let body = try JSONSerialization.data(withJSONObject: ["name": name.serialized])
        return try decode(Folder.self, try await send(.updateFolder, id, body: body), route: BitwardenEndpoint.updateFolder.route())
    }

    /// `DELETE /api/folders/{id}`: the server moves the folder's items to no folder.
    public func deleteFolder(id: String) async throws {
        _ = try await send(.deleteFolder, id)
    }

    /// The port's folder list (``folders()``).
    public func listFolders() async throws -> [ServerFolder] {
        try await folders().map { ServerFolder(id: $0.id, name: $0.name, revisionDate: $0.revisionDate) }
    }

    /// The port's create (``createFolder(name:)``).
    public func createFolder(encryptedName: EncString) async throws -> ServerFolder {
        let folder = try await createFolder(name: encryptedName)
        return ServerFolder(id: folder.id, name: folder.name, revisionDate: folder.revisionDate)
    }

    /// The port's rename (``updateFolder(id:name:)``).
    public func renameFolder(id: String, encryptedName: EncString) async throws -> ServerFolder {
        let folder = try await updateFolder(id: id, name: encryptedName)
        return ServerFolder(id: folder.id, name: folder.name, revisionDate: folder.revisionDate)
    }
}
