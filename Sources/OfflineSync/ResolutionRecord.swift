import Foundation
import VaultCrypto
import VaultModel

/// One thing the resolver (or the user, for a discarded change) did to an item, read back from
/// the log: what an app shows after a sync ("your edit of Bank was kept as a backup because the
/// other device changed it too"). Records survive a relaunch (they are events in the log) until
/// a retention policy compacts them away, and every process on the store reads the same ones.
///
/// ```swift
/// for record in try store.resolutionRecords(userId: uid, after: lastSeen) where record.isConflict {
///     let backup = try record.backupName(userKey: key) ?? "-"
///     print(record.kind, record.reason ?? "", backup)
/// }
/// ```
public struct ResolutionRecord: Sendable, Equatable, Identifiable {
    /// What happened.
    public enum Kind: Sendable, Equatable {
        /// This device's version is on the server (an update, or an edit of a trashed item).
        case pushed
        /// Another device had changed other parts of the item: this device's change and the
        /// other device's are both on the server, in one item (no backup). The parts each side
        /// changed.
        case merged(MergedParts)
        /// An item created offline got its server id (``ResolutionRecord/serverId``).
        case idMapped
        /// The server no longer had the item; it was created again from this device's version.
        case recreated
        /// The other device's (server's) version was saved as a backup item before this device's
        /// version replaced it: this device's version won.
        case serverVersionBackedUp
        /// This device's version lost and was saved as a backup item; the server's version stays.
        case localVersionBackedUp
        /// Passwords that did not fit the item's password history were saved in a copy (part n).
        case passwordOverflowCopy(part: Int)
        /// The server's version replaced the local copy (this device's version is in a backup,
        /// recorded separately as ``localVersionBackedUp``).
        case serverVersionKept
        /// A trash move or permanent delete was applied on the server.
        case deleted
        /// The delete was dropped: another device changed the item meanwhile, and its version
        /// was restored on this device.
        case deleteDropped
        /// The item was already gone from the server; removed locally.
        case alreadyGone
        /// The user discarded the pending change; the server's version (if any) replaced it.
        case discarded
        /// The user's restore from the trash was applied: the server took the item out of its trash.
        case restored
        /// A copy the resolver made (a backup, a re-created item) is without one of the
        /// attachments of the version it preserves: the file is nowhere any more (the server
        /// deleted the item with its files). ``ResolutionRecord/reason`` names the file.
        case attachmentNotCopied
        /// The item's folder was deleted by another device: the item was saved with no folder
        /// (``ResolutionRecord/reason`` says which folder).
        case folderMissing
    }

    /// The event's sequence in the log (also the record's identity and the cursor for
    /// ``VaultLogStore/resolutionRecords(userId:after:)``).
    public let sequence: UInt64
    /// The item's id in the log (a temporary id for an item created offline).
    public let cipherId: String
    /// The item's server id, when the event names one.
    public let serverId: String?
    /// What happened.
    public let kind: Kind
    /// When it was recorded.
    public let at: Date
    /// Why, in the resolver's words (for example "the server copy is newer").
    public let reason: String?
    /// The backup item's server id, for the backup and overflow-copy kinds.
    public let backupId: String?
    /// The backup item as created (encrypted), for the backup and overflow-copy kinds.
    public let backup: Cipher?

    /// ``sequence``.
    public var id: UInt64 { sequence }

    /// True for what a user should hear about: a backup of either side, an overflow copy, a
    /// dropped delete, the server's version kept, a re-created item, a discarded change, a merge
    /// with another device's change, an attachment a copy could not keep.
    public var isConflict: Bool {
        switch kind {
        case .serverVersionBackedUp, .localVersionBackedUp, .passwordOverflowCopy, .serverVersionKept, .deleteDropped,
             .recreated, .discarded, .merged, .attachmentNotCopied, .folderMissing:
            true
        case .pushed, .idMapped, .deleted, .alreadyGone, .restored:
            false
        }
    }

    /// Which side's version the item kept, for the kinds that decide it (a merge kept both: nil).
    public var sideKept: ConflictSide? {
        switch kind {
        case .serverVersionBackedUp, .pushed, .recreated, .restored: .local
        case .localVersionBackedUp, .serverVersionKept, .deleteDropped, .discarded: .server
        case .idMapped, .passwordOverflowCopy, .deleted, .alreadyGone, .merged, .attachmentNotCopied, .folderMissing: nil
        }
    }

    /// The backup item's name, decrypted with the user's key (nil when there is no backup).
    public func backupName(userKey: SymmetricCryptoKey) throws -> String? {
        guard let backup else { return nil }
        return try backup.decrypt(userKey: userKey).name
    }

    /// Creates a record (the store reads them from the log: ``VaultLogStore/resolutionRecords(userId:after:)``).
    public init(sequence: UInt64, cipherId: String, serverId: String?, kind: Kind, at: Date, reason: String?,
                backupId: String? = nil, backup: Cipher? = nil) {
        self.sequence = sequence
        self.cipherId = cipherId
        self.serverId = serverId
        self.kind = kind
        self.at = at
        self.reason = reason
        self.backupId = backupId
        self.backup = backup
    }

    /// The record of an outcome event, or nil for an event type that is not reported.
    init?(_ event: VaultEvent) {
        guard let body = event.outcome else { return nil }
        let kind: Kind
        switch event.type {
        case .pushed: kind = body.merged.map { .merged($0) } ?? .pushed
        case .idMapped: kind = .idMapped
        case .recreated: kind = .recreated
        case .serverCopyKept: kind = .serverVersionKept
        case .deleteApplied: kind = .deleted
        case .deleteDropped: kind = .deleteDropped
        case .cleanedUp: kind = .alreadyGone
        case .changeDiscarded: kind = .discarded
        case .restoreApplied: kind = .restored
        case .attachmentUnavailable: kind = .attachmentNotCopied
        case .itemFolderMissing: kind = .folderMissing
        case .backupCreated:
            switch body.purpose {
            case .passwordOverflow(let part): kind = .passwordOverflowCopy(part: part)
            case .backup, .create, .recreate, nil:
                kind = body.backupOf == .server ? .serverVersionBackedUp : .localVersionBackedUp
            }
        case .created, .updated, .softDeleted, .hardDeleted, .restored, .resolutionFailed, .resolved, .clearedAfterOnlineSuccess,
             .retryRequested, .createPlanned, .attachmentPlanned, .attachmentCopied, .syncAborted, .syncApplied, .reportsReviewed,
             .folderCreated, .folderRenamed, .folderDeleted, .folderCreatePlanned, .folderMapped, .folderRenameApplied, .folderDeleteApplied, .folderAlreadyDeleted, .folderResolved, .folderChangeDiscarded:
            return nil
        }
        let isCopy = event.type == .backupCreated
        self.init(sequence: event.sequence, cipherId: event.cipherId, serverId: isCopy ? nil : body.serverId, kind: kind,
                  at: body.at.date, reason: body.reason, backupId: isCopy ? body.backupId : nil,
                  backup: isCopy ? body.cipher : nil)
    }

    /// The event types that make records (filtered on headers before any body is opened).
    static let reportedTypes: Set<UInt16> = Set([VaultEventType.pushed, .idMapped, .recreated, .serverCopyKept, .deleteApplied,
                                                 .deleteDropped, .cleanedUp, .changeDiscarded, .backupCreated,
                                                 .restoreApplied, .attachmentUnavailable, .itemFolderMissing].map(\.rawValue))
}
