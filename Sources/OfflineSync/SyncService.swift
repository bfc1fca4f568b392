import Foundation
import Logging
import VaultModel

/// The result of ``SyncService/fetchSync(userId:forceSync:)``.
public enum SyncResult: Sendable, Equatable {
    /// The server's items replaced the local store. Items still waiting for the server (in
    /// `stillPending`: a dead letter, an item backing off, a quarantined one) kept their local
    /// copies; every other item now matches the server, so one stuck item never keeps the
    /// other devices' changes away.
    case applied(ciphers: Int, stillPending: [PendingItemStatus], resolution: ResolutionReport?)
    /// Nothing was replaced: edits kept arriving while the sync counted and fetched (each
    /// replace found a newer save). The next sync tries again.
    case aborted(stillPending: [PendingItemStatus], reason: SyncAbortReason, resolution: ResolutionReport?)
    /// Not forced, nothing pending, and the account has not changed since the last applied
    /// sync: nothing fetched.
    case upToDate(resolution: ResolutionReport?)

    /// True when the server's items were applied (with or without items still pending).
    public var isApplied: Bool {
        if case .applied = self { return true }
        return false
    }

    /// True when the local store matches the server and nothing is waiting for it.
    public var isCurrent: Bool {
        switch self {
        case .applied(_, let pending, _): pending.isEmpty
        case .aborted: false
        case .upToDate: true
        }
    }

    /// Items still waiting for the server after the sync (empty when it is up to date).
    public var stillPending: [PendingItemStatus] {
        switch self {
        case .applied(_, let pending, _), .aborted(let pending, _, _): pending
        case .upToDate: []
        }
    }

    /// The resolution run before the sync, if any.
    public var resolution: ResolutionReport? {
        switch self {
        case .applied(_, _, let report), .aborted(_, _, let report), .upToDate(let report): report
        }
    }
}

/// Why a sync replaced nothing.
public enum SyncAbortReason: String, Sendable, Equatable {
    /// Saves kept arriving during the sync (three replaces in a row found a newer save).
    case editsKeptArriving
}

/// A full sync that never overwrites a pending local edit (`Docs/Resolution.md`):
///
/// 1. vault locked → no resolution (it needs the keys); the sync itself still runs, and
///    pending items keep their local copies;
/// 2. pre-count pending items (from the authenticated log: the unsealed pending checkpoint is
///    only a hint for a locked vault's badge); if any, resolve them, then count again;
/// 3. fetch `/api/sync` and replace every local item that has nothing pending, only if the
///    log's last sequence is still the one seen at the count, checked inside the same write
///    transaction (closes the race between counting and replacing: an edit saved meanwhile is
///    never overwritten). Items still pending (a dead letter, one backing off) keep their
///    local copies and are listed in the result: they never keep the other items' changes away.
///
/// ```swift
/// let sync = SyncService(store: store, server: client, resolver: resolver)
/// let result = try await sync.fetchSync(userId: uid)
/// for item in result.stillPending where item.needsDecision { askUser(about: item) }
/// ```
public final class SyncService: Sendable {
    /// The device's store, whose local items a sync replaces.
    public let store: VaultLogStore
    /// Where the items come from.
    public let server: any CipherServer
    /// Runs first, so pending changes reach the server before its items are fetched.
    public let resolver: OfflineSyncResolver
    /// Whether resolution runs before a sync (``OfflineSyncFlags/resolution``).
    public let flags: OfflineSyncFlags
    let logger: Logger

    /// A sync service over `store` and `server`, resolving with `resolver` (share the one
    /// resolver of the store).
    public init(store: VaultLogStore, server: any CipherServer, resolver: OfflineSyncResolver,
                flags: OfflineSyncFlags = OfflineSyncFlags(), logger: Logger = Logger(label: "vaultlog.sync")) {
        self.store = store
        self.server = server
        self.resolver = resolver
        self.flags = flags
        self.logger = logger
    }

    /// How many times a replace is retried when an edit was appended during the fetch.
    static let maxReplaceAttempts = 3

    /// Resolves pending changes, then applies the server's items to every item with nothing
    /// pending (pending ones keep their local copies and are listed in the result). Like a Bitwarden
    /// client's `needsSync`: with `forceSync` the server's items are always fetched; without it the
    /// fetch is skipped (``SyncResult/upToDate(resolution:)``) when the account's revision date
    /// (`GET /api/accounts/revision-date`) is not newer than the last applied sync. Pending
    /// changes are resolved first either way.
    ///
    /// Beside other callers (a timer's sync and a pull-to-refresh together, another process on
    /// the store): the resolution step waits for any resolution of the user in progress and
    /// never sends a change twice; the replace is skipped and counted again when anything was
    /// appended since the count, so a save made during the sync is never overwritten.
    ///
    /// A cancelled task ends the sync with `CancellationError` (an edit saved offline stays
    /// saved; a resolution step already recorded stays recorded).
    @discardableResult
    public func fetchSync(userId: String, forceSync: Bool = false) async throws -> SyncResult {
        do {
            return try await sync(userId: userId, forceSync: forceSync)
        } catch where Task.isCancelled && !(error is CancellationError) {
            // A request cut by the cancellation fails as "unavailable": say what happened.
            throw CancellationError()
        }
    }

    private func sync(userId: String, forceSync: Bool) async throws -> SyncResult {
        let unlocked = store.isUnlocked(userId: userId)
        var report: ResolutionReport?
        // Decisions read the authenticated pending state, never the unsealed pending checkpoint.
        // Folder operations are not counted as pending items, but are resolved all the same.
        if unlocked && flags.resolution,
           try store.pendingState(userId: userId).count > 0 || store.projection(userId: userId).folders != nil {
            report = try await resolver.processPendingChanges(userId: userId)
        }
        for attempt in 0..<Self.maxReplaceAttempts {
            try Task.checkCancellation()
            // The last sequence first: the state read after it covers at least that much, and
            // the replace below proceeds only if nothing was appended since.
            let lastSequence = try store.log.lastSequence()
            let remaining = try store.pendingState(userId: userId).count
            if attempt == 0, !forceSync, remaining == 0, unlocked, try await upToDate(userId: userId) {
                return .upToDate(resolution: report)
            }
            let snapshot = try await server.sync()
            try Task.checkCancellation()
            let event: (type: VaultEventType, body: OutcomeBody)? = unlocked
                ? (.syncApplied, OutcomeBody(at: BitwardenDate(store.dependencies.now()), pendingCount: remaining)) : nil
            if try await store.replaceCiphers(userId: userId, ciphers: snapshot.ciphers, folders: snapshot.folders,
                                             ifLastSequence: lastSequence, appending: event) {
                let pending = try stillPending(userId: userId)
                if !pending.isEmpty {
                    logger.notice("sync applied; items still pending kept their local copies",
                                  metadata: ["user": "\(userId)", "pending": "\(pending.count)"])
                }
                return .applied(ciphers: snapshot.ciphers.count, stillPending: pending, resolution: report)
            }
            logger.info("an edit was saved during the sync; counting again", metadata: ["user": "\(userId)"])
        }
        return try await abort(userId: userId, report: report)
    }

    /// The items still pending: with their failures when the vault is unlocked, from headers
    /// otherwise.
    private func stillPending(userId: String) throws -> [PendingItemStatus] {
        store.isUnlocked(userId: userId)
            ? try store.projection(userId: userId).pendingItems
            : try store.pendingState(userId: userId).pendingItems
    }

    /// Whether the account has not changed since the last applied sync (false when unknown).
    private func upToDate(userId: String) async throws -> Bool {
        guard let last = try store.projection(userId: userId).lastSyncAppliedAt,
              let revision = try await server.accountRevisionDate() else { return false }
        return revision <= last.date
    }

    private func abort(userId: String, report: ResolutionReport?) async throws -> SyncResult {
        let pending = try stillPending(userId: userId)
        if store.isUnlocked(userId: userId) {
            try await store.append(userId: userId, cipherId: "", type: .syncAborted, body: .outcome(OutcomeBody(
                at: BitwardenDate(store.dependencies.now()), reason: "edits kept arriving during the sync", pendingCount: pending.count)))
        }
        logger.notice("sync aborted: edits kept arriving", metadata: ["user": "\(userId)", "pending": "\(pending.count)"])
        return .aborted(stillPending: pending, reason: .editsKeptArriving, resolution: report)
    }
}
