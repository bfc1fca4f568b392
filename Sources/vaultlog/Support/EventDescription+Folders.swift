import Foundation
@_spi(Tools) import OfflineSync

extension EventRecord {
    /// The sentence for a folder event (the folder's name stays encrypted here).
    static func folderText(_ type: VaultEventType, _ out: OutcomeBody?) -> String {
        switch type {
        case .folderCreated: "folder created offline (temporary id until the server assigns one)"
        case .folderRenamed: "folder renamed offline"
        case .folderDeleted: "folder deleted offline (its items go to no folder)"
        case .folderCreatePlanned:
            "about to create the folder on the server (marker recorded, so a retry finds it instead of creating it twice)"
        case .folderMapped: "folder is on the server as \(out?.serverId ?? "?"); items in it are sent with that id"
        case .folderRenameApplied: "folder's new name is on the server (this device's rename wins)"
        case .folderDeleteApplied: "folder deleted on the server"
        case .folderAlreadyDeleted: "folder was already deleted by another device; nothing left to do"
        case .folderResolved: "everything pending for the folder is done"
        case .folderChangeDiscarded: "the folder's pending change was discarded on request: " + (out?.reason ?? "not sent to the server")
        case .created, .updated, .softDeleted, .hardDeleted, .restored, .pushed, .idMapped, .backupCreated, .serverCopyKept,
             .recreated, .deleteApplied, .deleteDropped, .cleanedUp, .resolutionFailed, .resolved, .clearedAfterOnlineSuccess,
             .retryRequested, .createPlanned, .changeDiscarded, .restoreApplied, .attachmentPlanned, .attachmentCopied,
             .attachmentUnavailable, .itemFolderMissing, .syncAborted, .syncApplied, .reportsReviewed:
            type.description
        }
    }
}
