import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultModel

/// An event as `events` and `history` show it: the header always, the decoded body when the
/// key is known, and a sentence saying what happened.
struct EventRecord: Encodable {
    var sequence: UInt64
    var recordedAt: String
    var recordedAtMillis: Int64
    var userId: String
    var cipherId: String
    /// The event type's name (`created`, `backupCreated`, ...), or `unknown(N)`.
    var type: String
    var eventType: UInt16
    var formatVersion: UInt8
    /// Whether the body was opened (a key was given for this user).
    var decrypted: Bool
    /// Why the body could not be opened although a key was given.
    var bodyError: String?
    /// What happened, in words.
    var explanation: String
    var operation: OperationRecord?
    var outcome: OutcomeRecord?
    /// A version kept in the compaction snapshot (its event was removed by a retention policy).
    var keptInSnapshot: Bool?

    /// The body of an offline operation.
    struct OperationRecord: Encodable {
        var passwordChanged: Bool
        var baseRevisionDate: String?
        var at: String
        var item: ItemSummary
    }

    /// The body of an outcome: the fields that apply to its type.
    struct OutcomeRecord: Encodable {
        var at: String
        var serverId: String?
        var revisionDate: String?
        var backupId: String?
        var backupOf: String?
        var reason: String?
        var attempt: Int?
        var nextRetryAt: String?
        var deadLetter: Bool?
        var pendingCount: Int?
        var purpose: String?
        var sourceRevisionDate: String?
        var sourceSequence: UInt64?
        /// The planned payload of a `createPlanned`, summarised.
        var item: ItemSummary?
    }

    /// Describes `envelope`; opens its body when `key` is the key of its user.
    /// The closing error of a command that showed events whose body did not open with the
    /// key (exit 1, like `verify`): how many, the first, and what to run next.
    static func unreadableSummary(count: Int, first: UInt64, directory: String) -> String {
        "\(count) event(s) shown above could not be read with this key (first: sequence \(first)): "
            + "the event is damaged or not this key's; run 'vaultlog verify \(directory)' with the key for a full report"
    }

    init(envelope: Envelope, key: UnlockedUser?, reveal: Bool) {
        var event: VaultEvent?
        var bodyError: String?
        if let key, key.userId == envelope.header.userId {
            do {
                event = try VaultEvent(envelope: envelope, key: key.sealingKey)
            } catch {
                bodyError = "\(error)"
            }
        }
        self.init(header: envelope.header, event: event, bodyError: bodyError, key: key, reveal: reveal)
    }

    /// Describes a version kept in a compaction snapshot (already opened with `key`).
    init(kept event: VaultEvent, key: UnlockedUser, reveal: Bool) {
        self.init(header: event.header, event: event, bodyError: nil, key: key, reveal: reveal)
        keptInSnapshot = true
    }

    private init(header: EventHeader, event: VaultEvent?, bodyError: String?, key: UnlockedUser?, reveal: Bool) {
        sequence = header.sequence
        recordedAtMillis = header.recordedAtMillis
        recordedAt = Format.iso(millis: header.recordedAtMillis)
        userId = header.userId
        cipherId = header.cipherId
        eventType = header.eventType
        formatVersion = header.formatVersion
        let vaultType = VaultEventType(rawValue: header.eventType)
        type = vaultType?.description ?? "unknown(\(header.eventType))"
        decrypted = event != nil
        self.bodyError = bodyError
        if let event, let key {
            switch event.body {
            case .operation(let op):
                operation = OperationRecord(passwordChanged: op.passwordChanged, baseRevisionDate: op.baseRevisionDate?.text,
                                            at: op.at.text, item: ItemSummary(op.cipher, userKey: key.userKey, reveal: reveal))
            case .outcome(let body):
                outcome = OutcomeRecord(
                    at: body.at.text, serverId: body.serverId, revisionDate: body.revisionDate?.text, backupId: body.backupId,
                    backupOf: body.backupOf?.rawValue, reason: body.reason, attempt: body.attempt,
                    nextRetryAt: body.nextRetryAt?.text, deadLetter: body.deadLetter, pendingCount: body.pendingCount,
                    purpose: body.purpose?.description, sourceRevisionDate: body.sourceRevisionDate?.text, sourceSequence: body.sourceSequence,
                    item: body.cipher.map { ItemSummary($0, userKey: key.userKey, reveal: reveal) })
            }
        }
        explanation = Self.explain(header: header, type: vaultType, event: event, operation: operation)
    }

    /// `seq 12, 2026-01-01 10:00:00Z: <explanation>`.
    var line: String {
        "seq \(sequence), \(Format.time(millis: recordedAtMillis)): \(explanation)" + (keptInSnapshot == true ? " [kept in the snapshot]" : "")
    }

    // MARK: Explanations

    /// A sentence for one event. Every `VaultEventType` has one; with only the header it says
    /// what kind of event it was.
    static func explain(header: EventHeader, type: VaultEventType?, event: VaultEvent?, operation: OperationRecord?) -> String {
        guard let type else {
            return "unknown event type \(header.eventType) (written by a newer VaultLog?)"
        }
        let op = event?.operation
        let out = event?.outcome
        let base = op?.baseRevisionDate.map { " (based on server revision \($0.text))" } ?? ""
        let item = operation.map { " \($0.item.text)" } ?? ""
        let why = out?.reason.map { " (\($0))" } ?? ""
        switch type {
        case .created:
            guard let op else { return "created offline" }
            return "created offline:\(item)" + (op.passwordChanged ? ", with a password" : "")
        case .updated:
            guard let op else { return "edited offline" }
            return "edited offline, " + (op.passwordChanged ? "password changed" : "password unchanged") + base + ":" + item
        case .softDeleted:
            guard event != nil else { return "moved to the trash offline" }
            return "moved to the trash offline" + base + ":" + item
        case .hardDeleted:
            guard event != nil else { return "deleted permanently offline" }
            return "deleted permanently offline" + base + ":" + item
        case .restored:
            guard event != nil else { return "restored from the trash offline" }
            return "restored from the trash offline" + base + ":" + item
        case .pushed:
            guard let out else { return "local version pushed to the server" }
            if let merged = out.merged {
                return "merged with another device's change and pushed" + (out.serverId.map { " as \($0)" } ?? "")
                    + " (this device: \(merged.local.joined(separator: ", ")); the server: \(merged.server.joined(separator: ", ")))"
            }
            return "local version pushed to the server" + (out.serverId.map { " as \($0)" } ?? "")
                + (out.revisionDate.map { ", new server revision \($0.text)" } ?? "") + why
        case .idMapped:
            guard let out else { return "temporary id mapped to the server's id" }
            return "created on the server: temporary id \(header.cipherId) is now server id \(out.serverId ?? "?")"
                + (out.revisionDate.map { " (server revision \($0.text))" } ?? "")
        case .backupCreated:
            guard let out else { return "backup of the losing side created on the server" }
            let side = out.backupOf.map { $0 == .server ? "the server copy" : "the local copy" } ?? "the losing side"
            var source = ""
            if let revision = out.sourceRevisionDate { source = ", server revision \(revision.text)" }
            if let sequence = out.sourceSequence { source = ", the version of seq \(sequence)" }
            return "backup of \(side) created as \(out.backupId ?? "?")\(source)\(why)"
        case .serverCopyKept:
            guard let out else { return "the server's copy was kept and replaced the local copy" }
            return "the server's copy was kept and replaced the local copy" + (out.revisionDate.map { " (server revision \($0.text))" } ?? "") + why
        case .recreated:
            guard let out else { return "the server no longer had the item: re-created from the local copy" }
            return "the server no longer had the item (404): re-created from the local copy as \(out.serverId ?? "?")"
        case .deleteApplied:
            return "delete applied on the server" + why
        case .deleteDropped:
            return "delete dropped because the server's copy changed; the server copy was restored locally" + why
        case .cleanedUp:
            return "the server no longer had the item (404): cleaned up locally" + why
        case .resolutionFailed:
            guard let out else { return "a resolution attempt failed (still pending)" }
            var text = "resolution attempt \(out.attempt.map(String.init) ?? "?") failed: \(out.reason ?? "unknown error")"
            if out.deadLetter == true {
                text += "; dead letter: no more automatic retries until a retry is requested"
            } else if let next = out.nextRetryAt {
                text += "; next retry at \(Format.time(next.date))"
            }
            return text
        case .resolved:
            return "resolved: nothing pending for this item any more" + why
        case .clearedAfterOnlineSuccess:
            return "an online save succeeded, so the pending offline state was cleared" + why
        case .retryRequested:
            return "put back into automatic retries on request (was a dead letter)"
        case .createPlanned:
            guard let out else { return "about to create an item on the server" }
            let what = switch out.purpose {
            case nil: "an item"
            case .create: "the item"
            case .recreate: "the item again (it was deleted on the server)"
            case .backup: "a backup"
            case .passwordOverflow(let part): "part \(part) of the copy holding passwords that overflow the item's history"
            }
            return "about to create \(what) on the server (marker recorded, so a retry finds it instead of creating a second copy)"
        case .syncAborted:
            guard let out else { return "sync aborted: changes still pending" }
            return "sync aborted: \(out.pendingCount.map(String.init) ?? "some") change(s) still pending" + why
        case .syncApplied:
            return "full sync applied: the server's items replaced the local cache (pending items kept)"
        case .changeDiscarded:
            guard let out else { return "the pending change was discarded on request" }
            return out.cipher == nil
                ? "the pending change was discarded on request; the server does not hold the item, so it was removed locally"
                : "the pending change was discarded on request; the server's version replaced the local copy (the discarded version stays in this history)"
        case .restoreApplied:
            guard let out else { return "restored from the server's trash" }
            return "restored from the server's trash" + (out.serverId.map { " (\($0))" } ?? "")
                + (out.revisionDate.map { ", new server revision \($0.text)" } ?? "")
        case .attachmentPlanned:
            guard let out else { return "about to copy an attachment to a copy of the item" }
            return "about to copy an attachment to item \(out.attachment?.targetCipherId ?? "?") (marker recorded, so a retry finds the upload instead of uploading it twice)"
        case .attachmentCopied:
            guard let out else { return "an attachment was copied to a copy of the item" }
            return "attachment copied to item \(out.attachment?.targetCipherId ?? "?") as \(out.attachment?.targetAttachmentId ?? "?")" + why
        case .attachmentUnavailable:
            guard let out else { return "an attachment could not be copied: its file is gone" }
            return "attachment not copied: " + (out.reason ?? "its file is no longer on the server")
        case .itemFolderMissing:
            return "its folder \(out?.folderId ?? "?") was deleted by another device: saved with no folder"
        case .folderCreated, .folderRenamed, .folderDeleted, .folderCreatePlanned, .folderMapped, .folderRenameApplied,
             .folderDeleteApplied, .folderAlreadyDeleted, .folderResolved, .folderChangeDiscarded:
            return Self.folderText(type, out)
        case .reportsReviewed:
            return "resolution reports up to seq \(out?.sourceSequence.map(String.init) ?? "?") marked as reviewed"
        }
    }
}
