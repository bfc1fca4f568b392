import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultModel

/// One resolution record in words for the app's user, with the names decrypted: "Your
/// offline edit of “Bank” was kept as “Bank - 2026-11-28 …”; the version from another device
/// stays active."
///
/// ```swift
/// let reports = try vault.conflictReports()
/// for report in reports { notify(report.summary) }
/// if let last = reports.last { try await vault.markReviewed(through: last) }
/// ```
public struct ConflictReport: Sendable, Equatable, Identifiable {
    /// The record it was made from (kind, ids, time, the resolver's reason).
    public let record: ResolutionRecord
    /// The item's name (as this device last knew it), when it can be read.
    public let itemName: String?
    /// The backup item's name, for the backup and overflow-copy kinds.
    public let backupName: String?
    /// The last sequence this report stands for (a report of a local backup also stands for
    /// the "server version kept" record right after it); ``OfflineVault/markReviewed(through:)``
    /// marks through it.
    public let coveredThrough: UInt64

    /// The record's sequence.
    public var id: UInt64 { record.sequence }

    /// What happened, in a sentence for the app's user.
    public var summary: String {
        let item = itemName.map { "“\($0)”" } ?? "an item"
        let backup = backupName.map { "“\($0)”" } ?? "a backup item"
        return switch record.kind {
        case .serverVersionBackedUp:
            "\(item) was changed on another device too. Your version is kept; the other version was saved as \(backup)."
        case .localVersionBackedUp:
            "\(item) was changed on another device too. That version is kept; yours was saved as \(backup)."
        case .passwordOverflowCopy:
            "\(item) had more old passwords than its history holds; the older ones were saved in \(backup)."
        case .serverVersionKept: "The version of \(item) from another device is kept."
        case .deleteDropped: "\(item) was changed on another device, so it was not deleted."
        case .recreated: "\(item) had been deleted on another device; your version was saved again."
        case .discarded: "Your waiting change to \(item) was discarded; the server's version is kept."
        case .merged(let parts):
            "\(item) was changed on another device too, in other parts (\(parts.server.joined(separator: ", "))). "
                + "Both changes are kept in the item (yours: \(parts.local.joined(separator: ", ")))."
        case .pushed: "Your change to \(item) is on the server."
        case .idMapped: "\(item), created on this device, is on the server."
        case .deleted: "\(item) was deleted on the server."
        case .alreadyGone: "\(item) was already gone from the server."
        case .restored: "\(item) was taken out of the trash on the server."
        case .attachmentNotCopied:
            "An attachment of \(item) could not be kept in its copy: \(record.reason ?? "its file is no longer on the server")."
        case .folderMissing: "The folder of \(item) was deleted on another device; the item was saved with no folder."
        }
    }
}

extension OfflineVault {
    // MARK: Conflict reports

    /// The reports the app has not marked as reviewed, oldest first: by default only the ones a
    /// user should hear about (`ResolutionRecord.isConflict` in OfflineSync: backups, dropped deletes,
    /// re-creations, discarded changes); with `includingRoutine`, pushes and deletes too. Read
    /// from the log, so they survive a relaunch and another process's syncs show here too.
    public func conflictReports(includingRoutine: Bool = false) throws -> [ConflictReport] {
        do {
            let userId = try unlockedUser()
            return try reports(Self.selected(try store.unreviewedResolutionRecords(userId: userId), includingRoutine: includingRoutine),
                               userId: userId)
        } catch {
            throw VaultError.wrapping(error)
        }
    }

    /// Every report after `sequence` (reviewed or not), for an app that keeps its own cursor.
    public func reports(after sequence: UInt64, includingRoutine: Bool = false) throws -> [ConflictReport] {
        do {
            let userId = try unlockedUser()
            return try reports(Self.selected(try store.resolutionRecords(userId: userId, after: sequence), includingRoutine: includingRoutine),
                               userId: userId)
        } catch {
            throw VaultError.wrapping(error)
        }
    }

    /// Marks the reports through `report` (and every one before it) as reviewed, for every
    /// process on the store and after a relaunch (the mark is an event in the log).
    public func markReviewed(through report: ConflictReport) async throws {
        try await vaultCall {
            try await store.markResolutionRecordsReviewed(userId: try unlockedUser(), through: report.coveredThrough)
        }
    }

    /// The unreviewed conflict reports now and whenever they change (a sync in this process
    /// or another, a review mark). Ends when its task is cancelled or the vault closes.
    public func conflictReportUpdates() -> AsyncStream<[ConflictReport]> {
        AsyncStream { continuation in
            guard let userId = self.userId else {
                continuation.finish()
                return
            }
            let task = Task.detached { [weak self] in
                var last: [ConflictReport]?
                guard let commits = self?.store.commitUpdates(userId: userId) else { return continuation.finish() }
                for await _ in commits {
                    guard let self, let reports = (try? self.whileOpen({ try self.conflictReports() })) ?? nil,
                          reports != last else { continue }
                    last = reports
                    continuation.yield(reports)
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// The records a report list shows, each with the last sequence it stands for: conflicts
    /// only unless `includingRoutine`, and no "server version kept" right after the backup of
    /// the local version that already says so (the backup's report stands for both).
    static func selected(_ records: [ResolutionRecord], includingRoutine: Bool) -> [(record: ResolutionRecord, through: UInt64)] {
        var out: [(record: ResolutionRecord, through: UInt64)] = []
        var lastBackup: [String: Int] = [:]
        for record in records where includingRoutine || record.isConflict {
            if !includingRoutine, record.kind == .serverVersionKept, let index = lastBackup.removeValue(forKey: record.cipherId) {
                out[index].through = record.sequence
                continue
            }
            if record.kind == .localVersionBackedUp { lastBackup[record.cipherId] = out.count }
            out.append((record, record.sequence))
        }
        return out
    }

    /// The records with names decrypted; an item's name comes from its local copy, else from
    /// the last version the log holds.
    private func reports(_ records: [(record: ResolutionRecord, through: UInt64)], userId: String) throws -> [ConflictReport] {
        let key = try store.userKey(userId: userId)
        var names: [String: String?] = [:]
        func name(of record: ResolutionRecord) -> String? {
            let id = record.cipherId
            if let known = names[id] { return known }
            var found: String?
            for candidate in [record.serverId, id].compactMap({ $0 }) {
                if let local = try? store.localCipher(userId: userId, id: candidate), let view = try? local.decrypt(userKey: key) {
                    found = view.name
                    break
                }
            }
            if found == nil, let events = try? store.events(userId: userId, cipherId: id),
               let last = events.last(where: { $0.operation != nil })?.operation {
                found = try? last.cipher.decrypt(userKey: key).name
            }
            names[id] = found
            return found
        }
        return try records.map {
            ConflictReport(record: $0.record, itemName: name(of: $0.record), backupName: try $0.record.backupName(userKey: key),
                           coveredThrough: $0.through)
        }
    }
}
