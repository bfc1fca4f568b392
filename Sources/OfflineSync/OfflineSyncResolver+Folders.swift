import EventLog
import Foundation
import Logging
import VaultCrypto
import VaultModel

/// What the item pass of a run knows about folders once the folder pass is done.
struct FolderContext: Sendable {
    /// Temporary folder id → server id (every folder created offline that reached the server).
    var idMap: [String: String] = [:]
    /// Temporary ids of folders whose create could not be sent yet (the server is out of
    /// reach): items in them wait, so they are never pushed with an id the server never saw.
    var waiting: Set<String> = []
    /// The user's folders on the server after the folder pass; nil when unknown (the server
    /// port has no folder routes), then items are sent with their folder as it is.
    var serverFolderIds: Set<String>? = nil
    /// What the folder pass did with each pending folder change.
    var reports: [FolderReport] = []
    /// The items the item pass sent into a folder, checked again after it (``OfflineSyncResolver/recheckFolders(_:)``).
    let sent = FoldersSent()

    /// `cipher` with its folder as it is sent (``sendable(_:)``).
    func asSent(_ cipher: Cipher) -> Cipher {
        guard cipher.folderId != nil else { return cipher }
        var sent = cipher
        sent.folderId = sendable(cipher.folderId)
        return sent
    }

    /// The `folderId` to send for `folderId`: the server's id of a folder created offline, nil
    /// for a folder the server no longer has.
    func sendable(_ folderId: String?) -> String? {
        guard let folderId else { return nil }
        let serverId = idMap[folderId] ?? folderId
        if let known = serverFolderIds, !known.contains(serverId) { return nil }
        return serverId
    }
}

extension OfflineSyncResolver {
    // MARK: Folders

    /// The folder pass, before any item: creates (announced, found again after a lost answer),
    /// renames and deletes of folders made offline. Each folder's failure is logged and leaves
    /// it pending; it never stops the items. Returns what the items need.
    func resolveFolders(_ projection: Projection, userId: String, due: [PendingChange]) async throws -> FolderContext {
        var context = FolderContext(idMap: projection.folderIdMap ?? [:])
        let pending = (projection.folders ?? [:]).values.sorted { ($0.versionSequences.first ?? 0) < ($1.versionSequences.first ?? 0) }
        guard let folders = server as? any FolderServer else {
            context.waiting = Set(pending.filter { $0.change == .create }.map(\.folderId))
            return context
        }
        var listed: [ServerFolder]?
        for folder in pending {
            do {
                let report = try await resolveFolder(folder, folders: folders, listed: &listed, userId: userId)
                if folder.change == .create, let serverId = report.serverId { context.idMap[folder.folderId] = serverId }
                context.reports.append(report)
            } catch let interruption as any ResolutionInterruption {
                throw interruption
            } catch {
                logger.warning("folder resolution failed", metadata: ["folder": "\(folder.folderId)", "error": "\(error)"])
                context.reports.append(FolderReport(folderId: folder.folderId, change: folder.change, outcome: .failed,
                                                    serverId: folder.mappedServerId, error: "\(error)"))
                // Out of reach: its items wait for it. Refused by the server: they go to no folder.
                if folder.change == .create, error.serverErrorKind == .unavailable || error.serverErrorKind == .loginRequired {
                    context.waiting.insert(folder.folderId)
                }
            }
        }
        if due.contains(where: { $0.latest.folderId != nil }) {
            do {
                context.serverFolderIds = Set(try await folders.listFolders().map(\.id))
            } catch {
                logger.info("cannot list folders; items keep their folder as it is", metadata: ["error": "\(error)"])
            }
        }
        return context
    }

    /// One folder's pending operation: what was done (with the server id of a folder created offline).
    private func resolveFolder(_ folder: PendingFolder, folders: any FolderServer, listed: inout [ServerFolder]?,
                               userId: String) async throws -> FolderReport {
        func report(_ outcome: FolderReport.Outcome, _ serverId: String?) -> FolderReport {
            FolderReport(folderId: folder.folderId, change: folder.change, outcome: outcome, serverId: serverId)
        }
        switch folder.change {
        case .create:
            guard let name = folder.name.flatMap({ try? EncString($0) }) else {
                throw ServerFailure(.rejected, "folder \(folder.folderId): its name is not an encrypted string")
            }
            var serverId = folder.mappedServerId
            let mappedStep = folder.steps.last { $0.type == .folderMapped }
            var (serverName, serverRevision) = (mappedStep?.outcome.folderName, mappedStep?.outcome.revisionDate)
            if serverId == nil {
                let markers = Set(folder.steps.filter { $0.type == .folderCreatePlanned }.compactMap(\.outcome.marker) + [name.serialized])
                if listed == nil { listed = try await folders.listFolders() }
                var found = listed?.first { markers.contains($0.name.serialized) }
                if found == nil {
                    var planned = OutcomeBody(at: now, marker: name.serialized, reason: "about to create the folder")
                    planned.folderName = name.serialized
                    try await recordFolder(folder, [(.folderCreatePlanned, planned)], userId: userId)
                    found = try await folders.createFolder(encryptedName: name)
                }
                guard let created = found else { preconditionFailure("a created folder") }
                var mapped = OutcomeBody(at: now, serverId: created.id, revisionDate: created.revisionDate, reason: "created offline")
                mapped.folderName = created.name.serialized
                try await recordFolder(folder, [(.folderMapped, mapped)], userId: userId)
                (serverId, serverName, serverRevision) = (created.id, created.name.serialized, created.revisionDate)
            }
            guard let serverId else { preconditionFailure("a mapped folder") }
            var events: [(VaultEventType, OutcomeBody)] = []
            var kept = ServerFolder(id: serverId, name: name, revisionDate: serverRevision)
            if serverName != name.serialized {
                // Renamed after the create was sent: the server has the older name.
                let renamed = try await folders.renameFolder(id: serverId, encryptedName: name)
                events.append((.folderRenameApplied, OutcomeBody(at: now, serverId: serverId, revisionDate: renamed.revisionDate)))
                kept = renamed
            }
            events.append((.folderResolved, OutcomeBody(at: now, serverId: serverId)))
            try await recordFolder(folder, events, userId: userId, keeping: .put(kept))
            return report(.created, serverId)
        case .rename:
            guard let name = folder.name.flatMap({ try? EncString($0) }) else {
                throw ServerFailure(.rejected, "folder \(folder.folderId): its name is not an encrypted string")
            }
            let serverId = try store.projection(userId: userId).serverFolderId(folder.folderId)
            do {
                // The local rename is the newer: it wins over another device's, no copy needed.
                let renamed = try await folders.renameFolder(id: serverId, encryptedName: name)
                try await recordFolder(folder, [(.folderRenameApplied, OutcomeBody(at: now, serverId: serverId, revisionDate: renamed.revisionDate)),
                                                (.folderResolved, OutcomeBody(at: now, serverId: serverId))], userId: userId, keeping: .put(renamed))
            } catch where error.serverErrorKind == .notFound {
                try await recordFolder(folder, [(.folderAlreadyDeleted, OutcomeBody(at: now, serverId: serverId, reason: "renamed offline; another device had deleted it")),
                                                (.folderResolved, OutcomeBody(at: now, serverId: serverId))], userId: userId,
                                       keeping: .remove([serverId, folder.folderId]))
                return report(.alreadyDeleted, serverId)
            }
            return report(.renamed, serverId)
        case .delete:
            var serverId: String? = try store.projection(userId: userId).folderIdMap?[folder.folderId]
            if serverId == nil, folder.mayBeOnServer {
                // Announced, never mapped: delete the copy if the create reached the server.
                let markers = Set(folder.steps.compactMap(\.outcome.marker))
                if listed == nil { listed = try await folders.listFolders() }
                serverId = listed?.first { markers.contains($0.name.serialized) }?.id
                if serverId == nil {
                    try await recordFolder(folder, [(.folderResolved, OutcomeBody(at: now, reason: "created and deleted offline; never on the server"))],
                                           userId: userId)
                    return report(.dropped, nil)
                }
            }
            let id = serverId ?? folder.folderId
            var outcome = FolderReport.Outcome.deleted
            do {
                try await folders.deleteFolder(id: id)
                try await recordFolder(folder, [(.folderDeleteApplied, OutcomeBody(at: now, serverId: id)),
                                                (.folderResolved, OutcomeBody(at: now, serverId: id))], userId: userId)
            } catch where error.serverErrorKind == .notFound {
                try await recordFolder(folder, [(.folderAlreadyDeleted, OutcomeBody(at: now, serverId: id, reason: "deleted offline; another device had deleted it")),
                                                (.folderResolved, OutcomeBody(at: now, serverId: id))], userId: userId)
                outcome = .alreadyDeleted
            }
            // A sync while the delete was pending put the server's copies, still in the folder,
            // back in place: the local items go where the server's now are, to no folder.
            try await store.moveLocalCopies(userId: userId, outOf: [id, folder.folderId])
            return report(outcome, id)
        }
    }

    /// Appends folder outcomes, covering the folder's operations the pass read: a rename saved
    /// meanwhile keeps the folder pending (its `folderResolved` is left out). `keeping` changes
    /// the folders kept on the device in the same transaction (what the server now has).
    private func recordFolder(_ folder: PendingFolder, _ events: [(VaultEventType, OutcomeBody)], userId: String,
                              keeping kept: FolderCacheChange? = nil) async throws {
        var keep: (@Sendable (LogTransaction) throws -> Void)?
        if let kept { keep = { [store] txn in try store.changeKeptFolders(kept, userId: userId, in: txn) } }
        _ = try await store.appendOutcomes(userId: userId, cipherId: folder.folderId, coveredThrough: folder.versionSequences.last ?? 0,
                                           events: events.map { .init(cipherId: folder.folderId, type: $0.0, body: .outcome($0.1)) },
                                           localChanges: [], alsoInTransaction: keep)
    }

    /// The change with its folder as the server must get it: a folder created offline under its
    /// server id, a folder the server no longer has as none (the folder that was lost). Nil
    /// when the item must wait for its folder's create.
    func withServerFolder(_ change: PendingChange, run: RunContext) -> (change: PendingChange, lostFolder: String?)? {
        // Every change type: a trash move may carry edits it pushes first.
        guard change.changeType != .hardDelete, let folderId = change.latest.folderId else { return (change, nil) }
        if run.folders.waiting.contains(folderId) { return nil }
        var fixed = change
        fixed.latest.folderId = run.folders.sendable(folderId)
        return (fixed, fixed.latest.folderId == nil ? (run.folders.idMap[folderId] ?? folderId) : nil)
    }

    /// Records that the item's folder was gone (once per folder and change).
    func recordLostFolder(_ item: inout Item, folderId: String, run: RunContext) async throws {
        guard !item.steps.contains(where: { $0.type == .itemFolderMissing && $0.outcome.folderId == folderId }) else { return }
        var body = OutcomeBody(at: now, reason: "the item's folder was deleted by another device; it was saved with no folder")
        body.folderId = folderId
        try await record(&item, .itemFolderMissing, body, run: run)
    }
}

extension OfflineSyncResolver {
    /// The folder id a copy the resolver sends carries for `folderId`: the server's id of a
    /// folder created offline, nil for one the server no longer has or this device deleted.
    func folderToSend(_ folderId: String?, run: RunContext) throws -> String? {
        guard let id = run.folders.sendable(folderId), try !store.isFolderDeleted(userId: run.userId, folderId: id) else { return nil }
        return id
    }

    /// Whether a refused push's folder is gone: deleted on this device, or no longer listed by
    /// the server (another device deleted it while the run went on; recorded as gone here).
    func isFolderGone(_ folderId: String, run: RunContext) async throws -> Bool {
        if try store.isFolderDeleted(userId: run.userId, folderId: folderId) { return true }
        guard let folders = server as? any FolderServer else { return false }
        return try await store.recordIfFolderGone(folderId, userId: run.userId, listing: folders)
    }

    /// The PUT of an item's version, with its folder checked against the folders deleted on this
    /// device (``VaultLogStore/markFoldersDeleted(userId:_:in:)``): a deleted one is not sent.
    /// An online folder delete from another screen can run beside the run, after its folder pass
    /// listed the folders; if the server answers with the item in a folder deleted meanwhile
    /// (Bitwarden keeps the id as sent) the version is sent again in no folder, and if it refuses
    /// the folder (Vaultwarden) it is sent once more without it.
    func sendUpdate(_ payload: Cipher, lastKnownRevisionDate: BitwardenDate?, run: RunContext) async throws -> Cipher {
        var payload = payload
        if let folderId = payload.folderId, try store.isFolderDeleted(userId: run.userId, folderId: folderId) { payload.folderId = nil }
        let updated: Cipher
        do {
            updated = try await server.updateCipher(payload, lastKnownRevisionDate: lastKnownRevisionDate)
        } catch where error.serverErrorKind == .notFound {
            guard let folderId = payload.folderId, try await isFolderGone(folderId, run: run) else { throw error }
            payload.folderId = nil
            return try await server.updateCipher(payload, lastKnownRevisionDate: lastKnownRevisionDate)
        }
        run.folders.sent.note(updated)
        guard let folderId = updated.folderId, try store.isFolderDeleted(userId: run.userId, folderId: folderId) else { return updated }
        logger.info("the item's folder was deleted during the push; sending it again in no folder", metadata: ["cipher": "\(updated.id ?? "?")"])
        var moved = updated
        moved.folderId = nil
        return try await server.updateCipher(moved, lastKnownRevisionDate: updated.revisionDate)
    }
}
