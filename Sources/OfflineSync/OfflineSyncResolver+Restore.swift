import Foundation
import VaultModel

extension OfflineSyncResolver {
    // MARK: Restore

    /// After the resolver put (or found) the local version on the server: when the user took the
    /// item out of the trash (``PendingChange/restoresFromTrash``) and the server's copy is still
    /// in its trash (`serverTrashed`), `PUT …/restore` it. Returns the `restoreApplied` event to
    /// record before `resolved` (none when nothing was restored) and the copy the local store
    /// keeps.
    ///
    /// A PUT never changes the trash state, so the copy read before it says whether the server
    /// still has the item trashed. Idempotent: a restore whose answer was lost leaves the copy
    /// active with this device's content, which the next run finds already applied (a server
    /// copy out of the trash needs nothing more). Only the paths where the local version wins
    /// restore: when the server's copy wins (another device's newer edit in the trash), the local
    /// version is kept as an active backup item, as the decision matrix says. A merge with
    /// another device's change never needs it: there is no merge when the trash state differs
    /// between the base and either side.
    func restoreIfTrashed(_ item: Item, serverId: String, serverTrashed: Bool, copy: Cipher) async throws
        -> (events: [(VaultEventType, OutcomeBody)], copy: Cipher) {
        guard item.change.restoresFromTrash == true, serverTrashed else { return ([], copy) }
        let restored = try await server.restoreCipher(id: serverId)
        logger.info("restored from the server's trash", metadata: ["cipher": "\(item.id)"])
        return ([(.restoreApplied, OutcomeBody(at: now, serverId: serverId, revisionDate: restored.revisionDate,
                                               reason: "taken out of the server's trash"))], restored)
    }
}
