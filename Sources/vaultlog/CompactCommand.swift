import ArgumentParser
import EventLog
import Foundation
@_spi(Tools) import OfflineSync

/// `vaultlog compact DIR`: applies a retention policy and rewrites the file.
struct Compact: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply a retention policy: replace old resolved history with a sealed snapshot, then rewrite the file.",
        discussion: """
        The user's events older than --keep-days are replaced by a snapshot sealed with the \
        user's key: the projection after the last of them (the horizon), every event of a \
        change still pending or dead-lettered there (carried as it was stored), and the last \
        --keep-versions versions of every item. An event that cannot be read stops the horizon \
        before it. After that, the store is rewritten with LMDB's compacting copy and renamed into place, so \
        the removed ciphertext does not stay in free pages; a kill at any point leaves the old \
        store or the new one, both complete. The run takes the store to itself from the start: \
        while another process has it open (the app, its extension, another command) it is \
        refused before anything changes (exit 4); a process that opens the store meanwhile \
        waits for the new file.

        The compacted store answers as before for every sequence from the horizon on; a state \
        before it ('pending --at') is refused with "compacted before sequence H", and 'history' \
        shows the kept versions. 'verify' with the key proves the snapshot and the retained log.

        Needs the key (--email with a password, or --user-key-file). --dry-run prints what \
        would be removed and changes nothing.

        Examples:
          vaultlog compact store --email me@example.com --password-file pw.txt
          vaultlog compact store --user-key-file user.key --keep-days 7 --keep-versions 3 --dry-run
        """
    )

    @Argument(help: ArgumentHelp("The store directory (holding data.mdb).", valueName: "dir"))
    var directory: String

    @Option(help: ArgumentHelp("Keep resolved events younger than this many days as events.", valueName: "days"))
    var keepDays = RetentionPolicy.default.keepDays

    @Option(help: ArgumentHelp("Versions of each item to keep in the snapshot.", valueName: "versions"))
    var keepVersions = RetentionPolicy.default.keepVersions

    @Flag(help: "Print what would be removed; change nothing.")
    var dryRun = false

    @Flag(help: "Print one JSON document instead of text.")
    var json = false

    @OptionGroup(title: "Key (required)")
    var key: KeyOptions

    func validate() throws {
        if keepDays < 0 { throw ValidationError("--keep-days must be 0 or more") }
        if keepVersions < 0 { throw ValidationError("--keep-versions must be 0 or more") }
    }

    /// What the command reports.
    struct Report: Encodable {
        var userId: String
        var dryRun: Bool
        var keepDays: Int
        var keepVersions: Int
        var cutoff: String
        var previousHorizon: UInt64
        var horizon: UInt64?
        var removedEvents: Int
        var retainedEvents: Int
        var itemsWithKeptVersions: Int
        var keptVersions: Int
        /// Events of changes pending at the horizon, carried in the snapshot as stored.
        var carriedEvents: Int
        var limitedBy: String
        var fileBytesBefore: Int
        var fileBytesAfter: Int?
        /// The fold and sealing before the write.
        var prepareMilliseconds: Double?
        /// The longest write transaction (a save waited at most this long).
        var writeMilliseconds: Double?
        /// Write transactions (steps of at most 20,000 events).
        var transactions: Int?
        /// The compacting copy and rename of the file.
        var copyMilliseconds: Double?
    }

    func run() throws {
        try reportingErrors(storePath: directory) {
            try StoreAccess.requireStore(at: directory)
            let dataFile = (directory as NSString).appendingPathComponent("data.mdb")
            let before = ((try? FileManager.default.attributesOfItem(atPath: dataFile)[.size]) as? Int) ?? 0
            let policy = RetentionPolicy(keepDays: keepDays, keepVersions: keepVersions)
            let store: VaultLogStore
            if dryRun {
                store = try StoreAccess.openForReading(directory)
            } else {
                var options = VaultLogStoreOptions()
                options.eventLog.environment.createDirectory = false
                options.eventLog.logger = Console.logger("vaultlog.eventlog")
                options.logger = Console.logger("vaultlog.offlinesync")
                store = try VaultLogStore(path: directory, options: options)
            }
            guard let unlocked = try key.unlock(store) else {
                store.close()
                throw CLIError.key("compaction seals a snapshot with the user's key: give --email with a password, or --user-key-file")
            }
            let report: Report
            if dryRun {
                defer { store.close() }
                let plan = try store.compactionPlan(userId: unlocked.userId, policy: policy)
                report = Report(plan, dryRun: true, before: before, after: nil)
            } else {
                // The file rewrite needs the store to itself: taken before anything changes (refused
                // while another process has it open) and kept until the new file is in place.
                let lock: ExclusiveStoreLock
                do {
                    lock = try store.log.lockExclusively(outcome: "nothing was changed")
                } catch {
                    store.close()
                    throw error
                }
                defer { lock.release() }
                let result: CompactionResult
                do {
                    result = try store.compactBlocking(userId: unlocked.userId, policy: policy)
                } catch {
                    store.close()
                    throw error
                }
                store.close()
                let file: FileCompaction
                do {
                    file = try EventLogStore.compactFile(at: directory, holding: lock)
                } catch {
                    throw CLIError.storage("the log was compacted (\(result.counts.removedEvents) events removed), but data.mdb was not rewritten: \(error); run 'vaultlog compact' again")
                }
                // The size when the command started (the write itself may have grown the file).
                report = Report(result, before: before, after: file.bytesAfter, copyMilliseconds: file.seconds * 1000)
            }
            if json {
                try Console.jsonDocument(report)
            } else {
                report.printText()
            }
        }
    }
}

extension Compact.Report {
    init(_ plan: CompactionPlan, dryRun: Bool, before: Int, after: Int?) {
        self.init(userId: plan.userId, dryRun: dryRun, keepDays: plan.policy.keepDays, keepVersions: plan.policy.keepVersions,
                  cutoff: Format.iso(millis: Int64(plan.cutoff.timeIntervalSince1970 * 1000)),
                  previousHorizon: plan.currentHorizon, horizon: plan.horizon,
                  removedEvents: plan.removableEvents, retainedEvents: plan.retainedEvents,
                  itemsWithKeptVersions: plan.itemsWithVersions, keptVersions: plan.keptVersions, carriedEvents: plan.carriedEvents,
                  limitedBy: plan.limitedBy,
                  fileBytesBefore: before, fileBytesAfter: after)
    }

    init(_ result: CompactionResult, before: Int, after: Int, copyMilliseconds: Double) {
        self.init(result.plan, dryRun: false, before: before, after: after)
        prepareMilliseconds = result.prepareSeconds * 1000
        writeMilliseconds = result.transactions == 0 ? nil : result.writeSeconds * 1000
        transactions = result.transactions
        self.copyMilliseconds = copyMilliseconds
    }

    func printText() {
        let verb = dryRun ? "would remove" : "removed"
        var rows: [[String]] = [
            ["user", userId],
            ["policy", "keep \(keepDays) days of events, \(keepVersions) versions per item (events before \(cutoff) are old enough)"],
        ]
        if let horizon {
            let range = previousHorizon > 0 ? "sequences \(previousHorizon + 1)…\(horizon)" : "sequences up to \(horizon)"
            rows.append(["events", "\(verb) \(removedEvents) (\(range)), \(retainedEvents) kept"])
            rows.append(["horizon", "compacted before sequence \(horizon)" + (previousHorizon > 0 ? " (was \(previousHorizon))" : "")])
        } else {
            rows.append(["events", "nothing to remove; \(retainedEvents) kept"
                         + (previousHorizon > 0 ? " (already compacted before sequence \(previousHorizon))" : "")])
        }
        rows.append(["snapshot", "\(keptVersions) versions of \(itemsWithKeptVersions) items kept"
                     + (carriedEvents > 0 ? "; \(carriedEvents) events of pending changes carried as stored" : "")])
        rows.append(["limited by", limitedBy])
        if let fileBytesAfter {
            rows.append(["file", "\(Format.bytes(fileBytesBefore)) → \(Format.bytes(fileBytesAfter)) (data.mdb rewritten without free pages)"])
        } else {
            rows.append(["file", "\(Format.bytes(fileBytesBefore)) now (the rewrite after a real run drops the free pages)"])
        }
        if let prepareMilliseconds, let copyMilliseconds {
            rows.append(["time", "fold and seal \(Format.decimal(prepareMilliseconds)) ms, "
                         + (writeMilliseconds.map { ms in
                             (transactions ?? 1) > 1 ? "\(transactions!) write transactions (the longest \(Format.decimal(ms)) ms), "
                                 : "write \(Format.decimal(ms)) ms in one transaction, " } ?? "")
                         + "file rewrite \(Format.decimal(copyMilliseconds)) ms"])
        }
        for line in Format.table(rows) { Console.out(line) }
    }
}
