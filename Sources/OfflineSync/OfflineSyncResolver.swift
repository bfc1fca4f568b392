import Foundation
import Logging
import VaultCrypto
import VaultModel

/// Options of ``OfflineSyncResolver``. Every limit is named here with its reason.
public struct ResolverOptions: Sendable {
    /// Items resolved at the same time (different ciphers; one item's steps stay in order).
    /// Resolution is bound by server round trips (2 per item), so 16 in flight turns 1,000
    /// items at 20 ms latency from ~40 s into a few seconds without loading a server more than a
    /// browser tab does. 1 reproduces the serial algorithm and makes the log
    /// byte-for-byte reproducible.
    public var concurrency = 16
    /// Failed attempts after which an item becomes a dead letter: still pending, reported,
    /// excluded from automatic retries until ``OfflineSyncResolver/retryDeadLetters(userId:cipherIds:)``.
    public var maxAttempts = 6
    /// Backoff after the n-th failure: `base * 2^(n-1)`, capped at `backoffMax`, plus up to
    /// `jitter` of itself (drawn from the injected randomness, so replays are deterministic).
    public var backoffBase: TimeInterval = 30
    public var backoffMax: TimeInterval = 6 * 3600
    public var jitter = 0.25
    /// Re-reads after a 400 "out of date" before the run gives up on the item (it stays
    /// pending with an immediate retry; a stale answer never counts towards dead-lettering).
    public var staleRetryLimit = 3
    /// Offline password changes that make a backup of the server copy even without a
    /// conflict (the 5-entry history would otherwise lose intermediate passwords).
    public var softConflictPasswordChangeThreshold = 4
    /// Called right after each server side effect succeeded and before its outcome event is
    /// appended. Tests throw a ``ResolutionInterruption`` here to simulate a crash.
    public var afterServerEffect: (@Sendable (ServerEffect) throws -> Void)?

    public init() {}
}

/// A side effect on the server, reported to ``ResolverOptions/afterServerEffect``.
public enum ServerEffect: Sendable, Equatable, CustomStringConvertible {
    /// A POST.
    case created(cipherId: String, purpose: CreatePurpose, serverId: String)
    /// A PUT of the local version.
    case updated(cipherId: String)
    /// A soft or permanent delete.
    case deleted(cipherId: String, permanent: Bool)

    public var description: String {
        switch self {
        case .created(let id, let purpose, let serverId): "POST \(purpose) for \(id) → \(serverId)"
        case .updated(let id): "PUT \(id)"
        case .deleted(let id, let permanent): permanent ? "DELETE \(id)" : "soft delete \(id)"
        }
    }
}

/// An error that stops a resolution run at once, recording nothing (a simulated crash). Any
/// other error is caught per item, recorded as `resolutionFailed`, and the run continues.
public protocol ResolutionInterruption: Error {}

/// What happened to one pending item in a run.
public struct ItemReport: Sendable, Equatable {
    /// How the item ended the run.
    public enum Outcome: String, Sendable, Equatable {
        /// The local version is on the server (update or create).
        case pushed
        /// Created on the server (new id in ``serverId``).
        case created
        /// The server had lost it; created again.
        case recreated
        /// The server's copy won; the local version is in a backup.
        case serverKept
        /// The delete was applied (or the server had already trashed it).
        case deleted
        /// The server copy changed; the delete was dropped and the copy restored locally.
        case deleteDropped
        /// The server no longer had the item; cleaned up locally.
        case cleanedUp
        /// The attempt failed; the item stays pending and is retried after ``nextRetryAt``.
        case failed
        /// Failed too often: still pending, out of automatic retries.
        case deadLetter
        /// Not attempted: waiting for its next retry time, or a dead letter.
        case skipped
    }

    public var cipherId: String
    public var changeType: PendingChangeType
    public var outcome: Outcome
    /// The server id after the run (creates, re-creates).
    public var serverId: String?
    /// Server ids of backups made in this run.
    public var backupIds: [String] = []
    /// The error of a failed attempt.
    public var error: String?
    public var nextRetryAt: BitwardenDate?
}

/// The result of ``OfflineSyncResolver/processPendingChanges(userId:)``.
public struct ResolutionReport: Sendable, Equatable {
    /// One entry per pending item, in the order they were first edited.
    public var items: [ItemReport] = []

    /// Items no longer pending.
    public var resolvedCount: Int { items.filter { ![.failed, .deadLetter, .skipped].contains($0.outcome) }.count }
    /// Items still pending after the run.
    public var remainingCount: Int { items.count - resolvedCount }
}

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
    public let store: VaultLogStore
    public let server: any CipherServer
    public let options: ResolverOptions
    let logger: Logger

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
    @discardableResult
    public func processPendingChanges(userId: String) async throws -> ResolutionReport {
        let projection = try store.projection(userId: userId)
        let userKey = try store.userKey(userId: userId)
        let now = self.now
        let ordered = projection.pending.values.sorted { ($0.versionSequences.first ?? 0) < ($1.versionSequences.first ?? 0) }
        var reports = [ItemReport?](repeating: nil, count: ordered.count)
        var due: [(Int, PendingChange)] = []
        for (index, change) in ordered.enumerated() {
            if let reason = projection.quarantined?[change.cipherId] {
                reports[index] = ItemReport(cipherId: change.cipherId, changeType: change.changeType, outcome: .skipped,
                                            error: "quarantined: \(reason); run 'vaultlog verify'")
            } else if change.isDeadLetter || (change.nextRetryAt.map { $0 > now } ?? false) {
                reports[index] = ItemReport(cipherId: change.cipherId, changeType: change.changeType,
                                            outcome: .skipped, error: change.lastError, nextRetryAt: change.nextRetryAt)
            } else {
                due.append((index, change))
            }
        }
        guard !due.isEmpty else { return ResolutionReport(items: reports.compactMap { $0 }) }
        let index = ServerIndex(server: server)
        let run = RunContext(userId: userId, userKey: userKey, index: index)

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
        return ResolutionReport(items: reports.compactMap { $0 })
    }

    /// Resolves one item now, whatever its retry time or dead-letter state: what the
    /// repository does right after the user changed an item that had pending state, so that
    /// every rule (backups, overflow copies, ordering, conflicts) applies on one path. Returns
    /// nil when nothing is pending for `cipherId`. Throws only ``OfflineSyncError/vaultLocked(userId:)``
    /// and ``ResolutionInterruption``s; other failures are recorded for the item.
    @discardableResult
    public func resolve(userId: String, cipherId: String) async throws -> ItemReport? {
        let projection = try store.projection(userId: userId)
        guard let change = projection.pending[cipherId], !projection.isQuarantined(cipherId) else { return nil }
        // The user just saved: if the server is out of reach the edit is simply saved offline,
        // with no failure recorded (a sync will try again).
        let run = RunContext(userId: userId, userKey: try store.userKey(userId: userId), index: ServerIndex(server: server),
                             recordsUnreachable: false)
        return try await resolveItem(change, run: run)
    }

    /// Puts dead-lettered (or backing-off) items back into automatic retries: appends
    /// `retryRequested` for each (all pending items when `cipherIds` is nil).
    public func retryDeadLetters(userId: String, cipherIds: [String]? = nil) throws {
        let projection = try store.projection(userId: userId)
        let targets = projection.pending.values
            .filter { cipherIds?.contains($0.cipherId) ?? ($0.isDeadLetter || $0.nextRetryAt != nil) }
            .sorted { $0.cipherId < $1.cipherId }
        guard !targets.isEmpty else { return }
        let at = now
        try store.append(userId: userId, events: targets.map {
            .init(cipherId: $0.cipherId, type: .retryRequested, body: .outcome(OutcomeBody(at: at, reason: "retry requested")))
        })
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
    }

    /// One item's state during a run: its pending change and the steps recorded so far.
    struct Item {
        let change: PendingChange
        var steps: [ResolutionStep]
        var report: ItemReport
        var id: String { change.cipherId }
        var latest: Cipher { change.latest }
        var latestSequence: UInt64 { change.versionSequences.last ?? 0 }
        /// The server copy an earlier attempt mapped this item to (a re-create, or a create
        /// found on the server), with its revision then.
        var mappedServerCopy: (serverId: String, revisionDate: BitwardenDate?)? {
            guard let outcome = steps.last(where: { $0.type == .idMapped })?.outcome, let serverId = outcome.serverId else { return nil }
            return (serverId, outcome.revisionDate)
        }
    }

    private func resolveItem(_ change: PendingChange, run: RunContext) async throws -> ItemReport {
        var item = Item(change: change, steps: change.steps,
                        report: ItemReport(cipherId: change.cipherId, changeType: change.changeType, outcome: .failed))
        do {
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

    private func recordFailure(_ item: inout Item, error: any Error, run: RunContext) async throws -> ItemReport {
        let at = now
        // Only the server's answers about the item count: a server out of reach says nothing
        // about it (retried at the next sync, never dead-lettered), nor does a stale answer.
        let counts = !(error is StaleRetriesExhausted) && error.countsAsAttempt
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

    // MARK: Create

    private func resolveCreate(_ item: inout Item, run: RunContext) async throws -> ItemReport.Outcome {
        // An earlier attempt already created it: continue as an update of the server copy.
        if let mapped = item.steps.last(where: { $0.type == .idMapped })?.outcome, let serverId = mapped.serverId {
            return try await resolveUpdate(&item, serverId: serverId, base: mapped.revisionDate, createChain: true, run: run)
        }
        // A create whose response was lost (here or in the repository) is on the server under
        // one of these unique encrypted names.
        var markers = plannedMarkers(item, purpose: .create)
        if let first = item.change.versionSequences.first,
           let name = try store.event(at: first, userId: run.userId)?.operation?.cipher.name { markers.append(name) }
        if let name = item.latest.name { markers.append(name) }
        if let found = try await run.index.find(markers) {
            return try await adoptCreated(&item, found, purpose: .create, run: run)
        }
        _ = try await preserveOverflowPasswords(&item, alsoPreservedBy: [], run: run)
        let created = try await createOnce(&item, purpose: .create, payload: item.latest, run: run)
        return try await adoptCreated(&item, created, purpose: .create, run: run)
    }

    /// Records the server id of a created (or found) copy; finishes the item when the copy
    /// holds the latest version, else pushes the later edits as an update.
    private func adoptCreated(_ item: inout Item, _ created: Cipher, purpose: CreatePurpose, run: RunContext) async throws -> ItemReport.Outcome {
        guard let serverId = created.id else { throw ServerFailure(.unavailable, "the server answered a create without an id") }
        item.report.serverId = serverId
        let mappedType: VaultEventType = purpose == .recreate ? .recreated : .idMapped
        let mapped = OutcomeBody(at: now, serverId: serverId, revisionDate: created.revisionDate, reason: purpose.description)
        guard let name = item.latest.name, created.name == name else {
            // Edited after the create was sent: the copy on the server is older.
            try await record(&item, .idMapped, mapped, run: run)
            return try await resolveUpdate(&item, serverId: serverId, base: created.revisionDate,
                                           createChain: item.change.startedAsCreate ?? (item.change.changeType == .create), run: run)
        }
        var events: [(VaultEventType, OutcomeBody)] = [(.idMapped, mapped)]
        if mappedType == .recreated { events.insert((.recreated, mapped), at: 0) }
        events.append((.resolved, OutcomeBody(at: now, serverId: serverId, revisionDate: created.revisionDate, reason: purpose.description)))
        try await record(&item, events, local: replacing(item.id, with: created), run: run)
        return purpose == .recreate ? .recreated : .created
    }

    // MARK: Update

    struct StaleRetriesExhausted: Error, CustomStringConvertible {
        let cipherId: String
        let attempts: Int
        var description: String {
            "item \(cipherId) kept changing on the server (\(attempts) 'out of date' answers in a row); it stays pending and is retried on the next sync"
        }
    }

    private func resolveUpdate(_ item: inout Item, serverId: String, base: BitwardenDate?, createChain: Bool = false,
                               run: RunContext) async throws -> ItemReport.Outcome {
        let ownNames = try ownNames(item, run: run)
        var staleAnswers = 0
        while true {
            let serverCopy: Cipher
            do {
                serverCopy = try await server.getCipher(id: serverId)
            } catch where error.serverErrorKind == .notFound {
                return try await recreate(&item, run: run)
            }
            let decision = UpdateDecision.decide(
                latest: item.latest, base: base, localUpdatedAt: item.change.updatedAt,
                passwordChanges: item.change.offlinePasswordChangeCount, server: serverCopy,
                softConflictThreshold: options.softConflictPasswordChangeThreshold, ownNames: ownNames, createChain: createChain)
            switch decision {
            case .alreadyApplied:
                // Our PUT was applied but its answer lost: the passwords the 5-entry history
                // cannot hold still need their copy (the backups made before the PUT count).
                _ = try await preserveOverflowPasswords(&item, alsoPreservedBy: recordedBackups(item), run: run)
                try await record(&item, [(.pushed, OutcomeBody(at: now, serverId: serverId, revisionDate: serverCopy.revisionDate,
                                                               reason: "the server already holds the latest local version")),
                                         (.resolved, OutcomeBody(at: now, serverId: serverId))],
                                 local: replacing(item.id, with: serverCopy), run: run)
                return .pushed

            case .keepServer(let reason):
                let backup = try await ensureBackup(&item, of: item.latest, side: .local, timestamp: item.change.updatedAt,
                                                    sourceRevision: nil, sourceSequence: item.latestSequence, reason: reason, run: run)
                _ = try await preserveOverflowPasswords(&item, alsoPreservedBy: [backup, serverCopy], run: run)
                try await record(&item, [(.serverCopyKept, OutcomeBody(at: now, serverId: serverId, revisionDate: serverCopy.revisionDate, reason: reason)),
                                         (.resolved, OutcomeBody(at: now, serverId: serverId))],
                                 local: replacing(item.id, with: serverCopy), run: run)
                return .serverKept

            case .pushLocal(let backupServer, let reason):
                var preserved: [Cipher] = []
                if backupServer, let revision = serverCopy.revisionDate {
                    preserved.append(try await ensureBackup(&item, of: serverCopy, side: .server, timestamp: revision,
                                                            sourceRevision: revision, sourceSequence: nil, reason: reason, run: run))
                }
                _ = try await preserveOverflowPasswords(&item, alsoPreservedBy: preserved, run: run)
                var payload = item.latest
                payload.id = serverId
                let updated: Cipher
                do {
                    updated = try await server.updateCipher(payload, lastKnownRevisionDate: serverCopy.revisionDate)
                } catch where error.serverErrorKind == .staleRevision {
                    // Another device wrote between our read and our write: read again, decide again.
                    staleAnswers += 1
                    logger.info("server copy changed during resolution; deciding again", metadata: ["cipher": "\(item.id)"])
                    if staleAnswers > options.staleRetryLimit { throw StaleRetriesExhausted(cipherId: item.id, attempts: staleAnswers) }
                    continue
                }
                try options.afterServerEffect?(.updated(cipherId: item.id))
                try await record(&item, [(.pushed, OutcomeBody(at: now, serverId: serverId, revisionDate: updated.revisionDate, reason: reason)),
                                         (.resolved, OutcomeBody(at: now, serverId: serverId))],
                                 local: replacing(item.id, with: updated), run: run)
                return .pushed
            }
        }
    }

    /// The server lost the item (404): create the local version again, under a new id. With
    /// `thenTrash` (a trash move that carried edits) the new copy is moved to the trash again.
    private func recreate(_ item: inout Item, thenTrash: Bool = false, run: RunContext) async throws -> ItemReport.Outcome {
        var created: Cipher
        if let found = try await run.index.find(plannedMarkers(item, purpose: .recreate)) {
            created = found
            if thenTrash, let serverId = found.id, found.name != item.latest.name {
                // The copy an earlier attempt posted holds the version planned then; the item
                // was edited since. Record the copy as the item, then resolve the trash move
                // against it: the later edits are pushed before it goes to the trash.
                item.report.serverId = serverId
                let mapped = OutcomeBody(at: now, serverId: serverId, revisionDate: found.revisionDate, reason: "recreate")
                try await record(&item, [(.recreated, mapped), (.idMapped, mapped)], local: [], run: run)
                return try await resolveDelete(&item, serverId: serverId, base: found.revisionDate, createChain: true, run: run)
            }
        } else {
            _ = try await preserveOverflowPasswords(&item, alsoPreservedBy: [], run: run)
            var payload = item.latest
            payload.deletedDate = nil
            created = try await createOnce(&item, purpose: .recreate, payload: payload, run: run)
        }
        guard thenTrash else { return try await adoptCreated(&item, created, purpose: .recreate, run: run) }
        guard let serverId = created.id else { throw ServerFailure(.unavailable, "the server answered a create without an id") }
        item.report.serverId = serverId
        if created.deletedDate == nil {
            try await server.softDeleteCipher(id: serverId)
            try options.afterServerEffect?(.deleted(cipherId: item.id, permanent: false))
            created.deletedDate = now
        }
        let mapped = OutcomeBody(at: now, serverId: serverId, revisionDate: created.revisionDate, reason: "recreate")
        try await record(&item, [(.recreated, mapped), (.idMapped, mapped),
                                 (.deleteApplied, OutcomeBody(at: now, serverId: serverId, reason: "re-created and moved to the trash again")),
                                 (.resolved, OutcomeBody(at: now, serverId: serverId))],
                         local: replacing(item.id, with: created), run: run)
        return .deleted
    }

    /// The encrypted names (serialized) of every version of this change, read from the log:
    /// each encryption is unique, so a server copy carrying one of them was written (or
    /// trashed) by this device, never by another one.
    private func ownNames(_ item: Item, run: RunContext) throws -> Set<String> {
        Set(try item.change.versionSequences.compactMap {
            try store.event(at: $0, userId: run.userId)?.operation?.cipher.name?.serialized
        })
    }

    // MARK: Delete

    /// Backups already on the server for this change (conflict backups and overflow copies).
    private func recordedBackups(_ item: Item) -> [Cipher] {
        item.steps.filter { $0.type == .backupCreated }.compactMap { $0.outcome.cipher }
    }

    private func resolveDelete(_ item: inout Item, run: RunContext) async throws -> ItemReport.Outcome {
        if let mapped = item.mappedServerCopy {
            // Re-created by an earlier attempt: the delete applies to that copy.
            return try await resolveDelete(&item, serverId: mapped.serverId, base: mapped.revisionDate, createChain: true, run: run)
        }
        return try await resolveDelete(&item, serverId: item.id, base: item.change.originalRevisionDate,
                                       createChain: item.change.startedAsCreate ?? false, run: run)
    }

    /// A create that may have reached the server, deleted by the user before it was resolved:
    /// the server copy (mapped earlier, or found by the encrypted name of any version this
    /// device sent) is deleted too; when no copy exists the create never arrived.
    private func resolveDeleteOfUncertainCreate(_ item: inout Item, run: RunContext) async throws -> ItemReport.Outcome {
        if let mapped = item.steps.last(where: { $0.type == .idMapped })?.outcome, let serverId = mapped.serverId {
            return try await resolveDelete(&item, serverId: serverId, base: mapped.revisionDate, createChain: true, run: run)
        }
        var markers = plannedMarkers(item, purpose: .create)
        markers += try ownNames(item, run: run).sorted().compactMap { try? EncString($0) }
        if let found = try await run.index.find(markers), let serverId = found.id {
            try await record(&item, .idMapped, OutcomeBody(at: now, serverId: serverId, revisionDate: found.revisionDate,
                                                           reason: "a create whose answer was lost, found on the server"), run: run)
            return try await resolveDelete(&item, serverId: serverId, base: found.revisionDate, createChain: true, run: run)
        }
        try await record(&item, [(.cleanedUp, OutcomeBody(at: now, reason: "the create never reached the server")),
                                 (.resolved, OutcomeBody(at: now))],
                         local: [.delete(cipherId: item.id)], run: run)
        return .cleanedUp
    }

    private func resolveDelete(_ item: inout Item, serverId id: String, base: BitwardenDate?, createChain: Bool,
                               run: RunContext) async throws -> ItemReport.Outcome {
        // A copy, not reads through `item`: Swift 6.3's optimizer crashed (SIL ownership
        // verifier) on borrows of `item.change`'s optionals across the awaits below.
        let change = item.change
        let permanent = change.changeType == .hardDelete
        let ownNames = try ownNames(item, run: run)
        var staleAnswers = 0
        while true {
            var serverCopy: Cipher?
            do {
                serverCopy = try await server.getCipher(id: id)
            } catch where error.serverErrorKind == .notFound {
                serverCopy = nil
            }
            let decision = DeleteDecision.decide(
                changeType: change.changeType, latest: change.latest, base: base, hasEdits: change.hasEdits, server: serverCopy,
                passwordChanges: change.offlinePasswordChangeCount, softConflictThreshold: options.softConflictPasswordChangeThreshold,
                ownNames: ownNames, createChain: createChain)
            switch decision {
            case .cleanUp:
                try await record(&item, [(.cleanedUp, OutcomeBody(at: now, reason: "the server no longer has the item")),
                                         (.resolved, OutcomeBody(at: now))],
                                 local: [.delete(cipherId: item.id)] + (id == item.id ? [] : [.delete(cipherId: id)]), run: run)
                return .cleanedUp

            case .recreateAndTrash:
                // Edited, then trashed, while another device deleted it for good: the edits
                // are a version the user saved, so it comes back, in the trash.
                return try await recreate(&item, thenTrash: true, run: run)

            case .alreadyApplied:
                let copy = serverCopy!
                _ = try await preserveOverflowPasswords(&item, alsoPreservedBy: recordedBackups(item) + [copy], run: run)
                try await record(&item, [(.deleteApplied, OutcomeBody(at: now, revisionDate: copy.revisionDate,
                                                                       reason: "already in the server's trash")),
                                         (.resolved, OutcomeBody(at: now))],
                                 local: replacing(item.id, with: copy), run: run)
                return .deleted

            case .drop(let backupLocal):
                let copy = serverCopy!
                if backupLocal {
                    // Edits made before the trash move are a version the user saved: keep them.
                    var edited = change.latest
                    edited.deletedDate = nil
                    let backup = try await ensureBackup(&item, of: edited, side: .local, timestamp: change.updatedAt,
                                                        sourceRevision: nil, sourceSequence: item.latestSequence,
                                                        reason: "edits made before a dropped trash move", run: run)
                    _ = try await preserveOverflowPasswords(&item, alsoPreservedBy: [backup, copy], run: run)
                }
                try await record(&item, [(.deleteDropped, OutcomeBody(at: now, revisionDate: copy.revisionDate,
                                                                      reason: "the server copy changed since the delete; restored locally")),
                                         (.resolved, OutcomeBody(at: now))],
                                 local: replacing(item.id, with: copy), run: run)
                return .deleteDropped

            case .apply(let pushEdits, let backupServer):
                let copy = serverCopy!
                if pushEdits {
                    var preserved: [Cipher] = []
                    if backupServer, let revision = copy.revisionDate {
                        preserved.append(try await ensureBackup(&item, of: copy, side: .server, timestamp: revision,
                                                                sourceRevision: revision, sourceSequence: nil,
                                                                reason: "soft conflict: \(change.offlinePasswordChangeCount) offline password changes before a trash move",
                                                                run: run))
                    }
                    _ = try await preserveOverflowPasswords(&item, alsoPreservedBy: preserved, run: run)
                    // Edits made before the trash move: the server keeps them in its trash.
                    var payload = change.latest
                    payload.id = id
                    do {
                        _ = try await server.updateCipher(payload, lastKnownRevisionDate: copy.revisionDate)
                    } catch where error.serverErrorKind == .staleRevision {
                        staleAnswers += 1
                        if staleAnswers > options.staleRetryLimit { throw StaleRetriesExhausted(cipherId: item.id, attempts: staleAnswers) }
                        continue
                    }
                    try options.afterServerEffect?(.updated(cipherId: item.id))
                }
                if permanent { try await server.deleteCipher(id: id) } else { try await server.softDeleteCipher(id: id) }
                try options.afterServerEffect?(.deleted(cipherId: item.id, permanent: permanent))
                var local: [LocalChange] = [.delete(cipherId: item.id)]
                if !permanent {
                    var trashed = change.latest
                    trashed.id = id
                    if trashed.deletedDate == nil { trashed.deletedDate = now }
                    local = replacing(item.id, with: trashed)
                } else if id != item.id {
                    local.append(.delete(cipherId: id))
                }
                try await record(&item, [(.deleteApplied, OutcomeBody(at: now, reason: permanent ? "permanently deleted" : "moved to the trash")),
                                         (.resolved, OutcomeBody(at: now))],
                                 local: local, run: run)
                return .deleted
            }
        }
    }

    // MARK: Backups and idempotent creates

    /// Makes sure a backup of `source` exists on the server: skipped when one of the same
    /// version was recorded, adopted when an earlier uncertain POST did reach the server.
    private func ensureBackup(_ item: inout Item, of source: Cipher, side: ConflictSide, timestamp: BitwardenDate,
                              sourceRevision: BitwardenDate?, sourceSequence: UInt64?, reason: String,
                              run: RunContext) async throws -> Cipher {
        let sameVersion = { (o: OutcomeBody) in o.backupOf == side && o.sourceRevisionDate == sourceRevision && o.sourceSequence == sourceSequence }
        if let done = item.steps.last(where: { $0.type == .backupCreated && $0.outcome.purpose == .backup && sameVersion($0.outcome) }),
           let copy = done.outcome.cipher {
            return copy
        }
        let view = try source.decrypt(userKey: run.userKey)
        if side == .local, let earlier = try await adoptEarlierLocalBackup(&item, holding: view, run: run) { return earlier }
        var backup = view.withNewCipherKey(random: store.dependencies.random)
        backup.id = nil
        backup.name = BackupName.conflict(view.name, at: timestamp)
        backup.attachments = nil
        backup.revisionDate = nil
        backup.creationDate = nil
        let created = try await createOnce(&item, purpose: .backup, payload: try backup.encrypt(userKey: run.userKey, random: store.dependencies.random),
                                           side: side, sourceRevision: sourceRevision, sourceSequence: sourceSequence, run: run)
        var stored = created
        stored.extra = [:]
        try await record(&item, .backupCreated, OutcomeBody(
            at: now, backupId: created.id, backupOf: side, marker: created.name?.serialized, reason: reason,
            cipher: stored, purpose: .backup, sourceRevisionDate: sourceRevision, sourceSequence: sourceSequence), run: run)
        item.report.backupIds.append(created.id ?? "")
        return created
    }

    /// Copies planned for an earlier version whose POST may have reached the server (the
    /// answer was lost, then the user saved again, e.g. a trash move): each one found on the
    /// server is recorded as made, so the same content is never posted twice. Returns them.
    private func adoptEarlierPlans(_ item: inout Item, where wanted: (OutcomeBody) -> Bool, run: RunContext) async throws -> [Cipher] {
        let confirmed = Set(item.steps.filter { $0.type == .backupCreated }.compactMap(\.outcome.marker))
        let open = item.steps.filter { $0.type == .createPlanned && wanted($0.outcome) && !confirmed.contains($0.outcome.marker ?? "") }
        var adopted: [Cipher] = []
        for plan in open {
            guard let marker = plan.outcome.marker.flatMap({ try? EncString($0) }),
                  let found = try await run.index.find([marker]) else { continue }
            var stored = found
            stored.extra = [:]
            try await record(&item, .backupCreated, OutcomeBody(
                at: now, backupId: found.id, backupOf: plan.outcome.backupOf, marker: plan.outcome.marker,
                reason: "a copy whose answer was lost, found on the server", cipher: stored, purpose: plan.outcome.purpose,
                sourceRevisionDate: plan.outcome.sourceRevisionDate, sourceSequence: plan.outcome.sourceSequence), run: run)
            item.report.backupIds.append(found.id ?? "")
            adopted.append(found)
        }
        return adopted
    }

    /// An earlier local backup found on the server that holds the same content as `view`.
    private func adoptEarlierLocalBackup(_ item: inout Item, holding view: CipherView, run: RunContext) async throws -> Cipher? {
        let adopted = try await adoptEarlierPlans(&item, where: { $0.purpose == .backup && $0.backupOf == .local }, run: run)
        return try adopted.first { Self.sameContent(try $0.decrypt(userKey: run.userKey), view) }
    }

    /// Whether two versions hold the same things a user typed (names and dates aside).
    static func sameContent(_ a: CipherView, _ b: CipherView) -> Bool {
        a.type == b.type && a.notes == b.notes && a.folderId == b.folderId
            && a.login?.username == b.login?.username && a.login?.password == b.login?.password
            && (a.passwordHistory ?? []).compactMap(\.password) == (b.passwordHistory ?? []).compactMap(\.password)
            && (a.fields ?? []).map { [$0.name, $0.value] } == (b.fields ?? []).map { [$0.name, $0.value] }
    }

    /// POSTs `payload` at most once per plan: announces it with `createPlanned` (its encrypted
    /// name is the marker), and adopts the server's copy when an earlier plan for the same
    /// purpose and source already reached the server.
    private func createOnce(_ item: inout Item, purpose: CreatePurpose, payload: Cipher, side: ConflictSide? = nil,
                            sourceRevision: BitwardenDate? = nil, sourceSequence: UInt64? = nil,
                            run: RunContext) async throws -> Cipher {
        let plans = item.steps.filter {
            $0.type == .createPlanned && $0.outcome.purpose == purpose && $0.outcome.backupOf == side
                && $0.outcome.sourceRevisionDate == sourceRevision && $0.outcome.sourceSequence == sourceSequence
        }.compactMap { $0.outcome.marker.flatMap { try? EncString($0) } }
        if !plans.isEmpty, let found = try await run.index.find(plans) { return found }
        var toSend = payload
        toSend.id = nil
        try await record(&item, .createPlanned, OutcomeBody(
            at: now, backupOf: side, marker: toSend.name?.serialized, reason: "about to create (\(purpose))",
            cipher: toSend, purpose: purpose, sourceRevisionDate: sourceRevision, sourceSequence: sourceSequence), run: run)
        let created = try await server.createCipher(toSend)
        try options.afterServerEffect?(.created(cipherId: item.id, purpose: purpose, serverId: created.id ?? "?"))
        return created
    }

    private func plannedMarkers(_ item: Item, purpose: CreatePurpose) -> [EncString] {
        item.steps.filter { $0.type == .createPlanned && $0.outcome.purpose == purpose }
            .compactMap { $0.outcome.marker.flatMap { try? EncString($0) } }
    }

    /// "No password lost": every password typed offline (and the one the first edit replaced)
    /// that is neither in the latest version (password or its 5-entry history) nor in a copy
    /// kept on the server (`alsoPreservedBy`) goes into a password-overflow backup, five per
    /// copy, newest first. Returns the copies made.
    private func preserveOverflowPasswords(_ item: inout Item, alsoPreservedBy given: [Cipher], run: RunContext) async throws -> [Cipher] {
        guard item.change.offlinePasswordChangeCount > 0 else { return [] }
        // Every copy already on the server for this change keeps what it holds (overflow copies
        // made for an earlier version too, and one whose answer was lost).
        _ = try await adoptEarlierPlans(&item, where: { $0.purpose?.isPasswordOverflow == true }, run: run)
        let kept = given + recordedBackups(item)
        var typed: [(password: String, lastUsed: BitwardenDate?)] = []
        for (index, sequence) in item.change.versionSequences.enumerated() {
            guard let version = try store.event(at: sequence, userId: run.userId)?.operation else { continue }
            let view = try version.cipher.decrypt(userKey: run.userKey)
            // The password the first edit replaced (the server's, at the newest history entry);
            // older history entries were not typed here and follow Bitwarden's 5-entry rule.
            if index == 0, version.passwordChanged, let replaced = view.passwordHistory?.first,
               let password = replaced.password, !password.isEmpty {
                typed.append((password, replaced.lastUsedDate))
            }
            if let password = view.login?.password, !password.isEmpty { typed.append((password, version.at)) }
        }
        var preserved = Set<String>()
        for cipher in [item.latest] + kept {
            let view = try cipher.decrypt(userKey: run.userKey)
            if let password = view.login?.password { preserved.insert(password) }
            for entry in view.passwordHistory ?? [] { if let password = entry.password { preserved.insert(password) } }
        }
        var overflow: [PasswordHistoryView] = []
        var seen = preserved
        for entry in typed.reversed() where seen.insert(entry.password).inserted {
            overflow.append(PasswordHistoryView(password: entry.password, lastUsedDate: entry.lastUsed))
        }
        guard !overflow.isEmpty else { return [] }
        let latestView = try item.latest.decrypt(userKey: run.userKey)
        let size = CipherView.maxPasswordHistoryEntries
        let parts = stride(from: 0, to: overflow.count, by: size).map { Array(overflow[$0..<min($0 + size, overflow.count)]) }
        var copies: [Cipher] = []
        // Copies already on the server hold their passwords (they are in `kept`), so these
        // parts are only what is still missing: numbered after the copies recorded so far, so a
        // new part never takes an earlier part's plan for its own.
        let earlier = Set(item.steps.filter { $0.type == .backupCreated && $0.outcome.purpose?.isPasswordOverflow == true }
            .compactMap(\.outcome.marker)).count
        for (number, entries) in parts.enumerated() {
            let part = earlier + number + 1
            let purpose = CreatePurpose.passwordOverflow(part: part)
            var copy = latestView.withNewCipherKey(random: store.dependencies.random)
            copy.id = nil
            copy.name = BackupName.passwordOverflow(latestView.name, at: item.change.updatedAt, part: part, of: earlier + parts.count)
            copy.attachments = nil
            copy.revisionDate = nil
            copy.creationDate = nil
            copy.passwordHistory = entries
            let created = try await createOnce(&item, purpose: purpose, payload: try copy.encrypt(userKey: run.userKey, random: store.dependencies.random),
                                               sourceSequence: item.latestSequence, run: run)
            var stored = created
            stored.extra = [:]
            try await record(&item, .backupCreated, OutcomeBody(
                at: now, backupId: created.id, backupOf: .local, marker: created.name?.serialized,
                reason: "\(entries.count) offline password(s) the 5-entry history could not hold",
                cipher: stored, purpose: purpose, sourceSequence: item.latestSequence), run: run)
            item.report.backupIds.append(created.id ?? "")
            copies.append(created)
        }
        return copies
    }

    // MARK: Recording

    /// Local changes that replace the item's local copy (possibly under a temporary id) with
    /// the server's copy.
    private func replacing(_ localId: String, with serverCopy: Cipher) -> [LocalChange] {
        var changes: [LocalChange] = []
        if serverCopy.id != localId { changes.append(.delete(cipherId: localId)) }
        changes.append(.upsert(serverCopy))
        return changes
    }

    private func record(_ item: inout Item, _ type: VaultEventType, _ body: OutcomeBody, run: RunContext) async throws {
        try await record(&item, [(type, body)], local: [], run: run)
    }

    /// Appends outcome events (and local changes) for the item in one durable transaction,
    /// and remembers them as completed steps for the rest of the run.
    private func record(_ item: inout Item, _ events: [(VaultEventType, OutcomeBody)], local: [LocalChange], run: RunContext) async throws {
        let id = item.id
        let sequences = try await store.append(
            userId: run.userId, events: events.map { .init(cipherId: id, type: $0.0, body: .outcome($0.1)) }, localChanges: local)
        for ((type, body), sequence) in zip(events, sequences) {
            item.steps.append(ResolutionStep(type: type, sequence: sequence, outcome: body))
        }
    }
}

/// The server's items by encrypted name, fetched at most once per run and only when a
/// create must be checked for an earlier copy (one `GET /api/sync`).
actor ServerIndex {
    let server: any CipherServer
    private var byName: [EncString: Cipher]?

    init(server: any CipherServer) { self.server = server }

    /// The server copy carrying any of `markers` as its encrypted name.
    func find(_ markers: [EncString]) async throws -> Cipher? {
        guard !markers.isEmpty else { return nil }
        if byName == nil {
            let snapshot = try await server.sync()
            var map: [EncString: Cipher] = [:]
            for cipher in snapshot.ciphers { if let name = cipher.name { map[name] = cipher } }
            byName = map
        }
        for marker in markers { if let found = byName![marker] { return found } }
        return nil
    }
}
