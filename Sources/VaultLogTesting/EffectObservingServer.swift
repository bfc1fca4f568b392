import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultModel

/// A change a ``CipherServer`` call made on the server.
public enum ServerEffect: Sendable, Equatable, CustomStringConvertible {
    /// `POST /api/ciphers` created an item (its server id).
    case created(serverId: String)
    /// `PUT /api/ciphers/{id}` replaced an item.
    case updated(cipherId: String)
    /// `PUT /api/ciphers/{id}/delete` moved an item to the trash.
    case softDeleted(cipherId: String)
    /// `DELETE /api/ciphers/{id}` removed an item.
    case deleted(cipherId: String)
    /// `PUT /api/ciphers/{id}/restore` took an item out of the trash.
    case restored(cipherId: String)
    /// An attachment was announced and uploaded to an item (its new attachment id).
    case attachmentAdded(cipherId: String, attachmentId: String)
    /// `DELETE /api/ciphers/{id}/attachment/{attachmentId}` removed an attachment.
    case attachmentDeleted(cipherId: String, attachmentId: String)
    /// `POST /api/folders` created a folder (its server id).
    case folderCreated(serverId: String)
    /// `PUT /api/folders/{id}` renamed a folder.
    case folderRenamed(folderId: String)
    /// `DELETE /api/folders/{id}` deleted a folder.
    case folderDeleted(folderId: String)

    /// A short line for logs: the request and the item id, e.g. "PUT <id>" or "POST → <server id>".
    public var description: String {
        switch self {
        case .created(let serverId): "POST → \(serverId)"
        case .updated(let id): "PUT \(id)"
        case .softDeleted(let id): "soft delete \(id)"
        case .deleted(let id): "DELETE \(id)"
        case .restored(let id): "restore \(id)"
        case .attachmentAdded(let id, let attachmentId): "attachment \(attachmentId) → \(id)"
        case .attachmentDeleted(let id, let attachmentId): "DELETE attachment \(attachmentId) of \(id)"
        case .folderCreated(let serverId): "POST folder → \(serverId)"
        case .folderRenamed(let id): "PUT folder \(id)"
        case .folderDeleted(let id): "DELETE folder \(id)"
        }
    }
}

/// A server port that passes every call to `base` and, after each call that changed the
/// server succeeded, calls `afterEffect` before the answer reaches the caller.
///
/// This is how tests inject crashes into a resolution: `afterEffect` throws a
/// ``ResolutionInterruption``, and the resolver stops exactly where a process killed right after
/// the server acted would stop, with the effect on the server and its outcome not yet recorded.
/// Observation works the same way (`vaultlog resolve-worker` prints every effect). The hook
/// is async: it may also run the user's saves right after an effect while the resolution that
/// made it waits (the scenario runner's `atEffect` step), so a save can meet a resolution in
/// flight at a chosen point, deterministically.
///
/// ```swift
/// struct Crash: ResolutionInterruption {}
/// let crashing = EffectObservingServer(client) { _ in throw Crash() }
/// let resolver = OfflineSyncResolver(store: store, server: crashing)
/// ```
public struct EffectObservingServer: CipherServer {
    /// The server the calls go to.
    public let base: any CipherServer
    /// Called after each create, update, trash move, restore and delete that succeeded, before its
    /// answer reaches the caller (which waits for it).
    public let afterEffect: @Sendable (ServerEffect) async throws -> Void

    /// Wraps `base`, calling `afterEffect` after each effect on the server (a synchronous
    /// closure works too).
    public init(_ base: any CipherServer, afterEffect: @escaping @Sendable (ServerEffect) async throws -> Void) {
        self.base = base
        self.afterEffect = afterEffect
    }

    /// Passed to `base` as is: a read is not an effect.
    public func getCipher(id: String) async throws -> Cipher { try await base.getCipher(id: id) }

    /// Creates the item on `base`, then reports `.created` with its server id ("?" if the reply
    /// has none); an error `afterEffect` throws replaces the reply.
    public func createCipher(_ cipher: Cipher) async throws -> Cipher {
        let created = try await base.createCipher(cipher)
        try await afterEffect(.created(serverId: created.id ?? "?"))
        return created
    }

    /// Updates the item on `base`, then reports `.updated`; an error `afterEffect` throws replaces
    /// the reply.
    public func updateCipher(_ cipher: Cipher, lastKnownRevisionDate: BitwardenDate?) async throws -> Cipher {
        let updated = try await base.updateCipher(cipher, lastKnownRevisionDate: lastKnownRevisionDate)
        try await afterEffect(.updated(cipherId: cipher.id ?? "?"))
        return updated
    }

    /// Moves the item to the trash on `base`, then reports `.softDeleted`.
    public func softDeleteCipher(id: String) async throws {
        try await base.softDeleteCipher(id: id)
        try await afterEffect(.softDeleted(cipherId: id))
    }

    /// Deletes the item on `base`, then reports `.deleted`.
    public func deleteCipher(id: String) async throws {
        try await base.deleteCipher(id: id)
        try await afterEffect(.deleted(cipherId: id))
    }

    /// Takes the item out of the trash on `base`, then reports `.restored`; an error
    /// `afterEffect` throws replaces the reply.
    public func restoreCipher(id: String) async throws -> Cipher {
        let restored = try await base.restoreCipher(id: id)
        try await afterEffect(.restored(cipherId: id))
        return restored
    }

    /// Passed to `base` as is: a read is not an effect.
    public func sync() async throws -> SyncSnapshot { try await base.sync() }

    /// Passed to `base` as is: a read is not an effect.
    public func accountRevisionDate() async throws -> Date? { try await base.accountRevisionDate() }

    /// Passed to `base` as is: a read is not an effect.
    public func downloadAttachment(cipherId: String, attachmentId: String) async throws -> [UInt8] {
        try await base.downloadAttachment(cipherId: cipherId, attachmentId: attachmentId)
    }

    /// Adds the attachment on `base`, then reports `.attachmentAdded` with its id (the one whose
    /// file name is `fileName`; "?" if the reply does not show it).
    public func createAttachment(cipherId: String, fileName: EncString, key: EncString, encryptedData: [UInt8]) async throws -> Cipher {
        let updated = try await base.createAttachment(cipherId: cipherId, fileName: fileName, key: key, encryptedData: encryptedData)
        try await afterEffect(.attachmentAdded(cipherId: cipherId,
                                               attachmentId: updated.attachments?.first { $0.fileName == fileName }?.id ?? "?"))
        return updated
    }

    /// Deletes the attachment on `base`, then reports `.attachmentDeleted`.
    public func deleteAttachment(cipherId: String, attachmentId: String) async throws {
        try await base.deleteAttachment(cipherId: cipherId, attachmentId: attachmentId)
        try await afterEffect(.attachmentDeleted(cipherId: cipherId, attachmentId: attachmentId))
    }
}
