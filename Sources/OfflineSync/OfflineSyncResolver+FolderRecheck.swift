import Foundation
import Logging
import Synchronization
import VaultModel

/// The items a pass sent whose server answer names a folder: item id → folder id. Filled by
/// the pass's pushes and creates (on several tasks at once), read once after them.
final class FoldersSent: Sendable {
    private let sent = Mutex<[String: String]>([:])

    /// Notes `answer` (the server's copy after a push or create) when it names a folder.
    func note(_ answer: Cipher) {
        guard let id = answer.id, let folderId = answer.folderId else { return }
        sent.withLock { $0[id] = folderId }
    }

    var all: [String: String] { sent.withLock { $0 } }
}

extension OfflineSyncResolver {
    /// After a pass: the folders the pass listed before its pushes may have been deleted by
    /// another device while it ran, and a push that reached the server after such a delete left
    /// the item naming a folder that is gone (Bitwarden stores the id as sent; the server moves
    /// only the items that are in the folder when it is deleted). So when a pushed item names a
    /// folder, the folders are listed once more; each item whose folder is gone is sent again in
    /// no folder (its local copy too), and the folder is recorded as gone on this device. An item
    /// saved again since its push is left to its next pass, which lists the folders anew. A
    /// failed list or re-send is logged and leaves the item as pushed: it is resolved, and the
    /// next direct save of it finds the folder gone.
    func recheckFolders(_ run: RunContext) async throws {
        let sent = run.folders.sent.all
        guard !sent.isEmpty, let folders = server as? any FolderServer else { return }
        let listed: Set<String>
        do {
            listed = Set(try await folders.listFolders().map(\.id))
        } catch {
            logger.info("cannot list folders after the pass", metadata: ["error": "\(error)"])
            return
        }
        let gone = sent.filter { !listed.contains($0.value) }
        guard !gone.isEmpty else { return }
        _ = try await store.moveLocalCopies(userId: run.userId, outOf: Set(gone.values))
        let pending = try store.projection(userId: run.userId).pending
        for id in gone.keys.sorted() where pending[id] == nil {
            guard var copy = try store.localCipher(userId: run.userId, id: id) else { continue }
            logger.info("an item's folder was deleted by another device during the pass; sending it again in no folder",
                        metadata: ["cipher": "\(id)", "folder": "\(gone[id] ?? "")"])
            copy.folderId = nil
            do {
                let updated = try await server.updateCipher(copy, lastKnownRevisionDate: copy.revisionDate)
                _ = try await store.applyOnlineResult([.upsert(updated)], userId: run.userId)
            } catch {
                logger.info("could not send the item again in no folder", metadata: ["cipher": "\(id)", "error": "\(error)"])
            }
        }
    }
}
