import Foundation
import VaultCrypto
import VaultModel

extension VaultRepository {
    // MARK: Restore

    /// Takes an item out of the trash (`deletedDate` cleared). The stored copy is what comes
    /// back, with every edit made in the trash.
    ///
    /// With nothing pending for the item, the server is asked first (`PUT …/restore`) and its
    /// copy stored; when it cannot be reached the restore is saved offline (a `restored` event)
    /// and resolved later. With pending state (a trash move or edits not sent yet) the restore is
    /// appended like an offline one and the item is resolved at once, as every operation on a
    /// pending item is. The resolver then makes the server hold the item active: it restores the
    /// server's copy, re-creates the item when another device deleted it for good, or applies the
    /// decision matrix when another device edited it in the trash.
    ///
    /// Throws ``OfflineSyncError/cannotRestore(cipherId:reason:)`` when the item is not on this
    /// device or not in the trash (nothing is written).
    ///
    /// ```swift
    /// let result = try await repository.restoreCipher(id: trashed.id!)
    /// if result.isOffline { /* restored here; the server follows at the next sync */ }
    /// ```
    @discardableResult
    public func restoreCipher(id rawId: String) async throws -> SaveResult {
        let (id, state) = try current(rawId)
        let pendingSnapshot = state.pending[id] == nil ? nil : try store.projection(userId: userId).pending[id]?.latest
        guard let known = try store.localCipher(userId: userId, id: id) ?? pendingSnapshot else {
            throw OfflineSyncError.cannotRestore(cipherId: id, reason: "it is not on this device (deleted for good, or not synced yet); sync and look for it again")
        }
        guard known.deletedDate != nil else {
            throw OfflineSyncError.cannotRestore(cipherId: id, reason: "it is not in the trash")
        }
        var restored = known
        restored.deletedDate = nil
        if state.pending[id] != nil, !offlineAllowed {
            let (freshId, _) = try await resolveBeforeOnlineOperation(id, rawId: rawId, revision: nil)
            return try await restoreCipher(id: freshId)
        }
        if state.pending[id] != nil {
            // Pending state: never straight to the server. Into the log, then resolved at once.
            let sequence = try await appendOperation(.restored, restored, id: id, local: [.upsert(restored)])
            return try await resolveNow(id, saved: restored, sequence: sequence)
        }
        do {
            let copy = try await server.restoreCipher(id: id)
            try await applyOnlineResult(cipherId: id, localChanges: [.upsert(copy)])
            return .online(copy)
        } catch where Self.isRejection(error) {
            throw error
        } catch {
            guard offlineAllowed, known.organizationId == nil else { throw error }
            logger.info("server unavailable; saving restore offline", metadata: ["cipher": "\(id)", "error": "\(error)"])
            let sequence = try await appendOperation(.restored, restored, id: id, local: [.upsert(restored)])
            return .savedOffline(restored, sequence: sequence)
        }
    }
}
