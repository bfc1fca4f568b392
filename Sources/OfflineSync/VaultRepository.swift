import EventLog
import Foundation
import Logging
import VaultCrypto
import VaultModel

/// Feature flags of the offline feature (both on by default in this library).
public struct OfflineSyncFlags: Sendable, Equatable {
    /// Save edits offline when the server cannot be reached.
    public var offlineChanges: Bool
    /// Resolve pending changes against the server before a sync. Offline saves also need it:
    /// an edit that would never be resolved is not saved offline.
    public var resolution: Bool

    public init(offlineChanges: Bool = true, resolution: Bool = true) {
        self.offlineChanges = offlineChanges
        self.resolution = resolution
    }
}

/// What happened to an operation.
public enum SaveResult: Sendable, Equatable {
    /// The server applied it; the local store holds the server's copy.
    case online(Cipher?)
    /// The server could not be reached; the edit is saved locally and in the log (its sequence).
    case savedOffline(Cipher?, sequence: UInt64)
    /// An item created offline was deleted before it reached the server: nothing is pending.
    case discardedLocally(sequence: UInt64)
    /// Nothing to do (the item was not found locally).
    case noOp

    /// True unless the server applied the operation.
    public var isOffline: Bool {
        if case .online = self { return false }
        return true
    }
}

/// Add, update, soft delete and permanently delete vault items, online when the server
/// answers and offline otherwise (DESIGN §5). One repository per user.
///
/// Encrypts first, then tries the server. Server rejections (4xx, error model, validation)
/// are rethrown; anything else (5xx, transport, unknown) saves the edit offline: the local
/// copy and its event commit in one durable LMDB transaction. Organization items are never
/// saved offline (the original error is rethrown).
///
/// ```swift
/// let repository = VaultRepository(store: store, userId: uid, server: client)
/// let result = try await repository.updateCipher(editedView)
/// if result.isOffline { /* badge: store.pendingCountUpdates(userId:) */ }
/// ```
public final class VaultRepository: Sendable {
    public let store: VaultLogStore
    public let userId: String
    public let server: any CipherServer
    public let flags: OfflineSyncFlags
    let logger: Logger

    public init(store: VaultLogStore, userId: String, server: any CipherServer, flags: OfflineSyncFlags = OfflineSyncFlags(),
                logger: Logger = Logger(label: "vaultlog.repository")) {
        self.store = store
        self.userId = userId
        self.server = server
        self.flags = flags
        self.logger = logger
    }

    var now: BitwardenDate { BitwardenDate(store.dependencies.now()) }

    /// The denylist: errors meaning the server received and rejected the request.
    static func isRejection(_ error: any Error) -> Bool {
        error.serverErrorKind != .unavailable
    }

    private var offlineAllowed: Bool { flags.offlineChanges && flags.resolution }

    // MARK: Create

    /// Creates an item. A new item gets a temporary id **before** encryption, so the id is
    /// inside the encrypted snapshot; the server assigns the real id when it is pushed.
    @discardableResult
    public func addCipher(_ view: CipherView) async throws -> SaveResult {
        let userKey = try store.userKey(userId: userId)
        let isOrgCipher = view.organizationId != nil
        var toEncrypt = view
        if toEncrypt.id == nil { toEncrypt.id = store.dependencies.makeId() }
        let encrypted = try toEncrypt.encrypt(userKey: userKey, random: store.dependencies.random)
        let tempId = encrypted.id!
        do {
            let created = try await server.createCipher(encrypted)
            var changes: [LocalChange] = [.upsert(created)]
            if created.id != tempId { changes.append(.delete(cipherId: tempId)) }
            try clearPendingAfterOnlineSuccess(cipherId: tempId, localChanges: changes)
            return .online(created)
        } catch where Self.isRejection(error) {
            throw error
        } catch {
            guard offlineAllowed, !isOrgCipher else { throw error }
            logger.info("server unavailable; saving new item offline", metadata: ["cipher": "\(tempId)", "error": "\(error)"])
            let sequence = try store.append(
                userId: userId, cipherId: tempId, type: .created,
                body: .operation(OperationBody(cipher: encrypted, passwordChanged: false, baseRevisionDate: nil, at: now)),
                localChanges: [.upsert(encrypted)])
            return .savedOffline(encrypted, sequence: sequence)
        }
    }

    // MARK: Update

    /// Updates an item. Applies Bitwarden's password-history rule against the previous
    /// version (the pending snapshot if any, else the local copy) and records whether the
    /// login password changed, by decrypting and comparing in memory.
    @discardableResult
    public func updateCipher(_ original: CipherView) async throws -> SaveResult {
        guard let rawId = original.id else { throw OfflineSyncError.missingCipherId }
        let id = try currentId(rawId)
        var view = original
        view.id = id
        let userKey = try store.userKey(userId: userId)
        let isOrgCipher = view.organizationId != nil
        let previous = try previousVersion(cipherId: id, userKey: userKey)
        var edited = view
        var passwordChanged = false
        if let previous {
            passwordChanged = view.passwordChanged(from: previous)
            edited = view.applyingPasswordHistory(original: previous, now: now)
        }
        let encrypted = try edited.encrypt(userKey: userKey, random: store.dependencies.random)
        if try pendingType(id) == .create {
            // The server has never seen this temporary id: the edit joins the pending create.
            return try appendUpdate(encrypted, id: id, passwordChanged: passwordChanged)
        }
        do {
            let updated = try await server.updateCipher(encrypted, lastKnownRevisionDate: encrypted.revisionDate)
            try clearPendingAfterOnlineSuccess(cipherId: id, localChanges: [.upsert(updated)])
            return .online(updated)
        } catch where Self.isRejection(error) {
            throw error
        } catch {
            guard offlineAllowed, !isOrgCipher else { throw error }
            logger.info("server unavailable; saving edit offline", metadata: ["cipher": "\(id)", "error": "\(error)"])
            return try appendUpdate(encrypted, id: id, passwordChanged: passwordChanged)
        }
    }

    /// Appends an `updated` event with the local copy. A never-synced item stays a create
    /// (the projector's merge), so it is POSTed later.
    private func appendUpdate(_ encrypted: Cipher, id: String, passwordChanged: Bool) throws -> SaveResult {
        let sequence = try store.append(
            userId: userId, cipherId: id, type: .updated,
            body: .operation(OperationBody(cipher: encrypted, passwordChanged: passwordChanged,
                                           baseRevisionDate: encrypted.revisionDate, at: now)),
            localChanges: [.upsert(encrypted)])
        return .savedOffline(encrypted, sequence: sequence)
    }

    /// The id an item has now: a temporary id of an item created offline (or the old id of an
    /// item the resolver re-created) follows the resolver's id map, so a caller still holding
    /// it edits the server's copy. Needs the vault unlocked.
    func currentId(_ id: String) throws -> String {
        let idMap = try store.projection(userId: userId).idMap
        var current = id
        // Bounded: each mapping points to a newer server id; a cycle would be a corrupt map.
        for _ in 0..<8 {
            guard let next = idMap[current], next != current else { break }
            current = next
        }
        return current
    }

    private func pendingType(_ id: String) throws -> PendingChangeType? {
        try store.pendingFromHeaders(userId: userId).pending[id]
    }

    /// The version an edit replaces: the latest pending snapshot, else the local copy.
    func previousVersion(cipherId: String, userKey: SymmetricCryptoKey) throws -> CipherView? {
        let base = try store.projection(userId: userId).pending[cipherId]?.latest
            ?? store.localCipher(userId: userId, id: cipherId)
        return try base?.decrypt(userKey: userKey)
    }

    // MARK: Soft delete

    /// Moves an item to the trash (`deletedDate` = now).
    @discardableResult
    public func softDeleteCipher(_ original: CipherView) async throws -> SaveResult {
        guard let rawId = original.id else { throw OfflineSyncError.missingCipherId }
        let id = try currentId(rawId)
        var view = original
        view.id = id
        let userKey = try store.userKey(userId: userId)
        let isOrgCipher = view.organizationId != nil
        var trashed = view
        trashed.deletedDate = now
        let encrypted = try trashed.encrypt(userKey: userKey, random: store.dependencies.random)
        let pendingType = try pendingType(id)
        do {
            // A never-synced item is not on the server: no request, handled locally below.
            guard pendingType != .create else { throw ServerFailure(.unavailable, "item \(id) was never sent to the server") }
            try await server.softDeleteCipher(id: id)
            try clearPendingAfterOnlineSuccess(cipherId: id, localChanges: [.upsert(encrypted)])
            return .online(encrypted)
        } catch where Self.isRejection(error) {
            throw error
        } catch {
            guard offlineAllowed || pendingType == .create, !isOrgCipher else { throw error }
            let body = VaultEvent.Body.operation(OperationBody(cipher: encrypted, passwordChanged: false,
                                                               baseRevisionDate: encrypted.revisionDate, at: now))
            if pendingType == .create {
                // Never reached the server: remove it locally; the fold leaves nothing pending.
                let sequence = try store.append(userId: userId, cipherId: id, type: .softDeleted, body: body,
                                                localChanges: [.delete(cipherId: id)])
                return .discardedLocally(sequence: sequence)
            }
            let sequence = try store.append(userId: userId, cipherId: id, type: .softDeleted, body: body,
                                            localChanges: [.upsert(encrypted)])
            return .savedOffline(encrypted, sequence: sequence)
        }
    }

    // MARK: Permanent delete

    /// Permanently deletes an item; offline, the local copy is removed and a `hardDeleted`
    /// event keeps its last version (so a conflict can still restore or back it up).
    @discardableResult
    public func deleteCipher(id rawId: String) async throws -> SaveResult {
        let id = try currentId(rawId)
        let pendingType = try pendingType(id)
        do {
            guard pendingType != .create else { throw ServerFailure(.unavailable, "item \(id) was never sent to the server") }
            try await server.deleteCipher(id: id)
            try clearPendingAfterOnlineSuccess(cipherId: id, localChanges: [.delete(cipherId: id)])
            return .online(nil)
        } catch where Self.isRejection(error) {
            throw error
        } catch {
            guard offlineAllowed || pendingType == .create else { throw error }
            return try handleOfflineDelete(cipherId: id, originalError: error)
        }
    }

    private func handleOfflineDelete(cipherId id: String, originalError: any Error) throws -> SaveResult {
        let pendingType = try store.pendingFromHeaders(userId: userId).pending[id]
        let pendingSnapshot = pendingType == nil ? nil : try store.projection(userId: userId).pending[id]?.latest
        guard let local = try store.localCipher(userId: userId, id: id) ?? pendingSnapshot else {
            // Nothing known locally (already deleted, or a double tap): nothing to queue.
            logger.info("offline delete of an item not found locally; nothing queued", metadata: ["cipher": "\(id)"])
            return .noOp
        }
        let body = VaultEvent.Body.operation(OperationBody(cipher: local, passwordChanged: false,
                                                           baseRevisionDate: local.revisionDate, at: now))
        if pendingType == .create {
            let sequence = try store.append(userId: userId, cipherId: id, type: .hardDeleted, body: body,
                                            localChanges: [.delete(cipherId: id)])
            return .discardedLocally(sequence: sequence)
        }
        guard local.organizationId == nil else { throw originalError }
        let sequence = try store.append(userId: userId, cipherId: id, type: .hardDeleted, body: body,
                                        localChanges: [.delete(cipherId: id)])
        return .savedOffline(nil, sequence: sequence)
    }

    // MARK: Online success

    /// After an online success: apply the server's result locally and, if the item had pending
    /// state from an earlier offline attempt, clear it with an outcome event — one transaction.
    private func clearPendingAfterOnlineSuccess(cipherId: String, localChanges: [LocalChange]) throws {
        if try store.pendingFromHeaders(userId: userId).pending[cipherId] != nil {
            try store.append(userId: userId, cipherId: cipherId, type: .clearedAfterOnlineSuccess,
                             body: .outcome(OutcomeBody(at: now, reason: "the server applied a later online edit")),
                             localChanges: localChanges)
        } else {
            try store.applyLocal(localChanges, userId: userId)
        }
    }
}
