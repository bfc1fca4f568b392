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

    /// Both on by default.
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
    /// The item had pending offline state: the operation was appended to the log like an
    /// offline one and the item was resolved at once (`report` says how: pushed, a conflict
    /// backup, a dropped delete, ...). The local store holds the result (`cipher`; nil when the
    /// item is gone).
    case resolved(Cipher?, report: ItemReport)
    /// An item created offline was deleted before it reached the server: nothing is pending.
    case discardedLocally(sequence: UInt64)
    /// Nothing to do (the item was not found locally).
    case noOp

    /// The item as the local store holds it after the operation: the server's copy, the copy
    /// saved offline, or the resolved one; nil when the item is gone or nothing was done.
    public var cipher: Cipher? {
        switch self {
        case .online(let cipher), .savedOffline(let cipher, _), .resolved(let cipher, _): return cipher
        case .discardedLocally, .noOp: return nil
        }
    }

    /// True when the operation is saved on this device and still waiting for the server: saved
    /// offline, or resolved at once but not settled (the server could not be reached, or a newer
    /// save is pending). False when the server has it, and for ``discardedLocally(sequence:)``
    /// and ``noOp`` (nothing waits).
    public var isOffline: Bool {
        switch self {
        case .online, .discardedLocally, .noOp: return false
        case .resolved(_, let report): return !report.isSettled
        case .savedOffline: return true
        }
    }
}

/// Add, update, soft delete and permanently delete vault items, online when the server
/// answers and offline otherwise. One repository per user.
///
/// Encrypts first, then tries the server — **unless the item already has pending state**:
/// then the operation is appended to the log like an offline one and the item is resolved at
/// once through the ``OfflineSyncResolver`` (when the vault is unlocked and resolution is on),
/// so backups, password-overflow copies, ordering and conflict rules apply on one path. A
/// direct online success stores the server's returned copy.
///
/// Server rejections (4xx, error model, validation) are rethrown; anything else (5xx,
/// transport, unknown) saves the edit offline: the local copy and its event commit in one
/// durable LMDB transaction. Organization items are never saved offline (the original error is
/// rethrown). A create whose request may have reached the server (a lost response) is saved
/// with its marker, so a later delete finds and deletes the server copy.
///
/// ```swift
/// let repository = VaultRepository(store: store, userId: uid, server: client)
/// let result = try await repository.updateCipher(editedView)
/// if result.isOffline { /* badge: store.pendingCountUpdates(userId:) */ }
/// ```
public final class VaultRepository: Sendable {
    /// The device's store: edits are appended to its log and applied to its local vault.
    public let store: VaultLogStore
    /// The user whose vault this is (unlocked in `store`).
    public let userId: String
    /// Tried first for every edit; an unreachable server means the edit is saved offline.
    public let server: any CipherServer
    /// Whether offline saving and resolution are on.
    public let flags: OfflineSyncFlags
    /// Resolves items that had pending state right after the user changed them.
    public let resolver: OfflineSyncResolver
    let logger: Logger

    /// `resolver` defaults to one with default options on the same store and server.
    public init(store: VaultLogStore, userId: String, server: any CipherServer, flags: OfflineSyncFlags = OfflineSyncFlags(),
                resolver: OfflineSyncResolver? = nil, logger: Logger = Logger(label: "vaultlog.repository")) {
        self.store = store
        self.userId = userId
        self.server = server
        self.flags = flags
        self.resolver = resolver ?? OfflineSyncResolver(store: store, server: server, logger: logger)
        self.logger = logger
    }

    var now: BitwardenDate { BitwardenDate(store.dependencies.now()) }

    /// The denylist: errors meaning the server received the request and refused this change.
    /// Everything else means the change cannot be sent now (out of reach, or no session: a cold
    /// start offline unlocks from the stored account without tokens) and is saved offline.
    static func isRejection(_ error: any Error) -> Bool {
        switch error.serverErrorKind {
        case .rejected, .notFound, .staleRevision: return true
        case .unavailable, .loginRequired: return false
        }
    }

    var offlineAllowed: Bool { flags.offlineChanges && flags.resolution }

    // MARK: Create

    /// Creates an item. A new item gets a temporary id **before** encryption, so the id is
    /// inside the encrypted snapshot; the server assigns the real id when it is pushed.
    ///
    /// Beside other callers: durable when it returns (online, or in the log); a sync running at
    /// the same time, in this process or another, posts it at most once.
    @discardableResult
    public func addCipher(_ view: CipherView) async throws -> SaveResult {
        let userKey = try store.userKey(userId: userId)
        let isOrgCipher = view.organizationId != nil
        var toEncrypt = view
        if toEncrypt.id == nil { toEncrypt.id = store.dependencies.makeId() }
        toEncrypt.folderId = try liveFolderId(toEncrypt.folderId)
        let viaResolver = try folderNeedsResolver(&toEncrypt.folderId)
        let encrypted = try toEncrypt.encrypt(userKey: userKey, random: store.dependencies.random)
        let tempId = encrypted.id!
        if viaResolver {
            let sequence = try await appendOperation(.created, encrypted, id: tempId, local: [.upsert(encrypted)])
            return try await resolveNow(tempId, saved: encrypted, sequence: sequence)
        }
        let created: Cipher
        do {
            created = try await server.createCipher(encrypted)
        } catch where Self.isRejection(error) {
            // Vaultwarden refuses a folder that is gone (deleted here or elsewhere): saved in no folder.
            guard try await folderDeletedMeanwhile(encrypted.folderId) else { throw error }
            return try await addCipher(view)
        } catch {
            guard offlineAllowed, !isOrgCipher else { throw error }
            logger.info("server unavailable; saving new item offline", metadata: ["cipher": "\(tempId)", "error": "\(error)"])
            let at = now
            var events = [VaultLogStore.PlannedEvent(cipherId: tempId, type: .created, body: .operation(
                OperationBody(cipher: encrypted, passwordChanged: false, baseRevisionDate: nil, at: at)))]
            if error.requestMayHaveArrived {
                // The POST may have been applied (a lost response): record it as a planned create
                // with its marker, so resolution adopts the server copy and a delete finds it.
                var sent = encrypted
                sent.id = nil
                events.append(.init(cipherId: tempId, type: .createPlanned, body: .outcome(OutcomeBody(
                    at: at, marker: encrypted.name?.serialized, reason: "the create's answer was lost: it may be on the server",
                    cipher: sent, purpose: .create))))
            }
            let sequences = try await store.append(userId: userId, events: events, localChanges: [.upsert(encrypted)])
            return .savedOffline(encrypted, sequence: sequences[0])
        }
        // Outside the catches: the server has the item, so nothing after this may save it again.
        return try await finishOnlineSave(cipherId: tempId, created, also: created.id != tempId ? [.delete(cipherId: tempId)] : [])
    }

    // MARK: Update

    /// Updates an item. Applies Bitwarden's password-history rule against the previous
    /// version (the pending snapshot if any, else the local copy) and records whether the
    /// login password changed, by decrypting and comparing in memory.
    ///
    /// The save carries its base: the version the view was read from (`CipherView.localBase`,
    /// set by decryption). If another save of the item came in since (another screen, the
    /// extension, a sync that replaced the local copy), the two are merged
    /// (`CipherView.merged(base:current:)`): parts only one changed are kept, a password both
    /// changed goes into the history, and any other part both changed keeps this save's value
    /// while the other version is first saved as a backup item (`"{name} - {time}"`). Nothing
    /// either save changed is lost. Safe beside any other call, in this process or another.
    @discardableResult
    public func updateCipher(_ original: CipherView) async throws -> SaveResult {
        guard let rawId = original.id else { throw OfflineSyncError.missingCipherId }
        let (id, state) = try current(rawId)
        var view = original
        view.id = id
        let userKey = try store.userKey(userId: userId)
        let isOrgCipher = view.organizationId != nil
        let previousCipher = try previousCipher(cipherId: id)
        let previous = try previousCipher?.decrypt(userKey: userKey)
        if let base = original.localBase, let previousCipher, let previous,
           try isStaleSave(base: base, previous: previousCipher, cipherId: id) {
            view = try await mergeStaleSave(view, base: base, current: previous, cipherId: id, userKey: userKey)
        }
        var edited = view
        var passwordChanged = false
        if let previous {
            passwordChanged = view.passwordChanged(from: previous)
            edited = view.applyingPasswordHistory(original: previous, now: now)
        }
        edited.folderId = try liveFolderId(edited.folderId)
        let viaResolver = try folderNeedsResolver(&edited.folderId)
        let encrypted = try edited.encrypt(userKey: userKey, random: store.dependencies.random)
        // The first edit of an item with nothing pending keeps the version it started from: the
        // base of the resolver's merge with another device's change.
        let firstEditBase = state.pending[id] != nil ? nil
            : previousCipher.flatMap { $0.revisionDate == encrypted.revisionDate ? $0 : nil }
        if state.pending[id] != nil || viaResolver {
            guard offlineAllowed else {
                var fresh = original
                (fresh.id, fresh.revisionDate) = try await resolveBeforeOnlineOperation(id, rawId: rawId, revision: original.revisionDate)
                return try await updateCipher(fresh)
            }
            // Pending state: never straight to the server. Into the log, then resolved at once.
            // (A first edit comes here when it moves the item into a folder created offline.)
            let sequence = try await appendOperation(.updated, encrypted, id: id, passwordChanged: passwordChanged,
                                                     base: firstEditBase, local: [.upsert(encrypted)])
            return try await resolveNow(id, saved: encrypted, sequence: sequence)
        }
        let updated: Cipher
        do {
            updated = try await server.updateCipher(encrypted, lastKnownRevisionDate: encrypted.revisionDate)
        } catch where Self.isRejection(error) {
            guard try await folderDeletedMeanwhile(encrypted.folderId) else { throw error }
            return try await updateCipher(original)
        } catch {
            guard offlineAllowed, !isOrgCipher else { throw error }
            logger.info("server unavailable; saving edit offline", metadata: ["cipher": "\(id)", "error": "\(error)"])
            let sequence = try await appendOperation(.updated, encrypted, id: id, passwordChanged: passwordChanged,
                                                     base: firstEditBase, local: [.upsert(encrypted)])
            return .savedOffline(encrypted, sequence: sequence)
        }
        return try await finishOnlineSave(cipherId: id, updated)
    }

    /// Appends an operation event with its local change in one durable transaction. The
    /// base revision is the snapshot's (the server revision the edit started from).
    func appendOperation(_ type: VaultEventType, _ snapshot: Cipher, id: String, passwordChanged: Bool = false,
                                 base: Cipher? = nil, local: [LocalChange]) async throws -> UInt64 {
        var base = base
        base?.extra = [:]
        return try await store.append(userId: userId, cipherId: id, type: type,
                         body: .operation(OperationBody(cipher: snapshot, passwordChanged: passwordChanged,
                                                        baseRevisionDate: snapshot.revisionDate, at: now, base: base)),
                         localChanges: local)
    }

    /// Resolves an item whose operation was just appended, when the vault is unlocked and
    /// resolution is on; otherwise (or when the server cannot be reached) it stays pending.
    func resolveNow(_ id: String, saved: Cipher?, sequence: UInt64) async throws -> SaveResult {
        guard flags.resolution, store.isUnlocked(userId: userId) else { return .savedOffline(saved, sequence: sequence) }
        guard let report = try await resolver.resolve(userId: userId, cipherId: id) else {
            return .savedOffline(saved, sequence: sequence)
        }
        if !report.isSettled {
            logger.info("item with pending state stays pending", metadata: ["cipher": "\(id)", "error": "\(report.error ?? "")"])
            return .savedOffline(saved, sequence: sequence)
        }
        let local = try store.localCipher(userId: userId, id: report.serverId ?? id) ?? store.localCipher(userId: userId, id: id)
        return .resolved(local, report: report)
    }

    /// With offline saving turned off (the feature flags), an operation on an item with
    /// pending state resolves that state first and then goes online like for any item; nothing
    /// new is saved offline. Returns the item's id afterwards and the revision the operation is
    /// based on: the server's when the resolution put this device's version there, else the
    /// caller's (so a server copy another device changed is refused, never overwritten).
    func resolveBeforeOnlineOperation(_ id: String, rawId: String, revision: BitwardenDate?) async throws
        -> (String, BitwardenDate?) {
        guard flags.resolution else { throw OfflineSyncError.pendingChangesNotResolved(cipherId: id, reason: "resolution is turned off") }
        guard let report = try await resolver.resolve(userId: userId, cipherId: id, waitForRun: true) else { return (id, revision) }
        if !report.isSettled {
            throw OfflineSyncError.pendingChangesNotResolved(cipherId: id, reason: report.error ?? report.outcome.rawValue)
        }
        let freshId = try currentId(rawId)
        guard try pendingState().pending[freshId] == nil else {
            throw OfflineSyncError.pendingChangesNotResolved(cipherId: id, reason: "still pending after resolution")
        }
        let ours: Set<ItemReport.Outcome> = [.pushed, .merged, .created, .recreated]
        let local = try store.localCipher(userId: userId, id: freshId)
        return (freshId, ours.contains(report.outcome) ? local?.revisionDate : revision)
    }

    /// The id an item has now: a temporary id of an item created offline (or the old id of an
    /// item the resolver re-created) follows the resolver's id map, so a caller still holding
    /// it edits the server's copy — except while the item's pending state still lives under
    /// an id of the chain (a create mapped but not resolved): then that id. Needs the vault unlocked.
    ///
    /// ```swift
    /// let shown = try repository.currentId(idTheScreenHeld)   // "tmp-…" → the server's id once created
    /// ```
    public func currentId(_ id: String) throws -> String {
        try current(id).id
    }

    /// ``currentId(_:)`` and the header state it was decided on, read once for the operation.
    func current(_ rawId: String) throws -> (id: String, state: HeaderProjection) {
        let state = try pendingState()
        return (Self.currentId(rawId, idMap: try store.projection(userId: userId).idMap, pending: state.pending), state)
    }

    /// The id to act on for `id`: the id of its chain (temporary id → server id → re-created
    /// id, followed both ways) whose pending state is open, else the newest id.
    @_spi(Tools) public static func currentId(_ id: String, idMap: [String: String], pending: [String: PendingChangeType]) -> String {
        // Bounded: each mapping points to a newer server id; a cycle would be a corrupt map.
        var chain = [id]
        var current = id
        for _ in 0..<8 {
            guard let next = idMap[current], next != current, !chain.contains(next) else { break }
            chain.append(next)
            current = next
        }
        var earlier = id
        for _ in 0..<8 {
            guard let previous = idMap.first(where: { $0.value == earlier && $0.key != earlier })?.key, !chain.contains(previous) else { break }
            chain.insert(previous, at: 0)
            earlier = previous
        }
        return chain.first { pending[$0] != nil } ?? current
    }

    /// The authenticated pending state (see ``VaultLogStore/pendingState(userId:)``).
    func pendingState() throws -> HeaderProjection {
        try store.pendingState(userId: userId)
    }

    /// The version an edit replaces: the latest pending snapshot, else the local copy.
    func previousCipher(cipherId: String) throws -> Cipher? {
        try store.projection(userId: userId).pending[cipherId]?.latest ?? store.localCipher(userId: userId, id: cipherId)
    }

    // MARK: Online success

    /// After a direct online success (the item had nothing pending): store the server's
    /// result. If an offline save of the same item slipped in meanwhile (another task), its
    /// local copy is left alone: the resolver reconciles it with the server. A result in a
    /// folder deleted on this device is stored in no folder and returned (see
    /// ``VaultLogStore/applyOnlineResult(_:userId:)``).
    @discardableResult
    func applyOnlineResult(cipherId: String, localChanges: [LocalChange]) async throws -> Cipher? {
        if try pendingState().pending[cipherId] != nil {
            logger.info("an offline save of the item arrived during the request; leaving it to the resolver", metadata: ["cipher": "\(cipherId)"])
            return nil
        }
        return try await store.applyOnlineResult(localChanges, userId: userId).first
    }

    /// A direct online save's end: stores `saved` (the server's answer) and returns the item as
    /// the server now has it. When the answer names a folder deleted on this device meanwhile (a
    /// ``deleteFolder(id:)`` beside the save, whose request reached the server first), or one the
    /// server no longer lists (another device deleted it before the save arrived: one folder
    /// list asked, ``folderGoneOnServer(_:)``), the item is sent again in no folder; if that
    /// cannot be sent, the move is saved offline for the resolver, so the server never keeps the
    /// item in a folder that is gone.
    func finishOnlineSave(cipherId: String, _ saved: Cipher, also: [LocalChange] = []) async throws -> SaveResult {
        // Another device may have deleted the folder before the save arrived (Bitwarden keeps the id).
        if let folderId = saved.folderId, try !store.isFolderDeleted(userId: userId, folderId: folderId) {
            _ = try await folderGoneOnServer(folderId)
        }
        guard let moved = try await applyOnlineResult(cipherId: cipherId, localChanges: [.upsert(saved)] + also),
              let id = moved.id else { return .online(saved) }
        logger.info("the item's folder was deleted during the save; sending it again in no folder", metadata: ["cipher": "\(id)"])
        do {
            let updated = try await server.updateCipher(moved, lastKnownRevisionDate: moved.revisionDate)
            try await applyOnlineResult(cipherId: id, localChanges: [.upsert(updated)])
            return .online(updated)
        } catch {
            guard offlineAllowed else { throw error }
            var base = saved
            base.extra = [:]
            let sequence = try await appendOperation(.updated, moved, id: id, base: base, local: [.upsert(moved)])
            return .savedOffline(moved, sequence: sequence)
        }
    }

    /// `folderId`, or nil when that folder was deleted on this device (a screen opened before
    /// the delete still shows it): the servers would keep the id of a folder that is gone.
    func liveFolderId(_ folderId: String?) throws -> String? {
        guard let folderId, try store.isFolderDeleted(userId: userId, folderId: folderId) else { return folderId }
        return nil
    }
}
