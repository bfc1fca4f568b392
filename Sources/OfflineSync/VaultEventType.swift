import Foundation

/// The event types VaultLog writes (the `eventType` of an envelope header). Codes are part of
/// the stored format: never renumber, only add.
public enum VaultEventType: UInt16, Sendable, Codable, CaseIterable, CustomStringConvertible {
    // Operations, appended by `VaultRepository` when an edit is saved offline.
    /// A new item (temporary id until the server assigns one).
    case created = 1
    /// An edit of an existing item.
    case updated = 2
    /// Moved to the trash (`deletedDate` set).
    case softDeleted = 3
    /// Permanently deleted; the local copy is removed.
    case hardDeleted = 4
    /// Taken out of the trash (`deletedDate` cleared); the server must end with the item active.
    case restored = 5
    /// A folder created offline (header's cipher id: its temporary id; body's `folderName`).
    case folderCreated = 6
    /// A folder renamed offline (header's cipher id: the folder's id; body's `folderName`).
    case folderRenamed = 7
    /// A folder deleted offline (header's cipher id: the folder's id).
    case folderDeleted = 8

    // Outcomes, appended by the resolver, the repository and sync.
    /// The local version is on the server (create or update); body has the server id and revision.
    case pushed = 100
    /// A temporary id was mapped to the server's id.
    case idMapped = 101
    /// A backup copy of the losing side was created on the server.
    case backupCreated = 102
    /// The server's copy won; it replaced the local copy.
    case serverCopyKept = 103
    /// The server no longer had the item (404); the local version was created again.
    case recreated = 104
    /// A soft or permanent delete was applied on the server.
    case deleteApplied = 105
    /// The server's copy changed since the delete; the delete was dropped and the server copy restored locally.
    case deleteDropped = 106
    /// The server no longer had the deleted item (404); cleaned up locally.
    case cleanedUp = 107
    /// A resolution attempt failed; body has the error, attempt number and next retry time.
    case resolutionFailed = 108
    /// Everything pending for this item is done.
    case resolved = 109
    /// An online operation succeeded, so any pending state of the item is obsolete.
    case clearedAfterOnlineSuccess = 110
    /// A dead-lettered item was put back into automatic retries on request.
    case retryRequested = 111
    /// The resolver is about to create an item on the server (a create, a re-create or a
    /// backup); body has the exact encrypted payload and its unique `marker` (the encrypted
    /// name string), so a retry after an uncertain failure finds the copy instead of posting twice.
    case createPlanned = 112
    /// The user discarded the item's pending change (a dead letter): the server's version wins
    /// locally. Body has the server's copy, or none when the server does not hold the item. The
    /// discarded version stays in the log (history, export).
    case changeDiscarded = 113
    /// The item was taken out of the server's trash (`PUT …/restore`) for a pending restore;
    /// body has the revision the server gave the restore.
    case restoreApplied = 114
    /// The resolver is about to upload a copy of an attachment to a copy of the item it made (a
    /// backup, a re-created item): body's `attachment` names the attachment and the copy, and
    /// `marker` is the copy's encrypted file name (unique), so a retry after a lost answer finds
    /// the upload on the server instead of uploading it twice.
    case attachmentPlanned = 115
    /// An attachment was copied to a copy of the item the resolver made; body's `attachment` has
    /// the new attachment's id, `revisionDate` the copy's revision after the upload.
    case attachmentCopied = 116
    /// An attachment of a version the resolver preserved could not be copied because its file
    /// is nowhere any more (the server deleted the item with its files, or another device
    /// deleted the attachment); the copy was made without it. Body's `attachment` names it and
    /// `reason` says why, with the file name.
    case attachmentUnavailable = 117
    /// The resolver is about to create a folder made offline: body's `marker` is its encrypted
    /// name (unique), so a retry after a lost answer finds the folder instead of posting twice.
    case folderCreatePlanned = 118
    /// A folder's temporary id was mapped to the server's id (body's `serverId`): items that
    /// name the temporary id are pushed with this one.
    case folderMapped = 119
    /// A folder's offline rename is on the server (the local name wins over another device's).
    case folderRenameApplied = 120
    /// A folder's offline delete was applied on the server.
    case folderDeleteApplied = 121
    /// A folder renamed or deleted offline was already deleted by another device: nothing to do.
    case folderAlreadyDeleted = 122
    /// The item's folder was deleted by another device (body's `folderId`): the item was saved
    /// with no folder.
    case itemFolderMissing = 123
    /// Everything pending for this folder is done.
    case folderResolved = 124
    /// The user discarded the folder's pending change (body's `reason`; a create never sent is
    /// dropped, a rename or delete is not sent); followed by `folderResolved`.
    case folderChangeDiscarded = 125
    /// A sync was aborted because changes are still pending (user-level; body has count and reasons).
    case syncAborted = 200
    /// A full sync replaced the local store (user-level).
    case syncApplied = 201
    /// The app marked the resolution reports up to a sequence as reviewed (user-level; body's
    /// `sourceSequence`), so every process on the store agrees on what is new.
    case reportsReviewed = 202

    /// What an event type records.
    public enum Kind: Sendable, Equatable {
        /// A user's offline operation on one item (appended by the repository).
        case operation
        /// A user's offline operation on one folder (the header's cipher id is the folder's id).
        case folderOperation
        /// What happened to one item's pending change (appended by the resolver, the repository).
        case outcome
        /// Something about the whole vault of a user (sync), with an empty cipher id.
        case userLevel
    }

    /// The kind of this event type. Exhaustive on purpose: a new event type does not compile
    /// until it is given a kind.
    public var kind: Kind {
        switch self {
        case .created, .updated, .softDeleted, .hardDeleted, .restored:
            .operation
        case .folderCreated, .folderRenamed, .folderDeleted:
            .folderOperation
        case .pushed, .idMapped, .backupCreated, .serverCopyKept, .recreated, .deleteApplied, .deleteDropped, .cleanedUp,
             .resolutionFailed, .resolved, .clearedAfterOnlineSuccess, .retryRequested, .createPlanned, .changeDiscarded,
             .restoreApplied, .attachmentPlanned, .attachmentCopied, .attachmentUnavailable, .folderCreatePlanned, .folderMapped,
             .folderRenameApplied, .folderDeleteApplied, .folderAlreadyDeleted, .itemFolderMissing, .folderResolved, .folderChangeDiscarded:
            .outcome
        case .syncAborted, .syncApplied, .reportsReviewed:
            .userLevel
        }
    }

    /// True for the offline operations on items (created, updated, softDeleted, hardDeleted,
    /// restored); folder operations are ``isFolderEvent``.
    public var isOperation: Bool { kind == .operation }

    /// True for the folder operations and the resolver's outcomes about folders: the header's
    /// cipher id is a folder's id, and the fold keeps them apart from items.
    public var isFolderEvent: Bool {
        switch self {
        case .folderCreated, .folderRenamed, .folderDeleted, .folderCreatePlanned, .folderMapped, .folderRenameApplied,
             .folderDeleteApplied, .folderAlreadyDeleted, .folderResolved, .folderChangeDiscarded:
            true
        case .created, .updated, .softDeleted, .hardDeleted, .restored, .pushed, .idMapped, .backupCreated, .serverCopyKept,
             .recreated, .deleteApplied, .deleteDropped, .cleanedUp, .resolutionFailed, .resolved, .clearedAfterOnlineSuccess,
             .retryRequested, .createPlanned, .changeDiscarded, .restoreApplied, .attachmentPlanned, .attachmentCopied,
             .attachmentUnavailable, .itemFolderMissing, .syncAborted, .syncApplied, .reportsReviewed:
            false
        }
    }

    /// Whether an outcome of this type on a pending create means the create may have reached
    /// the server (the resolver announced the POST, or mapped the server's id): a delete must
    /// then delete the server copy too, so the change is not discarded. One rule for the fold of
    /// events (``PendingChange/uncertainCreate``) and the fold of headers (``HeaderProjection``).
    var marksUncertainCreate: Bool {
        switch self {
        case .createPlanned, .idMapped:
            true
        case .created, .updated, .softDeleted, .hardDeleted, .restored, .pushed, .backupCreated, .serverCopyKept, .recreated,
             .deleteApplied, .deleteDropped, .cleanedUp, .resolutionFailed, .resolved, .clearedAfterOnlineSuccess,
             .retryRequested, .changeDiscarded, .restoreApplied, .attachmentPlanned, .attachmentCopied, .attachmentUnavailable,
             .syncAborted, .syncApplied, .reportsReviewed, .folderCreated, .folderRenamed, .folderDeleted, .folderCreatePlanned,
             .folderMapped, .folderRenameApplied, .folderDeleteApplied, .folderAlreadyDeleted, .itemFolderMissing, .folderResolved,
             .folderChangeDiscarded:
            false
        }
    }

    /// The case name, e.g. `"softDeleted"` or `"syncApplied"`.
    public var description: String {
        switch self {
        case .created: "created"
        case .updated: "updated"
        case .softDeleted: "softDeleted"
        case .hardDeleted: "hardDeleted"
        case .restored: "restored"
        case .folderCreated: "folderCreated"
        case .folderRenamed: "folderRenamed"
        case .folderDeleted: "folderDeleted"
        case .pushed: "pushed"
        case .idMapped: "idMapped"
        case .backupCreated: "backupCreated"
        case .serverCopyKept: "serverCopyKept"
        case .recreated: "recreated"
        case .deleteApplied: "deleteApplied"
        case .deleteDropped: "deleteDropped"
        case .cleanedUp: "cleanedUp"
        case .resolutionFailed: "resolutionFailed"
        case .resolved: "resolved"
        case .clearedAfterOnlineSuccess: "clearedAfterOnlineSuccess"
        case .retryRequested: "retryRequested"
        case .createPlanned: "createPlanned"
        case .changeDiscarded: "changeDiscarded"
        case .restoreApplied: "restoreApplied"
        case .attachmentPlanned: "attachmentPlanned"
        case .attachmentCopied: "attachmentCopied"
        case .attachmentUnavailable: "attachmentUnavailable"
        case .folderCreatePlanned: "folderCreatePlanned"
        case .folderMapped: "folderMapped"
        case .folderRenameApplied: "folderRenameApplied"
        case .folderDeleteApplied: "folderDeleteApplied"
        case .folderAlreadyDeleted: "folderAlreadyDeleted"
        case .itemFolderMissing: "itemFolderMissing"
        case .folderResolved: "folderResolved"
        case .folderChangeDiscarded: "folderChangeDiscarded"
        case .syncAborted: "syncAborted"
        case .syncApplied: "syncApplied"
        case .reportsReviewed: "reportsReviewed"
        }
    }

    /// Parses the name `description` prints.
    public init?(name: String) {
        guard let match = Self.allCases.first(where: { $0.description == name }) else { return nil }
        self = match
    }
}
