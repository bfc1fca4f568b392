import EventLog
import Foundation

/// What ``OfflineSyncResolver/discardPendingFolderChange(userId:folderId:)`` did.
public enum FolderDiscardResult: Sendable, Equatable {
    /// The folder's pending change (create, rename or delete) will not be sent; nothing is
    /// pending for the folder.
    case discarded(PendingFolder.Change)
    /// Nothing was pending for the folder: nothing done.
    case nothingPending
    /// The user changed the folder again while the discard ran: the newer change stays pending
    /// and nothing was discarded.
    case newerChangePending
}

extension OfflineSyncResolver {
    // MARK: The user's decision on a stuck folder change

    /// Discards a folder's pending change, the way out of one the server keeps refusing (a
    /// folder change is tried again by every sync and never dead-lettered; while one waits,
    /// the app's count of waiting folder changes, `SyncStatus.pendingFolderCount` in
    /// VaultLogKit, stays above zero and a logout refuses). The operations stay in the log
    /// (history, export); the decision is a
    /// ``VaultEventType/folderChangeDiscarded`` event, then `folderResolved`. Offline as well as
    /// online: no request is sent.
    ///
    /// - A **create** never sent is dropped: the items in it go to no folder on this device, and
    ///   their pending changes are sent in no folder. A create the server may have received (its
    ///   answer lost) is no longer looked for; such a folder shows up with the next sync. A create
    ///   the server answered keeps its mapping: items in it are sent under its server id.
    /// - A **rename** is not sent: the folder keeps the server's name.
    /// - A **delete** is not sent: the folder stays on the server and is listed again from the
    ///   next sync; the items this device moved out of it come back with that sync, and pending
    ///   changes of items in it are sent in it.
    ///
    /// Beside other callers: waits for a resolution of the user in progress (in this process or
    /// another), then decides on the operations it read; a folder change saved meanwhile is never
    /// discarded (``FolderDiscardResult/newerChangePending``).
    public func discardPendingFolderChange(userId: String, folderId: String) async throws -> FolderDiscardResult {
        try await store.resolutionGate.run(userId: userId, settle: options.settleAfterInterruptedRun) { _ in
            let projection = try store.projection(userId: userId)
            guard let folder = projection.folders?[folderId] else { return .nothingPending }
            let covered = folder.versionSequences.last ?? projection.lastSequence
            let serverId = projection.folderIdMap?[folderId]
            let reason: String
            switch folder.change {
            case .create: reason = serverId == nil ? "the create is not sent; its items go to no folder" : "the folder stays as the server has it"
            case .rename: reason = "the rename is not sent; the folder keeps the server's name"
            case .delete: reason = "the delete is not sent; the folder stays on the server"
            }
            let written = try await store.appendOutcomes(
                userId: userId, cipherId: folderId, coveredThrough: covered,
                events: [.init(cipherId: folderId, type: .folderChangeDiscarded, body: .outcome(OutcomeBody(at: now, serverId: serverId, reason: reason))),
                         .init(cipherId: folderId, type: .folderResolved, body: .outcome(OutcomeBody(at: now, serverId: serverId)))],
                localChanges: [],
                ifCurrent: { [store] txn in
                    switch folder.change {
                    case .create:
                        if serverId == nil { _ = try store.moveLocalCopies(userId: userId, outOf: [folderId], in: txn) }
                    case .rename:
                        break
                    case .delete:
                        try store.unmarkFoldersDeleted(userId: userId, Set([folderId, serverId].compactMap { $0 }), in: txn)
                    }
                })
            if written.superseded { return .newerChangePending }
            logger.notice("pending folder change discarded on request", metadata: ["folder": "\(folderId)", "change": "\(folder.change)"])
            return .discarded(folder.change)
        }
    }
}
