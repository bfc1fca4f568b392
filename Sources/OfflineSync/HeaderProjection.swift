import EventLog

/// The part of the projection computable from headers alone (while the vault is locked):
/// which items are pending and with what change type.
public struct HeaderProjection: Sendable, Equatable {
    /// The last sequence folded.
    public var lastSequence: UInt64 = 0
    /// Pending change type by cipher id.
    public var pending: [String: PendingChangeType] = [:]
    /// Pending creates that may have reached the server (a `createPlanned` or `idMapped` was
    /// recorded): a delete keeps them pending, as in ``Projection``. Only `createPlanned` events
    /// of creates count; the header does not say the purpose, so a backup's plan also marks the
    /// item (harmless: a create has no backups).
    public var uncertainCreates: Set<String> = []

    /// The empty header projection.
    public init() {}

    /// Folds one header.
    public mutating func apply(_ header: EventHeader) {
        lastSequence = header.sequence
        guard let type = VaultEventType(rawValue: header.eventType), !header.cipherId.isEmpty else { return }
        let id = header.cipherId
        // Every type listed: a new event type does not compile until this fold places it.
        switch type {
        case .created, .updated, .softDeleted, .hardDeleted, .restored:
            switch PendingChangeType.merge(pending[id], type, uncertainCreate: uncertainCreates.contains(id)) {
            case .discard:
                pending[id] = nil
                uncertainCreates.remove(id)
            case .pending(let type): pending[id] = type
            }
        case .resolved, .clearedAfterOnlineSuccess:
            pending[id] = nil
            uncertainCreates.remove(id)
        case .pushed, .idMapped, .backupCreated, .serverCopyKept, .recreated, .deleteApplied, .deleteDropped, .cleanedUp,
             .resolutionFailed, .retryRequested, .createPlanned, .changeDiscarded, .restoreApplied, .attachmentPlanned,
             .attachmentCopied, .attachmentUnavailable, .itemFolderMissing:
            // Announced or mapped: a create that may be on the server (as ``PendingChange/uncertainCreate``).
            if type.marksUncertainCreate, pending[id] == .create { uncertainCreates.insert(id) }
        // Folders are not items: the badge counts items.
        case .syncAborted, .syncApplied, .reportsReviewed, .folderCreated, .folderRenamed, .folderDeleted, .folderCreatePlanned,
             .folderMapped, .folderRenameApplied, .folderDeleteApplied, .folderAlreadyDeleted, .folderResolved, .folderChangeDiscarded:
            break
        }
    }

    /// The number of pending items (the badge a locked vault shows).
    public var count: Int { pending.count }
}
