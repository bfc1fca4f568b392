import Foundation
import Logging
import VaultCrypto
import VaultModel

/// What happened to one pending item in a run.
public struct ItemReport: Sendable, Equatable {
    /// How the item ended the run.
    public enum Outcome: String, Sendable, Equatable {
        /// The local version is on the server (update or create); the server's copy was this
        /// device's own or unchanged, so nothing was backed up.
        case pushed
        /// The local version won a conflict and is on the server; the server's copy (another
        /// device's change, or a soft conflict's) was saved as a backup (``ItemReport/backupIds``).
        case localKept
        /// Another device changed other parts of the item: the merged item (both changes) is on
        /// the server, with no conflict backup.
        case merged
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

    /// The item (its id in the log: a temporary id for a create).
    public var cipherId: String
    /// What was pending.
    public var changeType: PendingChangeType
    /// What the run did with it.
    public var outcome: Outcome
    /// The server id after the run (creates, re-creates).
    public var serverId: String?
    /// Server ids of backups made in this run.
    public var backupIds: [String] = []
    /// The error of a failed attempt.
    public var error: String?
    /// After a failure, when the item is tried again.
    public var nextRetryAt: BitwardenDate?
    /// The user saved the item again while this run resolved it (in this process or another):
    /// ``outcome`` is what the run did with the version it read, and the newer version is still
    /// pending (the run's next pass, or the next sync, resolves it).
    public var newerVersionPending: Bool = false
    /// File names of attachments a copy made in this run (a backup, a re-created item) could
    /// not keep because their files are nowhere any more (`attachmentUnavailable` in the log).
    public var attachmentsNotCopied: [String] = []

    /// Whether the item is no longer pending after the run.
    public var isSettled: Bool {
        !newerVersionPending && ![.failed, .deadLetter, .skipped].contains(outcome)
    }
}

/// What happened to one pending folder change in a run (folders go before items).
public struct FolderReport: Sendable, Equatable {
    /// How the folder change ended the run.
    public enum Outcome: String, Sendable, Equatable {
        /// Created on the server (its id in ``FolderReport/serverId``), exactly once.
        case created
        /// The new name is on the server.
        case renamed
        /// Deleted on the server.
        case deleted
        /// Another device had deleted the folder: the rename or delete had nothing left to do.
        case alreadyDeleted
        /// Created and deleted on this device before it reached the server: nothing to send.
        case dropped
        /// The attempt failed (``FolderReport/error``); the change stays pending and is tried
        /// again by the next sync. Items in a folder whose create cannot reach the server wait
        /// for it; if the server refused the create, they go to no folder.
        case failed
    }

    /// The folder (its temporary id for a create made offline).
    public var folderId: String
    /// What was pending.
    public var change: PendingFolder.Change
    /// What the run did with it.
    public var outcome: Outcome
    /// The folder's server id after the run.
    public var serverId: String?
    /// The error of a failed attempt.
    public var error: String?

    /// Whether the folder change is no longer pending after the run.
    public var isSettled: Bool { outcome != .failed }
}

/// The result of ``OfflineSyncResolver/processPendingChanges(userId:)``.
public struct ResolutionReport: Sendable, Equatable {
    /// One entry per pending item, in the order they were first edited.
    public var items: [ItemReport] = []
    /// One entry per pending folder change the run tried, oldest first.
    public var folders: [FolderReport] = []

    /// Items no longer pending.
    public var resolvedCount: Int { items.filter(\.isSettled).count }
    /// Items still pending after the run.
    public var remainingCount: Int { items.count - resolvedCount }

    /// This report with the items of a later pass of the same run: an item's later report
    /// replaces its earlier one, new items are added at the end.
    func updated(with later: ResolutionReport) -> ResolutionReport {
        var items = self.items
        for report in later.items {
            if let index = items.firstIndex(where: { $0.cipherId == report.cipherId }) {
                // A later pass that only skipped an item says less than the pass that resolved it.
                if report.outcome != .skipped || items[index].outcome == .skipped { items[index] = report }
            } else {
                items.append(report)
            }
        }
        var folders = self.folders
        for report in later.folders {
            if let index = folders.firstIndex(where: { $0.folderId == report.folderId }) { folders[index] = report } else { folders.append(report) }
        }
        return ResolutionReport(items: items, folders: folders)
    }
}
