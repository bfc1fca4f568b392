import ArgumentParser
import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto

/// `vaultlog import FILE DIR`: an export back into a new or empty store.
struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load an export (JSON Lines) into a new or empty store, byte for byte.",
        discussion: """
        Every line is checked: the metadata line, JSON shape, base64, envelope structure, header \
        fields agreeing with the envelope, strictly increasing sequences, and the event count. \
        All events are written in one transaction (all or nothing) with their original sequences \
        and bytes, so a malformed line, refused with its line number, leaves nothing imported. \
        With a key, every line and the MAC of each of that user's envelopes are checked before \
        the transaction starts. The copy verifies under the original keys; the new store is \
        verified at the end.
        DIR must not exist, be an empty directory, or be a store without events: an existing \
        store with events is never changed.

        Example:
          vaultlog import device.vaultlog.jsonl /tmp/copy && vaultlog verify /tmp/copy
        """
    )

    @Argument(help: ArgumentHelp("The export file (from 'vaultlog export').", valueName: "file"))
    var file: String

    @Argument(help: ArgumentHelp("The store directory to create or fill (new or empty).", valueName: "dir"))
    var directory: String

    @OptionGroup(title: "Key (optional; checks MACs before importing)")
    var key: KeyOptions

    func run() throws {
        try reportingErrors(storePath: directory) {
            try checkTarget()
            let interruption = Interruption()   // Ctrl-C: nothing is written, a new DIR is removed, exit 130
            // With a key, pass 1 checks every line and collects the users, pass 2 the MACs of
            // the key's user. Without one, the metadata is read and the lines are checked as
            // they are written (pass 3 aborts its transaction on the first bad line).
            let keyGiven = key.email != nil || key.userKeyFile != nil
            let scan = try Self.scan(file, interruption, checkingEveryLine: keyGiven)
            // Pass 2 (with a key): MACs of that user's envelopes.
            let unlocked = try key.resolve(accounts: scan.metadata.accounts, users: scan.users, where: "in \(file)")
            if let unlocked { try Self.authenticate(scan, unlocked, interruption) }

            let target = Target(directory)
            let store = try Self.load(scan, into: target, interruption)

            let report = try store.log.verify(keys: unlocked.map { [$0.userId: $0.sealingKey] } ?? [:])
            guard report.isClean else {
                // A store that does not verify is not kept: nothing may act on it by mistake.
                store.close()
                target.removeWhatWasCreated()
                Console.out("verify: \(report.problems.count) problem(s)")
                for problem in report.problems { Console.out("  \(problem)") }
                Console.note("the imported store failed its final check and was removed; the export itself is damaged or was edited")
                throw ExitCode(ExitStatus.problemsFound.rawValue)
            }
            defer { store.close() }
            Console.out("imported \(scan.metadata.eventCount) event(s) and \(scan.metadata.accounts.count) account(s) into \(directory)")
            Console.out("verify: OK (\(report.eventsChecked) event(s), \(report.eventsAuthenticated) authenticated)")
            if unlocked == nil {
                Console.note("no key given: the MACs of the events, head records and compaction snapshots were not checked, only "
                    + "their structure and chains; check them with 'vaultlog verify \(directory) --email EMAIL'")
            }
        }
    }

    /// Pass 1: every line of the file checked (a malformed one is named with its line).
    static func scan(_ file: String, _ interruption: Interruption? = nil, checkingEveryLine: Bool = true) throws -> ExportFile {
        let progress = ProgressLine("checking", unit: "lines")
        defer { progress.finish() }
        do {
            return try ExportFile(path: file, checkingEveryLine: checkingEveryLine) { try interruption?.check(); progress.update($0, of: $1) }
        } catch let problem as ExportFile.Problem {
            throw CLIError.storage("\(problem); nothing was imported")
        }
    }

    /// Pass 2 (with a key): the MAC of every envelope of the key's user.
    static func authenticate(_ scan: ExportFile, _ unlocked: UnlockedUser, _ interruption: Interruption) throws {
        let progress = ProgressLine("authenticating", unit: "lines")
        defer { progress.finish() }
        let result = try scan.authenticate(userId: unlocked.userId, key: unlocked.sealingKey) {
            try interruption.check()
            progress.update($0, of: $1)
        }
        guard !result.failed.isEmpty else { return try authenticateRecords(scan, unlocked) }
        if result.passed == 0 {
            throw CLIError.key("the key does not open any event of user \(unlocked.userId) in \(scan.path) (wrong key or wrong --user); nothing was imported")
        }
        let list = result.failed.prefix(10).map { "line \($0.line) (seq \($0.sequence))" }.joined(separator: ", ")
        throw CLIError.storage("\(scan.path): \(result.failed.count) envelope(s) fail authentication (tampered): \(list); nothing was imported")
    }

    /// Pass 2, continued: the key's user's head record and compaction snapshot records, whose
    /// MACs the import would otherwise commit unchecked (a forged head would refuse every
    /// later append).
    static func authenticateRecords(_ scan: ExportFile, _ unlocked: UnlockedUser) throws {
        var failed: [String] = []
        if let head = scan.heads[unlocked.userId], !SealedRecordCheck.head(head, userId: unlocked.userId, key: unlocked.sealingKey) {
            failed.append("the head record")
        }
        let records = scan.snapshots.filter { SealedRecordCheck.user(ofSnapshotRecord: $0) == unlocked.userId }
        let unopened = records.filter { !SealedRecordCheck.snapshotRecord($0, key: unlocked.sealingKey) }.count
        if unopened > 0 { failed.append("\(unopened) of \(records.count) compaction snapshot record(s)") }
        guard failed.isEmpty else {
            throw CLIError.storage("\(scan.path): \(failed.joined(separator: " and ")) of user \(unlocked.userId) fail authentication (tampered, or sealed under another key); nothing was imported")
        }
    }

    /// Where an import writes, and what was there before it, so that what it created can be
    /// removed again (the directory, or the store files in an empty one).
    struct Target {
        let directory: String
        let created: Bool
        let existing: Set<String>

        init(_ directory: String) {
            self.directory = directory
            created = !FileManager.default.fileExists(atPath: directory)
            existing = Set((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
        }

        func removeWhatWasCreated() {
            if created {
                try? FileManager.default.removeItem(atPath: directory)
            } else {
                for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where !existing.contains(name) {
                    try? FileManager.default.removeItem(atPath: (directory as NSString).appendingPathComponent(name))
                }
            }
        }
    }

    /// Pass 3: every envelope written into a new store in one transaction, each line checked
    /// as it is written, and the stored accounts. Returns the opened store. What the import
    /// created (the directory, or the store files in an empty one) is removed when it fails.
    static func load(_ scan: ExportFile, into target: Target, _ interruption: Interruption? = nil) throws -> VaultLogStore {
        let directory = target.directory
        var options = VaultLogStoreOptions()
        options.eventLog.logger = Console.logger("vaultlog.eventlog")
        options.logger = Console.logger("vaultlog.offlinesync")
        // Room for the whole file up front, so the one transaction is not re-run to grow the map.
        options.eventLog.environment.mapSize = max(options.eventLog.environment.mapSize, scan.suggestedMapSize)
        let store = try VaultLogStore(path: directory, options: options)
        let progress = ProgressLine("importing")
        defer { progress.finish() }
        do {
            try store.importEvents(from: scan) { try interruption?.check(); progress.update($0, of: $1) }
        } catch {
            store.close()
            target.removeWhatWasCreated()
            if let problem = error as? ExportFile.Problem { throw CLIError.storage("\(problem); nothing was imported") }
            if case OfflineSyncError.storeNotEmpty = error {
                throw CLIError.usage("\(directory) received events while importing; nothing was imported")
            }
            throw error
        }
        return store
    }

    /// Refuses any target but a missing directory, an empty one, or a store without events.
    private func checkTarget() throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) else { return }
        guard isDirectory.boolValue else {
            throw CLIError.usage("\(directory) is a file; give a new or empty directory for the store")
        }
        let contents = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        if contents.isEmpty { return }
        guard contents.contains("data.mdb") else {
            throw CLIError.usage("\(directory) is not empty and not a VaultLog store; give a new or empty directory (nothing was changed)")
        }
        let existing = try StoreAccess.openForReading(directory)
        defer { existing.close() }
        let count = try existing.log.eventCount()
        if count > 0 {
            throw CLIError.usage("\(directory) already holds a store with \(count) event(s); import only into a new or empty store (nothing was changed)")
        }
    }
}
