import EventLog
import VaultModel

/// The pending state of one folder: the fold of its offline operations since it was last
/// resolved. A create followed by renames stays a create with the latest name; a rename
/// followed by renames is one rename; a delete wins over everything before it; a create
/// deleted before it reached the server leaves nothing (unless it may be on the server).
public struct PendingFolder: Codable, Sendable, Equatable {
    /// What the server must be told about a folder.
    public enum Change: String, Codable, Sendable {
        /// A folder made offline: the server does not have it yet (renames stay a create).
        case create
        /// A new name for a folder the server has.
        case rename
        /// Delete the folder (the servers move its items to no folder).
        case delete
    }

    /// The folder's id: its temporary id for a create, else the server's id.
    public var folderId: String
    /// What is pending.
    public var change: Change
    /// The latest encrypted name (create, rename); nil for a delete.
    public var name: String?
    /// When the latest offline operation was made.
    public var updatedAt: BitwardenDate
    /// Sequences of the operations since the last resolution.
    public var versionSequences: [UInt64]
    /// Resolver steps completed since (folderCreatePlanned, folderMapped...).
    public var steps: [ResolutionStep] = []

    /// The server id an earlier attempt created (or found) the folder under.
    public var mappedServerId: String? {
        steps.last(where: { $0.type == .folderMapped })?.outcome.serverId
    }

    /// The create may have reached the server (announced or mapped): a delete must then delete
    /// the server's folder too.
    public var mayBeOnServer: Bool {
        steps.contains { $0.type == .folderCreatePlanned || $0.type == .folderMapped }
    }
}

extension Projection {
    /// Folds a folder event (``VaultEventType/isFolderEvent``) into ``folders`` and ``folderIdMap``.
    mutating func applyFolder(_ type: VaultEventType, sequence: UInt64, folderId id: String, body: OutcomeBody) {
        var all = folders ?? [:]
        defer { folders = all.isEmpty ? nil : all }
        switch type {
        case .folderCreated:
            all[id] = PendingFolder(folderId: id, change: .create, name: body.folderName, updatedAt: body.at, versionSequences: [sequence])
        case .folderRenamed:
            if var folder = all[id] {
                // A delete is final; a create keeps being a create, with the new name.
                guard folder.change != .delete else { return }
                folder.name = body.folderName
                folder.updatedAt = body.at
                folder.versionSequences.append(sequence)
                all[id] = folder
            } else {
                all[id] = PendingFolder(folderId: id, change: .rename, name: body.folderName, updatedAt: body.at,
                                        versionSequences: [sequence])
            }
        case .folderDeleted:
            if var folder = all[id] {
                // Never reached the server: nothing to tell it.
                if folder.change == .create && !folder.mayBeOnServer {
                    all[id] = nil
                    return
                }
                folder.change = .delete
                folder.name = nil
                folder.updatedAt = body.at
                folder.versionSequences.append(sequence)
                all[id] = folder
            } else {
                all[id] = PendingFolder(folderId: id, change: .delete, name: nil, updatedAt: body.at, versionSequences: [sequence])
            }
        case .folderMapped:
            if let serverId = body.serverId {
                var map = folderIdMap ?? [:]
                map[id] = serverId
                folderIdMap = map
            }
            all[id]?.steps.append(ResolutionStep(type: type, sequence: sequence, outcome: body))
        case .folderCreatePlanned, .folderRenameApplied, .folderDeleteApplied, .folderAlreadyDeleted, .folderChangeDiscarded:
            all[id]?.steps.append(ResolutionStep(type: type, sequence: sequence, outcome: body))
        case .folderResolved:
            all[id] = nil
        case .created, .updated, .softDeleted, .hardDeleted, .restored, .pushed, .idMapped, .backupCreated, .serverCopyKept,
             .recreated, .deleteApplied, .deleteDropped, .cleanedUp, .resolutionFailed, .resolved, .clearedAfterOnlineSuccess,
             .retryRequested, .createPlanned, .changeDiscarded, .restoreApplied, .attachmentPlanned, .attachmentCopied,
             .attachmentUnavailable, .itemFolderMissing, .syncAborted, .syncApplied, .reportsReviewed:
            preconditionFailure("applyFolder takes folder events only")
        }
    }

    /// The server id of a folder: the mapped id of one created offline, else `id` itself.
    public func serverFolderId(_ id: String) -> String { folderIdMap?[id] ?? id }
}
