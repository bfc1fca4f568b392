import Foundation
import VaultCrypto
import VaultModel

extension VaultRepository {
    // MARK: Soft delete

    /// Moves an item to the trash (`deletedDate` = now). The stored copy is what moves (the
    /// view names the item); an item not stored locally is encrypted from the view.
    ///
    /// Beside other callers: a resolution of the item in progress never brings the item back
    /// out of the trash with its older server copy; the move is resolved after it.
    @discardableResult
    public func softDeleteCipher(_ original: CipherView) async throws -> SaveResult {
        guard let rawId = original.id else { throw OfflineSyncError.missingCipherId }
        let (id, state) = try current(rawId)
        let userKey = try store.userKey(userId: userId)
        let isOrgCipher = original.organizationId != nil
        var trashed: Cipher
        if let local = try store.localCipher(userId: userId, id: id) {
            trashed = local
        } else {
            var view = original
            view.id = id
            trashed = try view.encrypt(userKey: userKey, random: store.dependencies.random)
        }
        trashed.deletedDate = now
        if state.pending[id] != nil, !offlineAllowed {
            var fresh = original
            (fresh.id, fresh.revisionDate) = try await resolveBeforeOnlineOperation(id, rawId: rawId, revision: original.revisionDate)
            return try await softDeleteCipher(fresh)
        }
        switch state.pending[id] {
        case .create? where !state.uncertainCreates.contains(id):
            // Never reached the server: remove it locally; the fold leaves nothing pending.
            let sequence = try await appendOperation(.softDeleted, trashed, id: id, local: [.delete(cipherId: id)])
            return .discardedLocally(sequence: sequence)
        case _?:
            let sequence = try await appendOperation(.softDeleted, trashed, id: id, local: [.upsert(trashed)])
            return try await resolveNow(id, saved: trashed, sequence: sequence)
        case nil:
            break
        }
        do {
            try await server.softDeleteCipher(id: id)
            // The trash reply has no body: read the server's copy for its new revision date
            // (if that read fails, the trashed local copy is kept; the revision it lacks is
            // recognised later by its encrypted name).
            var stored = trashed
            if let copy = try? await server.getCipher(id: id), copy.deletedDate != nil { stored = copy }
            try await applyOnlineResult(cipherId: id, localChanges: [.upsert(stored)])
            return .online(stored)
        } catch where Self.isRejection(error) {
            throw error
        } catch {
            guard offlineAllowed, !isOrgCipher else { throw error }
            let sequence = try await appendOperation(.softDeleted, trashed, id: id, local: [.upsert(trashed)])
            return .savedOffline(trashed, sequence: sequence)
        }
    }

    // MARK: Permanent delete

    /// Permanently deletes an item; offline, the local copy is removed and a `hardDeleted`
    /// event keeps its last version (so a conflict can still restore or back it up).
    ///
    /// Beside other callers: a resolution of the item in progress (in this process or another)
    /// never re-creates it locally or on the server; the delete is resolved after it.
    @discardableResult
    public func deleteCipher(id rawId: String) async throws -> SaveResult {
        let (id, state) = try current(rawId)
        let pendingSnapshot = state.pending[id] == nil ? nil : try store.projection(userId: userId).pending[id]?.latest
        let known = try store.localCipher(userId: userId, id: id) ?? pendingSnapshot
        if state.pending[id] != nil, !offlineAllowed {
            let (freshId, _) = try await resolveBeforeOnlineOperation(id, rawId: rawId, revision: nil)
            return try await deleteCipher(id: freshId)
        }
        switch state.pending[id] {
        case .create? where !state.uncertainCreates.contains(id):
            guard let known else { return .noOp }
            let sequence = try await appendOperation(.hardDeleted, known, id: id, local: [.delete(cipherId: id)])
            return .discardedLocally(sequence: sequence)
        case _?:
            guard let known else { return .noOp }
            let sequence = try await appendOperation(.hardDeleted, known, id: id, local: [.delete(cipherId: id)])
            return try await resolveNow(id, saved: nil, sequence: sequence)
        case nil:
            break
        }
        do {
            try await server.deleteCipher(id: id)
            try await applyOnlineResult(cipherId: id, localChanges: [.delete(cipherId: id)])
            return .online(nil)
        } catch where Self.isRejection(error) {
            throw error
        } catch {
            guard offlineAllowed else { throw error }
            guard let known else {
                // Nothing known locally (already deleted, or a double tap): nothing to queue.
                logger.info("offline delete of an item not found locally; nothing queued", metadata: ["cipher": "\(id)"])
                return .noOp
            }
            guard known.organizationId == nil else { throw error }
            let sequence = try await appendOperation(.hardDeleted, known, id: id, local: [.delete(cipherId: id)])
            return .savedOffline(nil, sequence: sequence)
        }
    }
}
