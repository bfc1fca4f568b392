import Foundation
import Logging
import VaultCrypto
import VaultModel

extension OfflineSyncResolver {
    // MARK: Update

    struct StaleRetriesExhausted: Error, CustomStringConvertible {
        let cipherId: String
        let attempts: Int
        var description: String {
            "item \(cipherId) kept changing on the server (\(attempts) 'out of date' answers in a row); it stays pending and is retried on the next sync"
        }
    }

    func resolveUpdate(_ item: inout Item, serverId: String, base: BitwardenDate?, createChain: Bool = false,
                               run: RunContext) async throws -> ItemReport.Outcome {
        let own = try ownWrites(item, run: run)
        var staleAnswers = 0
        while true {
            let serverCopy: Cipher
            do {
                serverCopy = try await server.getCipher(id: serverId)
            } catch where error.serverErrorKind == .notFound {
                return try await recreate(&item, run: run)
            }
            let ownNow = try ownWrites(own, covering: serverCopy, base: base, item: item, run: run)
            let merge = try disjointMerge(item, server: serverCopy, base: base, own: ownNow, createChain: createChain, run: run)
            let decision = UpdateDecision.decide(
                latest: item.latest, base: base, localUpdatedAt: item.change.updatedAt,
                passwordChanges: item.passwordChangesSincePush, server: serverCopy,
                softConflictThreshold: options.softConflictPasswordChangeThreshold,
                own: ownNow, createChain: createChain, merge: merge?.parts)
            switch decision {
            case .alreadyApplied:
                // Our PUT was applied but its answer lost: the passwords the 5-entry history
                // cannot hold still need their copy (the backups made before the PUT count).
                _ = try await preserveOverflowPasswords(&item, alsoPreservedBy: recordedBackups(item), run: run)
                let restoring = try await restoreIfTrashed(item, serverId: serverId, serverTrashed: serverCopy.deletedDate != nil,
                                                           copy: serverCopy)
                // A restore alone sends no content: its record is the restore, not a push.
                let pushed: [(VaultEventType, OutcomeBody)] = restoring.events.isEmpty
                    ? [(.pushed, OutcomeBody(at: now, serverId: serverId, revisionDate: serverCopy.revisionDate,
                                             reason: "the server already holds the latest local version",
                                             sourceSequence: item.latestSequence))] : []
                try await record(&item, pushed + restoring.events + [(.resolved, OutcomeBody(at: now, serverId: serverId))],
                                 local: replacing(item.id, with: restoring.copy), run: run)
                return .pushed

            case .keepServer(let reason):
                let backup = try await ensureBackup(&item, of: item.latest, side: .local, timestamp: item.change.updatedAt,
                                                    sourceRevision: nil, sourceSequence: item.latestSequence, reason: reason,
                                                    original: serverCopy, run: run)
                _ = try await preserveOverflowPasswords(&item, alsoPreservedBy: [backup, serverCopy], run: run)
                try await record(&item, [(.serverCopyKept, OutcomeBody(at: now, serverId: serverId, revisionDate: serverCopy.revisionDate, reason: reason)),
                                         (.resolved, OutcomeBody(at: now, serverId: serverId))],
                                 local: replacing(item.id, with: serverCopy), run: run)
                return .serverKept

            case .merged(_, let backupServer, let reason):
                guard let merge else { preconditionFailure("a merged decision without a merge") }
                if let outcome = try await pushMerged(&item, merge, serverId: serverId, serverCopy: serverCopy,
                                                      backupServer: backupServer, reason: reason, run: run) {
                    return outcome
                }
                staleAnswers += 1
                logger.info("server copy changed during resolution; deciding again", metadata: ["cipher": "\(item.id)"])
                if staleAnswers > options.staleRetryLimit { throw StaleRetriesExhausted(cipherId: item.id, attempts: staleAnswers) }

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
                    updated = try await sendUpdate(payload, lastKnownRevisionDate: serverCopy.revisionDate, run: run)
                } catch where error.serverErrorKind == .staleRevision {
                    // Another device wrote between our read and our write: read again, decide again.
                    staleAnswers += 1
                    logger.info("server copy changed during resolution; deciding again", metadata: ["cipher": "\(item.id)"])
                    if staleAnswers > options.staleRetryLimit { throw StaleRetriesExhausted(cipherId: item.id, attempts: staleAnswers) }
                    continue
                }
                let restoring = try await restoreIfTrashed(item, serverId: serverId, serverTrashed: serverCopy.deletedDate != nil,
                                                           copy: updated)
                try await record(&item, [(.pushed, OutcomeBody(at: now, serverId: serverId, revisionDate: updated.revisionDate, reason: reason,
                                                               sourceSequence: item.latestSequence))]
                                        + restoring.events + [(.resolved, OutcomeBody(at: now, serverId: serverId))],
                                 local: replacing(item.id, with: restoring.copy), run: run)
                return preserved.isEmpty ? .pushed : .localKept
            }
        }
    }

    /// The server lost the item (404): create the local version again, under a new id. With
    /// `thenTrash` (a trash move that carried edits) the new copy is moved to the trash again.
    func recreate(_ item: inout Item, thenTrash: Bool = false, run: RunContext) async throws -> ItemReport.Outcome {
        var created: Cipher
        // The item's files went with it: its attachments are copied from any copy this change
        // made earlier, or recorded as not copied (`copyAttachments`).
        let gone = AttachmentSource.gone(item.mappedServerCopy?.serverId ?? item.id)
        if let found = try await run.index.find(plannedMarkers(item, purpose: .recreate)) {
            created = try await copyAttachments(&item, of: item.latest, from: gone, onto: found, run: run)
            if thenTrash, let serverId = created.id, created.name != item.latest.name {
                // The copy an earlier attempt posted holds the version planned then; the item
                // was edited since. Record the copy as the item, then resolve the trash move
                // against it: the later edits are pushed before it goes to the trash.
                item.report.serverId = serverId
                let mapped = OutcomeBody(at: now, serverId: serverId, revisionDate: created.revisionDate, reason: "recreate")
                try await record(&item, [(.recreated, mapped), (.idMapped, mapped)], local: [], run: run)
                return try await resolveDelete(&item, serverId: serverId, base: created.revisionDate, createChain: true, run: run)
            }
        } else {
            _ = try await preserveOverflowPasswords(&item, alsoPreservedBy: [], run: run)
            var payload = item.latest
            payload.deletedDate = nil
            created = try await createOnce(&item, purpose: .recreate, payload: payload, run: run)
            created = try await copyAttachments(&item, of: item.latest, from: gone, onto: created, run: run)
        }
        guard thenTrash else { return try await adoptCreated(&item, created, purpose: .recreate, run: run) }
        guard let serverId = created.id else { throw ServerFailure(.unavailable, "the server answered a create without an id") }
        item.report.serverId = serverId
        if created.deletedDate == nil {
            try await server.softDeleteCipher(id: serverId)
            created.deletedDate = now
        }
        let mapped = OutcomeBody(at: now, serverId: serverId, revisionDate: created.revisionDate, reason: "recreate")
        try await record(&item, [(.recreated, mapped), (.idMapped, mapped),
                                 (.deleteApplied, OutcomeBody(at: now, serverId: serverId, reason: "re-created and moved to the trash again")),
                                 (.resolved, OutcomeBody(at: now, serverId: serverId))],
                         local: replacing(item.id, with: created), run: run)
        return .deleted
    }

    /// This device's writes to the item, from the log: the revisions the server gave them
    /// (recorded with pushes, creates and re-creates of this change) and the versions it
    /// encrypted (created and updated operations), whose exact content identifies a write whose
    /// answer was lost. Never the name alone: another device's change can keep it.
    func ownWrites(_ item: Item, run: RunContext) throws -> OwnWrites {
        var own = OwnWrites()
        for step in item.steps where [.pushed, .idMapped, .recreated, .restoreApplied].contains(step.type) {
            if let revision = step.outcome.revisionDate { own.revisions.insert(revision) }
        }
        for sequence in item.change.versionSequences {
            guard let event = try store.event(at: sequence, userId: run.userId), let operation = event.operation else { continue }
            switch event.type {
            // A restore sends no content, but the version it restores is this device's to recognise.
            // As sent: a folder created offline under its server id (or none, gone).
            case .created, .updated, .restored: own.sent.append(run.folders.asSent(operation.cipher))
            case .softDeleted: own.trashed.append(run.folders.asSent(operation.cipher))
            case .hardDeleted, .pushed, .idMapped, .backupCreated, .serverCopyKept, .recreated, .deleteApplied, .deleteDropped,
                 .cleanedUp, .resolutionFailed, .resolved, .clearedAfterOnlineSuccess, .retryRequested, .createPlanned,
                 .changeDiscarded, .restoreApplied, .attachmentPlanned, .attachmentCopied, .attachmentUnavailable, .syncAborted,
                 .syncApplied, .reportsReviewed, .itemFolderMissing, .folderCreated, .folderRenamed, .folderDeleted, .folderCreatePlanned, .folderMapped, .folderRenameApplied, .folderDeleteApplied, .folderAlreadyDeleted, .folderResolved, .folderChangeDiscarded:
                break
            }
        }
        return own
    }

    /// `own` with the server copy's revision when the server gave it to a write of this device
    /// in an earlier change of the item. A save that read the item while a run was resolving it,
    /// and was appended after the run's outcome, starts a new change based on the revision before
    /// the run's push: the server copy is then the run's own write, not another device's change.
    /// The item's earlier outcomes are read only then: a server copy no write of this change made,
    /// whose revision is not the change's `base` (with the base's revision, or no base, the
    /// decisions make no conflict, so nothing is read on that common path).
    func ownWrites(_ own: OwnWrites, covering server: Cipher?, base: BitwardenDate?, item: Item, run: RunContext) throws -> OwnWrites {
        guard let server, let base, let revision = server.revisionDate, revision != base, !own.wrote(server) else { return own }
        // Any revision the server gave this device's write to the item identifies that write:
        // revisions only grow, so no other device's change can carry one.
        let recording: Set<UInt16> = Set([VaultEventType.pushed, .idMapped, .recreated, .restoreApplied].map(\.rawValue))
        for header in try store.log.headers(userId: run.userId, cipherId: item.id).reversed() where recording.contains(header.eventType) {
            if try store.event(at: header.sequence, userId: run.userId)?.outcome?.revisionDate == revision {
                var more = own
                more.revisions.insert(revision)
                return more
            }
        }
        // This device's own trash move whose new revision it never read (the read after an
        // online trash move failed): the change started from a trashed local copy at the
        // revision before the move, and the server holds that very content in its trash.
        if server.deletedDate != nil, let baseCipher = try recordedBase(item, base: base, run: run)?.cipher,
           baseCipher.deletedDate != nil, server.sameContent(as: baseCipher) {
            var more = own
            more.revisions.insert(revision)
            return more
        }
        return own
    }

    /// The encrypted names (serialized) of every version of this change, read from the log:
    /// each encryption is unique, so a server copy carrying one of them was written (or
    /// trashed) by this device, never by another one.
    func ownNames(_ item: Item, run: RunContext) throws -> Set<String> {
        Set(try item.change.versionSequences.compactMap {
            try store.event(at: $0, userId: run.userId)?.operation?.cipher.name?.serialized
        })
    }
}
