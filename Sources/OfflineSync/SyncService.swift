import Foundation
import Logging
import VaultModel

/// The result of ``SyncService/fetchSync(userId:forceSync:)``.
public enum SyncResult: Sendable, Equatable {
    /// The server's items replaced the local store (pending local copies kept).
    case applied(ciphers: Int, resolution: ResolutionReport?)
    /// Changes are still pending: the sync was aborted so nothing local is overwritten. The
    /// reasons are in the log too (`syncAborted`) and in the report.
    case aborted(pendingCount: Int, reasons: [String], resolution: ResolutionReport?)
    /// Not forced, and the account has not changed since the last applied sync: nothing fetched.
    case upToDate(resolution: ResolutionReport?)

    /// True when the server's items were applied.
    public var isApplied: Bool {
        if case .applied = self { return true }
        return false
    }

    /// True unless the sync was aborted: the local store matches the server.
    public var isCurrent: Bool {
        if case .aborted = self { return false }
        return true
    }

    /// The resolution run before the sync, if any.
    public var resolution: ResolutionReport? {
        switch self {
        case .applied(_, let report), .aborted(_, _, let report), .upToDate(let report): report
        }
    }
}

/// A full sync that never overwrites a pending local edit (`Docs/Resolution.md`):
///
/// 1. vault locked → no resolution (it needs the keys); the sync itself still runs, and
///    pending items keep their local copies;
/// 2. pre-count pending items (from the authenticated log: the unsealed pending checkpoint is
///    only a hint for a locked vault's badge); if any, resolve them, then count again;
/// 3. anything still pending → abort, appending `syncAborted` with the count and reasons;
/// 4. otherwise fetch `/api/sync` and replace the local store, only if the log's last
///    sequence is still the one seen at the count, checked inside the same write
///    transaction (closes the race between counting and replacing: an edit saved meanwhile is never overwritten).
///
/// ```swift
/// let sync = SyncService(store: store, server: client, resolver: resolver)
/// switch try await sync.fetchSync(userId: uid) {
/// case .applied, .upToDate: break
/// case .aborted(let count, let reasons, _): show("\(count) changes still pending", reasons)
/// }
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

    /// Resolves pending changes, then syncs unless something is still pending. Like a Bitwarden
    /// client's `needsSync`: with `forceSync` the server's items are always fetched; without it the
    /// fetch is skipped (``SyncResult/upToDate(resolution:)``) when the account's revision date
    /// (`GET /api/accounts/revision-date`) is not newer than the last applied sync. Pending
    /// changes are resolved first either way.
    ///
    /// Beside other callers (a timer's sync and a pull-to-refresh together, another process on
    /// the store): the resolution step waits for any resolution of the user in progress and
    /// never sends a change twice; the replace is skipped and counted again when anything was
    /// appended since the count, so a save made during the sync is never overwritten.
    @discardableResult
    public func fetchSync(userId: String, forceSync: Bool = false) async throws -> SyncResult {
        let unlocked = store.isUnlocked(userId: userId)
        var report: ResolutionReport?
        // Decisions read the authenticated pending state, never the unsealed pending checkpoint.
        if unlocked && flags.resolution, try store.pendingState(userId: userId).count > 0 {
            report = try await resolver.processPendingChanges(userId: userId)
        }
        for attempt in 0..<Self.maxReplaceAttempts {
            // The last sequence first: the state read after it covers at least that much, and
            // the replace below proceeds only if nothing was appended since.
            let lastSequence = try store.log.lastSequence()
            let remaining = try store.pendingState(userId: userId).count
            if remaining > 0 && unlocked && flags.resolution {
                return try await abort(userId: userId, report: report)
            }
            if attempt == 0, !forceSync, remaining == 0, unlocked, try await upToDate(userId: userId) {
                return .upToDate(resolution: report)
            }
            let snapshot = try await server.sync()
            let event: (type: VaultEventType, body: OutcomeBody)? = unlocked
                ? (.syncApplied, OutcomeBody(at: BitwardenDate(store.dependencies.now()), pendingCount: remaining)) : nil
            if try await store.replaceCiphers(userId: userId, ciphers: snapshot.ciphers, ifLastSequence: lastSequence, appending: event) {
                return .applied(ciphers: snapshot.ciphers.count, resolution: report)
            }
            logger.info("an edit was saved during the sync; counting again", metadata: ["user": "\(userId)"])
        }
        return try await abort(userId: userId, report: report, extra: "edits kept arriving during the sync")
    }

    /// Whether the account has not changed since the last applied sync (false when unknown).
    private func upToDate(userId: String) async throws -> Bool {
        guard let last = try store.projection(userId: userId).lastSyncAppliedAt,
              let revision = try await server.accountRevisionDate() else { return false }
        return revision <= last.date
    }

    private func abort(userId: String, report: ResolutionReport?, extra: String? = nil) async throws -> SyncResult {
        guard store.isUnlocked(userId: userId) else {
            // Locked: no key to read the reasons or seal an event; headers still give the count.
            let count = try store.pendingCount(userId: userId)
            return .aborted(pendingCount: count, reasons: [extra ?? "\(count) changes pending"], resolution: report)
        }
        let projection = try store.projection(userId: userId)
        let pending = projection.pending.values.sorted { $0.cipherId < $1.cipherId }
        var reasons = pending.map { change -> String in
            var text = "\(change.cipherId): \(change.changeType.rawValue) pending"
            if let reason = projection.quarantined?[change.cipherId] { text += ", quarantined (\(reason))" }
            if change.isDeadLetter { text += ", dead letter after \(change.attempts) attempts" }
            else if let next = change.nextRetryAt { text += ", retry at \(next)" }
            if let error = change.lastError { text += " (\(error))" }
            return text
        }
        if let extra { reasons.append(extra) }
        try await store.append(userId: userId, cipherId: "", type: .syncAborted, body: .outcome(OutcomeBody(
            at: BitwardenDate(store.dependencies.now()), reason: reasons.joined(separator: "; "), pendingCount: pending.count)))
        logger.notice("sync aborted: changes still pending", metadata: ["user": "\(userId)", "pending": "\(pending.count)"])
        return .aborted(pendingCount: pending.count, reasons: reasons, resolution: report)
    }
}
