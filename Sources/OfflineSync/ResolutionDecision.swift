import Foundation
import VaultCrypto
import VaultModel

/// What identifies this device's own writes to an item on the server: never a field another
/// device's change can keep (such as the encrypted name, which a favourite flag, a folder move or
/// a restore from the trash leaves as it was).
public struct OwnWrites: Sendable, Equatable {
    /// Revision dates the server gave this device's writes to the item (recorded in the log
    /// from its answers: pushes, creates, re-creates).
    public var revisions: Set<BitwardenDate>
    /// Versions this device encrypted and may have sent (its created and updated operations): a
    /// server copy with exactly one of these contents is this device's write whose answer was
    /// lost.
    public var sent: [Cipher]
    /// Versions this device moved to the trash: a server copy in the trash with exactly one of
    /// these contents is this device's trash move whose answer was lost (or another device's
    /// trash move of the same version, which has the same effect, so nothing is lost either way).
    public var trashed: [Cipher]

    /// Own writes from what the log recorded.
    public init(revisions: Set<BitwardenDate> = [], sent: [Cipher] = [], trashed: [Cipher] = []) {
        self.revisions = revisions
        self.sent = sent
        self.trashed = trashed
    }

    /// Whether `server` is this device's own write.
    public func wrote(_ server: Cipher) -> Bool {
        if let revision = server.revisionDate, revisions.contains(revision) { return true }
        if server.deletedDate != nil, trashed.contains(where: { $0.sameContent(as: server) }) { return true }
        return sent.contains { $0.sameContent(as: server) }
    }
}

/// What the resolver does with a pending update once it has read the server's copy: the
/// decision matrix of `Docs/Resolution.md`. Pure: the same inputs always decide the same way,
/// so the matrix is tested as a table.
public enum UpdateDecision: Equatable, Sendable {
    /// The server already holds the latest local version (our own earlier push, or a
    /// repository request whose response was lost): nothing to send.
    case alreadyApplied
    /// Push the local version; back up the server copy first when `backupServer`.
    case pushLocal(backupServer: Bool, reason: String)
    /// The server copy wins: back up the local version, keep the server copy locally.
    case keepServer(reason: String)
    /// Another device changed the item, but other parts than the local change: push the merged
    /// item (the base with both sides' changes), with no conflict backup (`backupServer` only
    /// for a soft conflict, as when the server is unchanged).
    case merged(MergedParts, backupServer: Bool, reason: String)

    /// Decides a pending update against the server's current copy.
    ///
    /// - the server holds our latest snapshot (the same content, byte for byte: each encryption
    ///   is unique) → ``alreadyApplied``;
    /// - the server holds an earlier write of ours (`own`: a revision the server gave our write,
    ///   or the exact content of a version we sent, whose response was lost), or its revision
    ///   equals the base revision (or no base is known) → push; with
    ///   `passwordChanges >= softConflictThreshold` back up the server copy first (soft
    ///   conflict), except for a create chain (`createChain`: every version on the server is
    ///   this device's own);
    /// - server changed and `merge` is given (the caller's three-way merge of the base, the local
    ///   version and the server's found the two changes in different parts) →
    ///   ``merged(_:backupServer:reason:)``;
    /// - server changed and the local edit is strictly newer than the server revision → back up
    ///   the server copy, push local;
    /// - server changed and is newer or equal → back up local, keep the server copy.
    public static func decide(latest: Cipher, base: BitwardenDate?, localUpdatedAt: BitwardenDate,
                              passwordChanges: Int, server: Cipher, softConflictThreshold: Int,
                              own: OwnWrites = OwnWrites(), createChain: Bool = false,
                              merge: MergedParts? = nil) -> UpdateDecision {
        if latest.sameContent(as: server) { return .alreadyApplied }
        let serverRevision = server.revisionDate
        let ownWrite = own.wrote(server)
        guard !ownWrite, let base, let serverRevision, serverRevision != base else {
            if passwordChanges >= softConflictThreshold && !createChain {
                return .pushLocal(backupServer: true, reason: "soft conflict: \(passwordChanges) offline password changes")
            }
            return .pushLocal(backupServer: false, reason: ownWrite
                ? "no conflict: the server holds an earlier version written by this device"
                : "no conflict: server unchanged since the offline edit")
        }
        if let merge {
            let soft = passwordChanges >= softConflictThreshold && !createChain
            return .merged(merge, backupServer: soft, reason: soft
                ? "merged: another device changed other parts (\(merge.server.joined(separator: ", "))); soft conflict: \(passwordChanges) offline password changes"
                : "merged: another device changed other parts (\(merge.server.joined(separator: ", ")))")
        }
        if localUpdatedAt > serverRevision {
            return .pushLocal(backupServer: true, reason: "conflict: local edit (\(localUpdatedAt)) is newer than the server's (\(serverRevision))")
        }
        return .keepServer(reason: "conflict: server edit (\(serverRevision)) is newer than or as new as the local one (\(localUpdatedAt))")
    }
}

/// What the resolver does with a pending trash move or permanent delete once it has asked
/// the server for its copy: every outcome of the delete rows of `Docs/Resolution.md`, the 404
/// ones included. Pure, tested as a table.
///
/// A trash move that carries edits gets the same guarantees as an update: the soft-conflict
/// backup, password-overflow copies, a backup of the edits when the move is dropped, and a
/// re-create when the server lost the item. A permanent delete needs no backup when applied
/// (the user chose to destroy the item).
public enum DeleteDecision: Equatable, Sendable {
    /// Nothing to send: a trash move whose item (with our latest version) is already in the
    /// server's trash.
    case alreadyApplied
    /// Apply the delete. `pushEdits`: first PUT the edits that came with a trash move;
    /// `backupServer`: before that, back up the server copy (four or more password changes).
    case apply(pushEdits: Bool, backupServer: Bool)
    /// The server copy changed since the delete was based on it (another device's edit): drop
    /// the delete and restore the server copy locally. `backupLocal`: a trash move carried edits,
    /// kept as a backup first.
    case drop(backupLocal: Bool)
    /// The server no longer has the item, but the trash move carried edits (a version the
    /// user saved): create it again, then move the new copy to the trash.
    case recreateAndTrash
    /// The server no longer has the item and nothing of ours needs it: remove it locally.
    case cleanUp

    /// Decides a pending delete against the server's copy (`server` nil: the server answered 404).
    /// `latestPushed`: the revision the server gave an earlier attempt's push of the latest
    /// version's edits (recorded before that attempt sent the trash move), if any.
    public static func decide(changeType: PendingChangeType, latest: Cipher, base: BitwardenDate?, hasEdits: Bool,
                              server: Cipher?, passwordChanges: Int = 0, softConflictThreshold: Int = 4,
                              own: OwnWrites = OwnWrites(), createChain: Bool = false,
                              latestPushed: BitwardenDate? = nil) -> DeleteDecision {
        let permanent = changeType == .hardDelete
        let carriesEdits = hasEdits && !permanent
        guard let server else { return carriesEdits ? .recreateAndTrash : .cleanUp }
        // The edits of our trash move are on the server (an earlier, interrupted attempt pushed
        // them, or a trash move's response was lost): not a conflict. (Without edits the local
        // copy is the server's old content, which proves nothing about who wrote the server's.)
        if carriesEdits, latest.sameContent(as: server) {
            if server.deletedDate != nil { return .alreadyApplied }
            // Out of the trash at a revision after our recorded push: the trash move that came
            // next was applied (its answer lost) and another device restored the item since, or
            // another device changed it without changing its content. Either way another device
            // acted after our edits: the delete is dropped, and the server already holds them.
            if let latestPushed, server.revisionDate != latestPushed { return .drop(backupLocal: false) }
            return .apply(pushEdits: false, backupServer: false)
        }
        // Already in the trash and nothing of ours to add: the user's intent holds. (With edits
        // the trash is not enough: they still have to reach the server.)
        if !carriesEdits, !permanent, server.deletedDate != nil { return .alreadyApplied }
        // A permanent delete of exactly what the server holds (the same content, in the trash or
        // not as the local copy was): whoever made the server's last change (a trash move whose
        // new revision this device never read), the user deleted that very version.
        if permanent, latest.sameContent(as: server), (latest.deletedDate != nil) == (server.deletedDate != nil) {
            return .apply(pushEdits: false, backupServer: false)
        }
        if !own.wrote(server), let base, let revision = server.revisionDate, revision != base {
            return .drop(backupLocal: carriesEdits)
        }
        return .apply(pushEdits: carriesEdits,
                      backupServer: carriesEdits && !createChain && passwordChanges >= softConflictThreshold)
    }
}

extension CipherView {
    /// A copy of this version to keep as a new item named `name`: a fresh per-cipher key, no
    /// id, revision or creation date (the server assigns them) or attachments (the resolver
    /// uploads copies of them once the item exists), the same folder, password history and trash
    /// state. Every backup and password-overflow copy is one.
    public func backupCopy(named name: String, random: any RandomSource) -> CipherView {
        var copy = withNewCipherKey(random: random)
        copy.id = nil
        copy.name = name
        copy.attachments = nil
        copy.revisionDate = nil
        copy.creationDate = nil
        copy.localBase = nil
        return copy
    }
}

/// Backup names: `"{name} - {yyyy-MM-dd HH:mm:ss}"` in UTC with the losing side's timestamp
/// (an empty name gives the timestamp alone). Password-overflow copies are named
/// `"{name} - offline passwords {yyyy-MM-dd HH:mm:ss}"`.
public enum BackupName {
    /// The name of a conflict backup.
    public static func conflict(_ name: String?, at date: BitwardenDate) -> String {
        let stamp = timestamp(date)
        guard let name, !name.isEmpty else { return stamp }
        return "\(name) - \(stamp)"
    }

    /// The name of a copy that keeps offline passwords the 5-entry history could not hold.
    public static func passwordOverflow(_ name: String?, at date: BitwardenDate, part: Int, of parts: Int) -> String {
        let suffix = parts > 1 ? " (\(part)/\(parts))" : ""
        let base = (name ?? "").isEmpty ? "" : "\(name!) - "
        return "\(base)offline passwords \(timestamp(date))\(suffix)"
    }

    /// `yyyy-MM-dd HH:mm:ss` in UTC.
    /// Truncated to the second, never rounded: `23:59:59.9999999` is still `23:59:59`.
    public static func timestamp(_ date: BitwardenDate) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        // From the 100-ns ticks, not the Double: ...59.9999999 must not round into the next second.
        let seconds = date.ticksSince1970 >= 0 ? date.ticksSince1970 / BitwardenDate.ticksPerSecond
            : -((-date.ticksSince1970 + BitwardenDate.ticksPerSecond - 1) / BitwardenDate.ticksPerSecond)
        let whole = Date(timeIntervalSince1970: TimeInterval(seconds))
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: whole)
        return String(format: "%04d-%02d-%02d %02d:%02d:%02d", c.year!, c.month!, c.day!, c.hour!, c.minute!, c.second!)
    }
}
