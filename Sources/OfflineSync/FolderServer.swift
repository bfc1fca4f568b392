import Foundation
import VaultCrypto
import VaultModel

/// A folder as the server holds it: its id, its name encrypted with the user key, its revision.
public struct ServerFolder: Sendable, Equatable {
    /// The server's id.
    public var id: String
    /// The name, an EncString under the user key (what the server stores, never decrypted there).
    public var name: EncString
    /// When the server last changed the folder.
    public var revisionDate: BitwardenDate?

    /// A folder value.
    public init(id: String, name: EncString, revisionDate: BitwardenDate? = nil) {
        self.id = id
        self.name = name
        self.revisionDate = revisionDate
    }
}

/// The folder routes the resolver needs to replay offline folder operations. A server port
/// that is not a `FolderServer` leaves pending folder operations (and the items that wait for
/// a folder created offline) pending.
///
/// ```swift
/// if let folders = server as? any FolderServer {
///     let list = try await folders.listFolders()
/// }
/// ```
public protocol FolderServer: Sendable {
    /// `GET /api/folders`: every folder of the user.
    func listFolders() async throws -> [ServerFolder]
    /// `POST /api/folders`; the server assigns the id.
    func createFolder(encryptedName: EncString) async throws -> ServerFolder
    /// `PUT /api/folders/{id}` with a new encrypted name. A folder that no longer exists fails
    /// as ``ServerErrorKind/notFound``.
    func renameFolder(id: String, encryptedName: EncString) async throws -> ServerFolder
    /// `DELETE /api/folders/{id}`; the servers move the folder's items to no folder. A folder
    /// that no longer exists fails as ``ServerErrorKind/notFound``.
    func deleteFolder(id: String) async throws
}
