import Foundation
import VaultModel

/// What the resolver does with a pending update once it has read the server's copy: the
/// decision matrix of `Docs/Resolution.md` (DESIGN §6). Pure: the same inputs always decide
/// the same way, so the matrix is tested as a table.
public enum UpdateDecision: Equatable, Sendable {
    /// The server already holds the latest local version (our own earlier push, or a
    /// repository request whose response was lost): nothing to send.
    case alreadyApplied
    /// Push the local version; back up the server copy first when `backupServer`.
    case pushLocal(backupServer: Bool, reason: String)
    /// The server copy wins: back up the local version, keep the server copy locally.
    case keepServer(reason: String)

    /// Decides a pending update against the server's current copy.
    ///
    /// - the server holds our latest snapshot (same encrypted name string, unique per
    ///   encryption) → ``alreadyApplied``;
    /// - server revision equals the base revision (or no base is known) → push; with
    ///   `passwordChanges >= softConflictThreshold` back up the server copy first (soft conflict);
    /// - server changed and the local edit is strictly newer than the server revision → back up
    ///   the server copy, push local;
    /// - server changed and is newer or equal → back up local, keep the server copy.
    public static func decide(latest: Cipher, base: BitwardenDate?, localUpdatedAt: BitwardenDate,
                              passwordChanges: Int, server: Cipher, softConflictThreshold: Int) -> UpdateDecision {
        if let name = latest.name, server.name == name { return .alreadyApplied }
        let serverRevision = server.revisionDate
        guard let base, let serverRevision, serverRevision != base else {
            if passwordChanges >= softConflictThreshold {
                return .pushLocal(backupServer: true, reason: "soft conflict: \(passwordChanges) offline password changes")
            }
            return .pushLocal(backupServer: false, reason: "no conflict: server unchanged since the offline edit")
        }
        if localUpdatedAt > serverRevision {
            return .pushLocal(backupServer: true, reason: "conflict: local edit (\(localUpdatedAt)) is newer than the server's (\(serverRevision))")
        }
        return .keepServer(reason: "conflict: server edit (\(serverRevision)) is newer than or as new as the local one (\(localUpdatedAt))")
    }
}

/// What the resolver does with a pending soft or permanent delete once it has read the
/// server's copy.
public enum DeleteDecision: Equatable, Sendable {
    /// A soft delete whose item is already in the server's trash: nothing to send.
    case alreadyApplied
    /// Apply the delete; first push the local edits that came with it (`pushEdits`).
    case apply(pushEdits: Bool)
    /// The server copy changed since the delete was based on it: restore it locally and drop
    /// the delete, so the user sees the other device's change and can decide again.
    case drop

    /// Decides a pending delete against the server's current copy.
    public static func decide(changeType: PendingChangeType, latest: Cipher, base: BitwardenDate?, hasEdits: Bool,
                              server: Cipher) -> DeleteDecision {
        let permanent = changeType == .hardDelete
        // Edits that came with a soft delete, already pushed by an earlier, interrupted
        // attempt (every local edit is a fresh encryption, so its name is unique): not a conflict.
        if !permanent, hasEdits, let name = latest.name, server.name == name {
            return server.deletedDate != nil ? .alreadyApplied : .apply(pushEdits: false)
        }
        // Already in the trash and nothing of ours to add: the user's intent holds. (With edits
        // the trash is not enough: they still have to reach the server.)
        if !permanent, !hasEdits, server.deletedDate != nil { return .alreadyApplied }
        if let base, let revision = server.revisionDate, revision != base { return .drop }
        return .apply(pushEdits: hasEdits && !permanent)
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
    public static func timestamp(_ date: BitwardenDate) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date.date)
        return String(format: "%04d-%02d-%02d %02d:%02d:%02d", c.year!, c.month!, c.day!, c.hour!, c.minute!, c.second!)
    }
}
