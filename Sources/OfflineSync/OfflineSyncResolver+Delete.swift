import Foundation
import Logging
import VaultCrypto
import VaultModel

extension OfflineSyncResolver {
    // MARK: Delete

    /// Backups already on the server for this change (conflict backups and overflow copies).
    func recordedBackups(_ item: Item) -> [Cipher] {
        item.steps.filter { $0.type == .backupCreated }.compactMap { $0.outcome.cipher }
    }

    func resolveDelete(_ item: inout Item, run: RunContext) async throws -> ItemReport.Outcome {
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
    func resolveDeleteOfUncertainCreate(_ item: inout Item, run: RunContext) async throws -> ItemReport.Outcome {
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

    func resolveDelete(_ item: inout Item, serverId id: String, base: BitwardenDate?, createChain: Bool,
                               run: RunContext) async throws -> ItemReport.Outcome {
        // A copy, not reads through `item`: Swift 6.3's optimizer crashed (SIL ownership
        // verifier) on borrows of `item.change`'s optionals across the awaits below.
        let change = item.change
        let permanent = change.changeType == .hardDelete
        let own = try ownWrites(item, run: run)
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
                own: try ownWrites(own, covering: serverCopy, base: base, item: item, run: run), createChain: createChain,
                latestPushed: item.steps.last(where: { $0.type == .pushed && $0.outcome.sourceSequence == item.latestSequence })?
                    .outcome.revisionDate)
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
                                                        reason: "edits made before a dropped trash move", original: copy, run: run)
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
                        let updated = try await sendUpdate(payload, lastKnownRevisionDate: copy.revisionDate, run: run)
                        // Recorded before the trash move is sent: if its answer is lost and another
                        // device restores the item, the next attempt tells that restore (a revision
                        // after this one) from a move never sent (this very revision).
                        try await record(&item, .pushed, OutcomeBody(at: now, serverId: id, revisionDate: updated.revisionDate,
                                                                     reason: "edits made before the trash move",
                                                                     sourceSequence: item.latestSequence), run: run)
                    } catch where error.serverErrorKind == .staleRevision {
                        staleAnswers += 1
                        if staleAnswers > options.staleRetryLimit { throw StaleRetriesExhausted(cipherId: item.id, attempts: staleAnswers) }
                        continue
                    }
                }
                if permanent { try await server.deleteCipher(id: id) } else { try await server.softDeleteCipher(id: id) }
                var local: [LocalChange] = [.delete(cipherId: item.id)]
                if !permanent {
                    var trashed = change.latest
                    trashed.id = id
                    if trashed.deletedDate == nil { trashed.deletedDate = now }
                    // The trash reply has no body: the server's copy carries the revision the move
                    // gave it, the base of an edit (or a restore) made in the trash afterwards,
                    // which would otherwise meet this device's own trash move as a conflict. (If
                    // the read fails, or another device changed the copy since, the local version
                    // is kept as before.)
                    if let copy = try? await server.getCipher(id: id), copy.deletedDate != nil, copy.sameContent(as: trashed) {
                        trashed = copy
                    }
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
}
