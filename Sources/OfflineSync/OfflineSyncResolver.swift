import Foundation
import Logging
import VaultCrypto
import VaultModel

/// Replays a user's pending offline changes against the server (`Docs/Resolution.md`): the decision
/// matrix, backups of the losing side before any destructive step, an outcome event after
/// every step, per-item catch-and-continue, bounded concurrency, backoff and dead letters.
///
/// Every step is idempotent across crashes: a create is announced (`createPlanned`, with its
/// unique encrypted name as marker) before it is posted, and a retry looks for that marker on
/// the server before posting again; a push is recognised on the server by the same marker;
/// backups are keyed by the version they preserve.
///
/// ```swift
/// let resolver = OfflineSyncResolver(store: store, server: client)
/// let report = try await resolver.processPendingChanges(userId: uid)
/// print(report.remainingCount, "still pending")
/// ```
public final class OfflineSyncResolver: Sendable {
    /// The device's store: the log it reads pending state from and appends outcomes to.
    public let store: VaultLogStore
    /// The server the pending changes are replayed against.
    public let server: any CipherServer
    /// Concurrency, retry and backup limits.
    public let options: ResolverOptions
    let logger: Logger

    /// A resolver for `store` against `server`. Share one per store and server; runs for the
    /// same user are serialised by the store (every resolver of it, in this process and in other
    /// processes on the same directory), so two callers never resolve an item twice.
    public init(store: VaultLogStore, server: any CipherServer, options: ResolverOptions = ResolverOptions(),
                logger: Logger = Logger(label: "vaultlog.resolver")) {
        precondition(options.concurrency >= 1, "resolver concurrency must be at least 1")
        precondition(options.maxAttempts >= 1, "maxAttempts must be at least 1")
        self.store = store
        self.server = server
        self.options = options
        self.logger = logger
    }

    var now: BitwardenDate { BitwardenDate(store.dependencies.now()) }

    // MARK: Run

    /// Resolves every pending item of `userId` that is due (not a dead letter, retry time
    /// reached). Throws ``OfflineSyncError/vaultLocked(userId:)`` while locked, and a
    /// ``ResolutionInterruption`` if one was raised; every other failure is recorded per item.
    ///
    /// Beside other callers: one resolution of a user runs at a time, in this process and in
    /// every process that opens the store (a lock file in its directory, released by the kernel
    /// if a process dies). A second call waits for the run in progress and then resolves what is
    /// still due (usually nothing: it never sends a change twice). A save made while the run is
    /// in progress, here or in another process, is resolved by one more pass of the run before it
    /// ends (at most three extra passes; later saves stay pending for the next call).
    @discardableResult
    public func processPendingChanges(userId: String) async throws -> ResolutionReport {
        try await store.resolutionGate.run(userId: userId, settle: options.settleAfterInterruptedRun) { takePassRequest in
            var (report, seen) = try await resolvePass(userId: userId)
            for _ in 0..<Self.maxExtraPasses {
                // Asked by a save in this process, or found: a due item with an operation the pass
                // had not seen (a save in another process, or one that superseded an outcome).
                if !takePassRequest(), try !hasNewWork(userId: userId, after: seen) { break }
                let next = try await resolvePass(userId: userId)
                report = report.updated(with: next.report)
                seen = next.seen
            }
            return report
        }
    }

    /// Passes a run makes after its first for saves made during it.
    static let maxExtraPasses = 3

    /// One pass over the items due now: the report, and the last sequence of the log it read.
    private func resolvePass(userId: String) async throws -> (report: ResolutionReport, seen: UInt64) {
        let projection = try store.projection(userId: userId)
        let userKey = try store.userKey(userId: userId)
        let now = self.now
        let ordered = projection.pending.values.sorted { ($0.versionSequences.first ?? 0) < ($1.versionSequences.first ?? 0) }
        var reports = [ItemReport?](repeating: nil, count: ordered.count)
        var due: [(Int, PendingChange)] = []
        for (index, change) in ordered.enumerated() {
            if let reason = projection.quarantined?[change.cipherId] {
                reports[index] = ItemReport(cipherId: change.cipherId, changeType: change.changeType, outcome: .skipped,
                                            error: "quarantined: \(reason); the store file was damaged (an integrity check gives a full report)")
            } else if !isDue(change, now: now) {
                reports[index] = ItemReport(cipherId: change.cipherId, changeType: change.changeType,
                                            outcome: .skipped, error: change.lastError, nextRetryAt: change.nextRetryAt)
            } else {
                due.append((index, change))
            }
        }
        guard !due.isEmpty || projection.folders != nil else {
            return (ResolutionReport(items: reports.compactMap { $0 }), projection.lastSequence)
        }
        let index = ServerIndex(server: server)
        // Folders first: an item in a folder made offline needs the folder's server id.
        let run = RunContext(userId: userId, userKey: userKey, index: index,
                             folders: try await resolveFolders(projection, userId: userId, due: due.map(\.1)))

        try await withThrowingTaskGroup(of: (Int, ItemReport).self) { group in
            var next = due.makeIterator()
            func startNext() {
                guard let (position, change) = next.next() else { return }
                group.addTask { (position, try await self.resolveItem(change, run: run)) }
            }
            for _ in 0..<min(options.concurrency, due.count) { startNext() }
            while let (position, report) = try await group.next() {
                reports[position] = report
                startNext()
            }
        }
        try await recheckFolders(run)
        return (ResolutionReport(items: reports.compactMap { $0 }, folders: run.folders.reports), projection.lastSequence)
    }

    private func isDue(_ change: PendingChange, now: BitwardenDate) -> Bool {
        !change.isDeadLetter && !(change.nextRetryAt.map { $0 > now } ?? false)
    }

    /// Whether a due, unquarantined item has an operation after `sequence`.
    private func hasNewWork(userId: String, after sequence: UInt64) throws -> Bool {
        let projection = try store.projection(userId: userId)
        guard projection.lastSequence > sequence else { return false }
        let now = self.now
        return projection.pending.values.contains {
            ($0.versionSequences.last ?? 0) > sequence && isDue($0, now: now) && !projection.isQuarantined($0.cipherId)
        }
    }

    /// Resolves one item now, whatever its retry time or dead-letter state: what the
    /// repository does right after the user changed an item that had pending state, so that
    /// every rule (backups, overflow copies, ordering, conflicts) applies on one path. Returns
    /// nil when nothing is pending for `cipherId`. Throws only ``OfflineSyncError/vaultLocked(userId:)``
    /// and ``ResolutionInterruption``s; other failures are recorded for the item.
    ///
    /// Beside other callers: it goes through the same one-at-a-time gate as
    /// ``processPendingChanges(userId:)``. If a resolution of the user is in progress it does not
    /// wait and returns nil (the item stays pending): a run in this process resolves the item
    /// in one more pass before it ends, and a run in another process looks for such saves before
    /// it ends too. With `waitForRun`, it waits for that run and then resolves the item.
    @discardableResult
    public func resolve(userId: String, cipherId: String, waitForRun: Bool = false) async throws -> ItemReport? {
        if waitForRun {
            return try await store.resolutionGate.run(userId: userId, settle: options.settleAfterInterruptedRun) { _ in
                try await resolveOne(userId: userId, cipherId: cipherId)
            }
        }
        return try await store.resolutionGate.tryRun(userId: userId, settle: options.settleAfterInterruptedRun) {
            try await resolveOne(userId: userId, cipherId: cipherId)
        } ?? nil
    }

    private func resolveOne(userId: String, cipherId: String) async throws -> ItemReport? {
        let projection = try store.projection(userId: userId)
        guard let change = projection.pending[cipherId], !projection.isQuarantined(cipherId) else { return nil }
        // The user just saved: if the server is out of reach the edit is simply saved offline,
        // with no failure recorded (a sync will try again).
        let run = RunContext(userId: userId, userKey: try store.userKey(userId: userId), index: ServerIndex(server: server),
                             recordsUnreachable: false, folders: try await resolveFolders(projection, userId: userId, due: [change]))
        let report = try await resolveItem(change, run: run)
        try await recheckFolders(run)
        return report
    }

    /// Puts dead-lettered (or backing-off) items back into automatic retries: appends
    /// `retryRequested` for each (all pending items when `cipherIds` is nil). Blocks on the
    /// commit (an fsync): from async code (an app's UI) the async form is chosen.
    @available(*, noasync, message: "use the async form: this one blocks on the commit")
    public func retryDeadLetters(userId: String, cipherIds: [String]? = nil) throws {
        let events = try retryEvents(userId: userId, cipherIds: cipherIds)
        if !events.isEmpty { try store.append(userId: userId, events: events) }
    }

    /// The `retryRequested` events for `retryDeadLetters(userId:cipherIds:)`.
    func retryEvents(userId: String, cipherIds: [String]?) throws -> [VaultLogStore.PlannedEvent] {
        let projection = try store.projection(userId: userId)
        let at = now
        return projection.pending.values
            .filter { cipherIds?.contains($0.cipherId) ?? ($0.isDeadLetter || $0.nextRetryAt != nil) }
            .sorted { $0.cipherId < $1.cipherId }
            .map { .init(cipherId: $0.cipherId, type: .retryRequested, body: .outcome(OutcomeBody(at: at, reason: "retry requested"))) }
    }

    /// Pending items, dead letters and retry times of `userId` (needs the vault unlocked).
    public func status(userId: String) throws -> [PendingChange] {
        try store.projection(userId: userId).pending.values.sorted { ($0.versionSequences.first ?? 0) < ($1.versionSequences.first ?? 0) }
    }

    // MARK: One item

    struct RunContext: Sendable {
        let userId: String
        let userKey: SymmetricCryptoKey
        let index: ServerIndex
        /// Whether a failure to reach the server is recorded (`resolutionFailed`, not counted
        /// as an attempt). Runs started by a save do not record it.
        var recordsUnreachable = true
        /// Folder ids the items are sent with (set by the folder pass).
        var folders = FolderContext()
    }

    /// One item's state during a run: its pending change and the steps recorded so far.
    struct Item {
        let change: PendingChange
        var steps: [ResolutionStep]
        var report: ItemReport
        var id: String { change.cipherId }
        var latest: Cipher { change.latest }
        var latestSequence: UInt64 { change.versionSequences.last ?? 0 }
        /// Password changes in versions the server has not been sent yet: after a push that a
        /// newer save superseded (``ItemReport/newerVersionPending``), only the later ones count
        /// towards the soft-conflict threshold (the server copy then is this device's own).
        var passwordChangesSincePush: Int {
            guard let pushedThrough = steps.last(where: { $0.type == .pushed })?.outcome.sourceSequence else {
                return change.offlinePasswordChangeCount
            }
            return change.passwordChangeSequences.filter { $0 > pushedThrough }.count
        }
        /// The server copy an earlier attempt mapped this item to (a re-create, or a create
        /// found on the server), with its revision then.
        var mappedServerCopy: (serverId: String, revisionDate: BitwardenDate?)? {
            guard let outcome = steps.last(where: { $0.type == .idMapped })?.outcome, let serverId = outcome.serverId else { return nil }
            return (serverId, outcome.revisionDate)
        }
    }

    func resolveItem(_ original: PendingChange, run: RunContext) async throws -> ItemReport {
        guard let (change, lostFolder) = withServerFolder(original, run: run) else {
            return ItemReport(cipherId: original.cipherId, changeType: original.changeType, outcome: .skipped,
                              error: "waiting for its folder, created offline, to reach the server")
        }
        var item = Item(change: change, steps: change.steps,
                        report: ItemReport(cipherId: change.cipherId, changeType: change.changeType, outcome: .failed))
        do {
            if let lostFolder { try await recordLostFolder(&item, folderId: lostFolder, run: run) }
            switch change.changeType {
            case .create: item.report.outcome = try await resolveCreate(&item, run: run)
            case .update:
                if let mapped = item.mappedServerCopy {
                    // An earlier attempt re-created it (and may have pushed to the copy since):
                    // the copy is the item now; the original id is gone from the server.
                    item.report.outcome = try await resolveUpdate(&item, serverId: mapped.serverId, base: mapped.revisionDate,
                                                                  createChain: true, run: run)
                } else {
                    item.report.outcome = try await resolveUpdate(&item, serverId: change.cipherId,
                                                                  base: change.originalRevisionDate, run: run)
                }
            case .softDelete where change.uncertainCreate, .hardDelete where change.uncertainCreate:
                item.report.outcome = try await resolveDeleteOfUncertainCreate(&item, run: run)
            case .softDelete, .hardDelete: item.report.outcome = try await resolveDelete(&item, run: run)
            }
            return item.report
        } catch let interruption as any ResolutionInterruption {
            throw interruption
        } catch {
            return try await recordFailure(&item, error: error, run: run)
        }
    }

    func recordFailure(_ item: inout Item, error: any Error, run: RunContext) async throws -> ItemReport {
        let at = now
        // Only the server's answers about the item count: a server out of reach says nothing
        // about it (retried at the next sync, never dead-lettered), nor does a stale answer.
        // A session to log in again is not an answer about the item either.
        let counts = !(error is StaleRetriesExhausted) && error.countsAsAttempt && error.serverErrorKind != .loginRequired
        // Out of reach: recorded once while it lasts (a day offline is one event, not 48),
        // and not at all when a save started the run.
        let unreachable = !counts && !(error is StaleRetriesExhausted)
        if unreachable && (!run.recordsUnreachable || item.change.waitingForServer == true) {
            item.report.outcome = .failed
            item.report.error = "\(error)"
            return item.report
        }
        let attempt = counts ? item.change.attempts + 1 : item.change.attempts
        let deadLetter = counts && attempt >= options.maxAttempts
        let nextRetry: BitwardenDate? = deadLetter ? nil : (counts ? BitwardenDate(at.date.addingTimeInterval(backoff(attempt: attempt))) : at)
        logger.warning("resolution failed", metadata: ["cipher": "\(item.id)", "attempt": "\(attempt)",
                                                       "deadLetter": "\(deadLetter)", "error": "\(error)"])
        try await record(&item, .resolutionFailed, OutcomeBody(
            at: at, reason: "\(error)", attempt: attempt, nextRetryAt: nextRetry, deadLetter: deadLetter,
            serverUnreachable: unreachable ? true : nil), run: run)
        item.report.outcome = deadLetter ? .deadLetter : .failed
        item.report.error = "\(error)"
        item.report.nextRetryAt = nextRetry
        return item.report
    }

    /// Seconds until the next attempt after `attempt` failures.
    func backoff(attempt: Int) -> TimeInterval {
        let exponential = min(options.backoffMax, options.backoffBase * pow(2, Double(max(0, attempt - 1))))
        let bytes = store.dependencies.random.bytes(2)
        let unit = Double(UInt16(bytes[0]) << 8 | UInt16(bytes[1])) / Double(UInt16.max)
        return exponential * (1 + options.jitter * unit)
    }
}
