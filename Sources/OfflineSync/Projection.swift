import EventLog
import VaultCrypto
import VaultModel

/// What the server must be told about an item (`PendingCipherChangeType` in the Bitwarden iOS design this follows).
public enum PendingChangeType: String, Codable, Sendable, CaseIterable {
    /// An item created offline that the server does not have yet (edits stay a create).
    case create
    /// Edits to an item the server has.
    case update
    /// A move to the trash (with or without edits before it).
    case softDelete
    /// A permanent delete.
    case hardDelete

    /// The pending type after `operation` is applied to `existing` (nil = nothing pending).
    /// This is the type-merge table of `Docs/Projection.md`; it needs only event types, so it
    /// also runs on headers while the vault is locked.
    public static func merge(_ existing: PendingChangeType?, _ operation: VaultEventType) -> Merge {
        switch (existing, operation) {
        case (nil, .created): return .pending(.create)
        case (nil, .updated): return .pending(.update)
        case (nil, .softDeleted): return .pending(.softDelete)
        case (nil, .hardDeleted): return .pending(.hardDelete)
        // Out of the trash: the server must end with the item active, with the user's version.
        // The server may hold the item trashed (a trash move it was sent, or its own copy) or
        // not, so even a restore that undoes a pending trash move is a change to push.
        case (nil, .restored), (.update, .restored), (.softDelete, .restored): return .pending(.update)
        case (.create, .restored): return .pending(.create)
        // Never reached the server: edits stay a create, a delete leaves nothing.
        case (.create, .created), (.create, .updated): return .pending(.create)
        case (.create, .softDeleted), (.create, .hardDeleted): return .discard
        case (.update, .created), (.update, .updated): return .pending(.update)
        // A create is never in the trash (trashing one that never reached the server discards it).
        case (.update, .softDeleted): return .pending(.softDelete)
        // A trashed item edited again is still trashed (its snapshot keeps deletedDate).
        case (.softDelete, .created), (.softDelete, .updated), (.softDelete, .softDeleted): return .pending(.softDelete)
        // A permanent delete wins over everything before it, and nothing edits a deleted item.
        case (_, .hardDeleted), (.hardDelete, _): return .pending(.hardDelete)
        // Outcomes and user-level events do not change the pending type. Listed one by one: a new
        // event type must be placed in this table before the package compiles.
        case (_, .pushed), (_, .idMapped), (_, .backupCreated), (_, .serverCopyKept), (_, .recreated), (_, .deleteApplied),
             (_, .deleteDropped), (_, .cleanedUp), (_, .resolutionFailed), (_, .resolved), (_, .clearedAfterOnlineSuccess),
             (_, .retryRequested), (_, .createPlanned), (_, .changeDiscarded), (_, .restoreApplied), (_, .syncAborted),
             (_, .syncApplied), (_, .reportsReviewed), (_, .attachmentPlanned), (_, .attachmentCopied), (_, .attachmentUnavailable),
             (_, .folderCreated), (_, .folderRenamed), (_, .folderDeleted), (_, .folderCreatePlanned), (_, .folderMapped),
             (_, .folderRenameApplied), (_, .folderDeleteApplied), (_, .folderAlreadyDeleted), (_, .itemFolderMissing),
             (_, .folderResolved), (_, .folderChangeDiscarded):
            return existing.map { .pending($0) } ?? .discard
        }
    }

    /// ``merge(_:_:)`` with the uncertain-create rule, for the fold of events and the fold of
    /// headers alike: a create that may have reached the server (`uncertainCreate`, see
    /// ``PendingChange/uncertainCreate`` and ``VaultEventType/marksUncertainCreate``) is not
    /// discarded by a delete, since the server copy must be found and deleted too.
    static func merge(_ existing: PendingChangeType?, _ operation: VaultEventType, uncertainCreate: Bool) -> Merge {
        let merged = merge(existing, operation)
        // The trash move of a create that may be on the server, undone: a create again (the
        // resolver finds the copy by its marker, or posts it).
        if existing == .softDelete, operation == .restored, uncertainCreate { return .pending(.create) }
        if merged == .discard, uncertainCreate {
            return .pending(operation == .hardDeleted ? .hardDelete : .softDelete)
        }
        return merged
    }

    /// Result of ``merge(_:_:)``.
    public enum Merge: Equatable, Sendable {
        /// Pending with this type.
        case pending(PendingChangeType)
        /// Nothing pending any more (a create deleted before it reached the server).
        case discard
    }
}

/// A step the resolver completed for an item, kept so a retry never repeats it.
public struct ResolutionStep: Codable, Sendable, Equatable {
    /// The outcome event's type (`createPlanned`, `idMapped`, `backupCreated`...).
    public var type: VaultEventType
    /// Where the outcome event is in the log.
    public var sequence: UInt64
    /// What the step recorded (server ids, revision dates, markers).
    public var outcome: OutcomeBody
}

/// The pending state of one item: the fold of its events since it was last resolved.
public struct PendingChange: Codable, Sendable, Equatable {
    /// The item (temporary id for creates until mapped).
    public var cipherId: String
    /// What the server must be told.
    public var changeType: PendingChangeType
    /// Server revision the first offline edit was based on (nil for creates): the baseline
    /// for conflict detection.
    public var originalRevisionDate: BitwardenDate?
    /// How many offline edits changed the login password.
    public var offlinePasswordChangeCount: Int
    /// When the first offline edit was made.
    public var createdAt: BitwardenDate
    /// When the latest offline edit was made.
    public var updatedAt: BitwardenDate
    /// The latest encrypted snapshot (what would be sent).
    public var latest: Cipher
    /// Sequences of every operation event since the last resolution: every intermediate
    /// version is reachable by reading these events.
    public var versionSequences: [UInt64]
    /// Sequences of the operations that changed the password.
    public var passwordChangeSequences: [UInt64]
    /// Whether an `updated` operation is part of this change (a delete then carries edits
    /// the server has not seen).
    public var hasEdits: Bool = false
    /// Failed resolution attempts since the last success that count towards the dead-letter
    /// limit (answers from the server, not an unreachable one).
    public var attempts: Int = 0
    /// The last failure, as a sentence.
    public var lastError: String?
    /// When the resolver tries the item again (backoff); nil for at once.
    public var nextRetryAt: BitwardenDate?
    /// Too many failures: excluded from automatic retries, still pending, retried on request.
    public var isDeadLetter: Bool = false
    /// The last attempt could not reach the server (not counted as an attempt).
    public var waitingForServer: Bool? = nil
    /// Resolver steps completed since the last operation.
    public var steps: [ResolutionStep] = []
    /// The change started as a create (a create chain): its versions were only ever written by
    /// this device, so it never gets a soft-conflict backup. Set on deletes of a create that
    /// may have reached the server (``uncertainCreate``) too.
    public var startedAsCreate: Bool? = nil
    /// The user took the item out of the trash and has not trashed or deleted it since: the
    /// server must end with it active (a `PUT …/restore` when the server copy the resolver
    /// leaves in place is in the trash). Nil otherwise.
    public var restoresFromTrash: Bool? = nil
    /// The lazy fold read this change's latest operation without its cipher: ``latest`` is the
    /// placeholder until the fold reads that event (the last of ``versionSequences``) again at
    /// its end. Never true once a fold returns; not stored in checkpoints.
    var latestIsInLog = false

    /// A create whose request may have reached the server: its response was lost, or the
    /// resolver announced or mapped it. Deleting it must delete the server copy.
    public var uncertainCreate: Bool {
        // The same rule as the header fold (which cannot see a plan's purpose): any plan or
        // mapping of a change that began as a create. (An update's backup plan is not one.)
        startedAsCreate == true && steps.contains { $0.type.marksUncertainCreate }
    }
}

extension PendingChange {
    /// Set to `true` in a `JSONEncoder`'s `userInfo`, leaves ``latest`` out of the JSON (a
    /// checkpoint stores the snapshots apart); decoding such JSON gives a placeholder snapshot.
    static let omitsSnapshot = CodingUserInfoKey(rawValue: "vaultlog.pendingChange.omitsSnapshot")!

    private enum CodingKeys: String, CodingKey {
        case cipherId, changeType, originalRevisionDate, offlinePasswordChangeCount, createdAt, updatedAt, latest
        case versionSequences, passwordChangeSequences, hasEdits, attempts, lastError, nextRetryAt, isDeadLetter
        case waitingForServer, steps, startedAsCreate, restoresFromTrash
    }

    /// The JSON the synthesized conformance read, and the same without `latest` (then a
    /// placeholder until the checkpoint's snapshot replaces it).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        cipherId = try c.decode(String.self, forKey: .cipherId)
        changeType = try c.decode(PendingChangeType.self, forKey: .changeType)
        originalRevisionDate = try c.decodeIfPresent(BitwardenDate.self, forKey: .originalRevisionDate)
        offlinePasswordChangeCount = try c.decode(Int.self, forKey: .offlinePasswordChangeCount)
        createdAt = try c.decode(BitwardenDate.self, forKey: .createdAt)
        updatedAt = try c.decode(BitwardenDate.self, forKey: .updatedAt)
        latest = try c.decodeIfPresent(Cipher.self, forKey: .latest) ?? Projection.undecodedSnapshot
        versionSequences = try c.decode([UInt64].self, forKey: .versionSequences)
        passwordChangeSequences = try c.decode([UInt64].self, forKey: .passwordChangeSequences)
        hasEdits = try c.decodeIfPresent(Bool.self, forKey: .hasEdits) ?? false
        attempts = try c.decodeIfPresent(Int.self, forKey: .attempts) ?? 0
        lastError = try c.decodeIfPresent(String.self, forKey: .lastError)
        nextRetryAt = try c.decodeIfPresent(BitwardenDate.self, forKey: .nextRetryAt)
        isDeadLetter = try c.decodeIfPresent(Bool.self, forKey: .isDeadLetter) ?? false
        waitingForServer = try c.decodeIfPresent(Bool.self, forKey: .waitingForServer)
        steps = try c.decodeIfPresent([ResolutionStep].self, forKey: .steps) ?? []
        startedAsCreate = try c.decodeIfPresent(Bool.self, forKey: .startedAsCreate)
        restoresFromTrash = try c.decodeIfPresent(Bool.self, forKey: .restoresFromTrash)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(cipherId, forKey: .cipherId)
        try c.encode(changeType, forKey: .changeType)
        try c.encodeIfPresent(originalRevisionDate, forKey: .originalRevisionDate)
        try c.encode(offlinePasswordChangeCount, forKey: .offlinePasswordChangeCount)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(updatedAt, forKey: .updatedAt)
        if encoder.userInfo[Self.omitsSnapshot] as? Bool != true { try c.encode(latest, forKey: .latest) }
        try c.encode(versionSequences, forKey: .versionSequences)
        try c.encode(passwordChangeSequences, forKey: .passwordChangeSequences)
        try c.encode(hasEdits, forKey: .hasEdits)
        try c.encode(attempts, forKey: .attempts)
        try c.encodeIfPresent(lastError, forKey: .lastError)
        try c.encodeIfPresent(nextRetryAt, forKey: .nextRetryAt)
        try c.encode(isDeadLetter, forKey: .isDeadLetter)
        try c.encodeIfPresent(waitingForServer, forKey: .waitingForServer)
        try c.encode(steps, forKey: .steps)
        try c.encodeIfPresent(startedAsCreate, forKey: .startedAsCreate)
        try c.encodeIfPresent(restoresFromTrash, forKey: .restoresFromTrash)
    }
}

/// The projection of one user's log: every pending item, the id map, and the last sequence
/// folded. `fold(all) == fold(checkpoint) + fold(tail)` (property-tested).
public struct Projection: Codable, Sendable, Equatable {
    /// The user whose events were folded.
    public var userId: String
    /// The last sequence folded into this projection.
    public var lastSequence: UInt64 = 0
    /// Pending items by cipher id.
    public var pending: [String: PendingChange] = [:]
    /// Temporary id → server id, for creates that reached the server.
    public var idMap: [String: String] = [:]
    /// The last sync abort (count and reasons), cleared by a completed sync.
    public var lastSyncAbort: OutcomeBody?
    /// When the server's items last replaced the local store (a non-forced sync skips the fetch
    /// when the account has not changed since).
    public var lastSyncAppliedAt: BitwardenDate? = nil
    /// Items with an event that cannot be opened or decoded (cipher id → what is wrong). Such
    /// an item is never resolved automatically and its later events are not folded; every
    /// other item of the user still resolves. The events stay in the log for `vaultlog verify`.
    public var quarantined: [String: String]? = nil
    /// Pending folder operations by folder id (temporary id for a folder created offline);
    /// nil when none.
    public var folders: [String: PendingFolder]? = nil
    /// Temporary folder id → server id, for folders created offline that reached the server.
    public var folderIdMap: [String: String]? = nil

    /// The empty projection of `userId` (nothing folded yet).
    public init(userId: String) { self.userId = userId }

    /// Number of pending items (dead letters included).
    public var pendingCount: Int { pending.count }

    /// Folds one event. Events must come in sequence order and belong to ``userId``.
    public mutating func apply(_ event: VaultEvent) {
        precondition(event.sequence > lastSequence, "events fold in sequence order")
        lastSequence = event.sequence
        let id = event.cipherId
        // A quarantined item's later events would fold onto a state with a hole in it.
        guard !isQuarantined(id) else { return }
        switch event.body {
        case .operation(let op):
            if let index = applyOperation(event.type, sequence: event.sequence, cipherId: id, passwordChanged: op.passwordChanged,
                                          baseRevisionDate: op.baseRevisionDate, at: op.at) {
                pending.values[index].latest = op.cipher
                pending.values[index].latestIsInLog = false
            }
        case .outcome(let outcome) where event.type.isFolderEvent:
            applyFolder(event.type, sequence: event.sequence, folderId: id, body: outcome)
        case .outcome(let outcome):
            switch event.type {
            case .resolved, .clearedAfterOnlineSuccess:
                pending[id] = nil
            case .resolutionFailed:
                // In place (a pending change carries its snapshot: copying it out is not free).
                guard let index = pending.index(forKey: id) else { break }
                Self.recordFailure(outcome, into: &pending.values[index])
            case .retryRequested:
                guard let index = pending.index(forKey: id) else { break }
                pending.values[index].isDeadLetter = false
                pending.values[index].attempts = 0
                pending.values[index].nextRetryAt = nil
            case .idMapped:
                if let serverId = outcome.serverId { idMap[id] = serverId }
                fallthrough
            case .pushed, .backupCreated, .serverCopyKept, .recreated, .deleteApplied, .deleteDropped, .cleanedUp, .createPlanned,
                 .changeDiscarded, .restoreApplied, .attachmentPlanned, .attachmentCopied, .attachmentUnavailable:
                pending[id]?.steps.append(ResolutionStep(type: event.type, sequence: event.sequence, outcome: outcome))
            case .syncAborted:
                lastSyncAbort = outcome
            case .syncApplied:
                lastSyncAbort = nil
                lastSyncAppliedAt = outcome.at
            case .itemFolderMissing:
                pending[id]?.steps.append(ResolutionStep(type: event.type, sequence: event.sequence, outcome: outcome))
            case .created, .updated, .softDeleted, .hardDeleted, .restored, .reportsReviewed, .folderCreated, .folderRenamed,
                 .folderDeleted, .folderCreatePlanned, .folderMapped, .folderRenameApplied, .folderDeleteApplied,
                 .folderAlreadyDeleted, .folderResolved, .folderChangeDiscarded:
                break
            }
        }
    }

    /// Folds an operation whose body was read without its cipher (the lazy fold): everything
    /// ``apply(_:)`` does but the latest snapshot, which stays the placeholder, marked
    /// ``PendingChange/latestIsInLog`` for the fold to read at its end.
    mutating func applyOperationFields(sequence: UInt64, cipherId: String, type: VaultEventType, passwordChanged: Bool,
                                       baseRevisionDate: BitwardenDate?, at: BitwardenDate) {
        precondition(sequence > lastSequence, "events fold in sequence order")
        lastSequence = sequence
        guard !isQuarantined(cipherId) else { return }
        applyOperation(type, sequence: sequence, cipherId: cipherId, passwordChanged: passwordChanged,
                       baseRevisionDate: baseRevisionDate, at: at)
    }

    /// A failed attempt's outcome on its pending change.
    private static func recordFailure(_ outcome: OutcomeBody, into change: inout PendingChange) {
        // Saturating: the count is the log's, and a huge one must not trap.
        change.attempts = outcome.attempt ?? (change.attempts == .max ? .max : change.attempts + 1)
        change.lastError = outcome.reason
        change.nextRetryAt = outcome.nextRetryAt
        change.isDeadLetter = outcome.deadLetter ?? false
        change.waitingForServer = outcome.serverUnreachable
    }

    /// The snapshot of a change whose latest version is not decoded yet (lazy fold).
    static let undecodedSnapshot = Cipher(type: .login)

    /// An operation event (type merge, counts, versions), without its snapshot: the change is
    /// left marked ``PendingChange/latestIsInLog`` with the placeholder snapshot, for the
    /// caller to set (``apply(_:)``) or the lazy fold to read at its end. The index of the change
    /// when the item stays pending (this event its latest version).
    ///
    /// The change is read and updated in place through its dictionary index: a pending change
    /// carries its snapshot (a `Cipher` of dozens of fields), and each copy taken out of the
    /// dictionary retained and released all of them, several times per event. (Passing the
    /// snapshot in, even as nil, wrote and copied that whole optional for every event.)
    @discardableResult
    private mutating func applyOperation(_ eventType: VaultEventType, sequence: UInt64, cipherId id: String, passwordChanged: Bool,
                                         baseRevisionDate: BitwardenDate?, at: BitwardenDate) -> Dictionary<String, PendingChange>.Index? {
        if let index = pending.index(forKey: id) {
            // Read and changed through one in-place access: reading a field through the
            // dictionary's getter copied the whole change first.
            guard Self.fold(eventType, sequence: sequence, passwordChanged: passwordChanged, at: at, into: &pending.values[index]) else {
                pending.remove(at: index)
                return nil
            }
            return index
        }
        guard case .pending(let type) = PendingChangeType.merge(nil, eventType) else { return nil }
        pending[id] = PendingChange(
            cipherId: id, changeType: type,
            originalRevisionDate: type == .create ? nil : baseRevisionDate,
            offlinePasswordChangeCount: passwordChanged ? 1 : 0,
            createdAt: at, updatedAt: at, latest: Self.undecodedSnapshot,
            versionSequences: [sequence],
            passwordChangeSequences: passwordChanged ? [sequence] : [],
            hasEdits: eventType == .updated,
            startedAsCreate: type == .create ? true : nil,
            restoresFromTrash: eventType == .restored ? true : nil,
            latestIsInLog: true)
        return pending.index(forKey: id)
    }

    /// An operation on an item already pending; false when the change is discarded (a create
    /// deleted before it reached the server), which leaves `change` as it was.
    private static func fold(_ eventType: VaultEventType, sequence: UInt64, passwordChanged: Bool, at: BitwardenDate,
                             into change: inout PendingChange) -> Bool {
        let merged = PendingChangeType.merge(change.changeType, eventType, uncertainCreate: change.uncertainCreate)
        guard case .pending(let type) = merged else { return false }
        if change.changeType == .create && type != .create { change.startedAsCreate = true }
        change.changeType = type
        change.latestIsInLog = true
        change.updatedAt = at
        change.versionSequences.append(sequence)
        if eventType == .updated { change.hasEdits = true }
        // A restore holds until the user trashes or deletes the item again.
        switch eventType {
        case .restored: change.restoresFromTrash = true
        case .softDeleted, .hardDeleted: change.restoresFromTrash = nil
        case .created, .updated, .pushed, .idMapped, .backupCreated, .serverCopyKept, .recreated, .deleteApplied, .deleteDropped,
             .cleanedUp, .resolutionFailed, .resolved, .clearedAfterOnlineSuccess, .retryRequested, .createPlanned,
             .changeDiscarded, .restoreApplied, .attachmentPlanned, .attachmentCopied, .attachmentUnavailable, .syncAborted,
             .syncApplied, .reportsReviewed, .folderCreated, .folderRenamed, .folderDeleted, .folderCreatePlanned, .folderMapped,
             .folderRenameApplied, .folderDeleteApplied, .folderAlreadyDeleted, .itemFolderMissing, .folderResolved, .folderChangeDiscarded:
            break
        }
        if passwordChanged {
            change.offlinePasswordChangeCount += 1
            change.passwordChangeSequences.append(sequence)
        }
        // A new edit by the user: the item gets a fresh start in automatic retries.
        change.attempts = 0
        change.nextRetryAt = nil
        change.isDeadLetter = false
        change.lastError = nil
        change.waitingForServer = nil
        return true
    }

    /// Folds events in order.
    public mutating func apply(_ events: some Sequence<VaultEvent>) {
        for event in events { apply(event) }
    }

    /// The fold of `events` from empty.
    public static func fold(userId: String, _ events: some Sequence<VaultEvent>) -> Projection {
        var projection = Projection(userId: userId)
        projection.apply(events)
        return projection
    }
}
