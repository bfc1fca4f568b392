import ArgumentParser
import EventLog
import Foundation
@_spi(Tools) import OfflineSync

/// `vaultlog verify DIR`: the integrity walk.
struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a store's integrity; exit 1 with a per-sequence report when anything is wrong.",
        discussion: """
        Walks every event, index entry and checkpoint: sequence order, each event stored under \
        its own sequence, header and envelope structure, index consistency in both directions, \
        each user's chain of events and head record (a removed, moved or truncated event is \
        reported by sequence), \
        and the unsealed pending checkpoint (the locked vault's pending count) against the \
        log's headers. With a key, the MAC of each of that \
        user's events and checkpoints is checked too, which detects any flipped byte; without one \
        only structure can be checked (and the report says so).
        Progress is shown on stderr when stderr is a terminal. \
        The walk runs in a child process: a file damaged so that LMDB cannot read it (the \
        reader crashes) is reported with exit code 4 instead of a crash.

        Examples:
          vaultlog verify store
          vaultlog verify store --email me@example.com --password-file pw.txt
        """
    )

    @Argument(help: ArgumentHelp("The store directory (holding data.mdb).", valueName: "dir"))
    var directory: String

    @Flag(help: "Print one JSON document instead of text.")
    var json = false

    @OptionGroup(title: "Key (optional; needed to check MACs)")
    var key: KeyOptions

    /// Set by the parent for the child that walks the store (``CrashIsolation``).
    @Flag(name: .customLong(String(CrashIsolation.inThisProcessFlag.dropFirst(2))), help: .hidden)
    var inThisProcess = false

    func run() throws {
        guard inThisProcess else {
            try reportingErrors(storePath: directory) { try CrashIsolation.runInChild(storePath: directory) }
            return
        }
        var clean = true
        try reportingErrors(storePath: directory) {
            let store = try StoreAccess.openForReading(directory)
            defer { store.close() }
            let unlocked = try key.unlock(store)
            let keys = unlocked.map { [$0.userId: $0.sealingKey] } ?? [:]
            let progress = ProgressLine("verifying")
            let report = try store.verify(keys: keys) { done, total in progress.update(done, of: total) }
            progress.finish()
            let summary = VerifySummary(report, path: directory, storeLastSequence: try store.log.lastSequence())
            clean = report.isClean
            if json {
                try Console.jsonDocument(summary)
            } else {
                summary.printText()
            }
        }
        if !clean { throw ExitCode(ExitStatus.problemsFound.rawValue) }
    }
}

/// What `verify` reports.
struct VerifySummary: Encodable {
    struct Problem: Encodable {
        var sequence: UInt64?
        var kind: String
        var message: String
    }

    var path: String
    var clean: Bool
    var eventsChecked: Int
    var eventsAuthenticated: Int
    var indexEntriesChecked: Int
    var checkpointsChecked: Int
    var headsChecked: Int
    var snapshotRecordsChecked: Int
    var lastSequence: UInt64
    /// Users whose MACs were not checked because no key was given for them.
    var usersWithoutKey: [String]
    /// Sequences named by problems, sorted.
    var damagedSequences: [UInt64]
    var problems: [Problem]

    init(_ report: VerifyReport, path: String, storeLastSequence: UInt64) {
        self.path = path
        clean = report.isClean
        eventsChecked = report.eventsChecked
        eventsAuthenticated = report.eventsAuthenticated
        indexEntriesChecked = report.indexEntriesChecked
        checkpointsChecked = report.checkpointsChecked
        headsChecked = report.headsChecked
        snapshotRecordsChecked = report.snapshotRecordsChecked
        lastSequence = storeLastSequence
        usersWithoutKey = report.usersWithoutKey.sorted()
        damagedSequences = report.problemSequences.sorted()
        problems = report.problems.map { Problem(sequence: $0.sequence, kind: $0.kind.rawValue, message: $0.message) }
    }

    func printText() {
        Console.out("checked \(eventsChecked) event(s) (\(eventsAuthenticated) authenticated), "
                    + "\(indexEntriesChecked) index entries, \(checkpointsChecked) checkpoint(s), \(headsChecked) head record(s)"
                    + (snapshotRecordsChecked > 0 ? ", \(snapshotRecordsChecked) snapshot record(s)" : ""))
        if !usersWithoutKey.isEmpty {
            Console.out("MACs not checked for user(s) \(usersWithoutKey.joined(separator: ", ")) (no key given): "
                        + "a flipped byte in an encrypted body is only found with the key")
        }
        if clean {
            Console.out("OK: no problems found")
            return
        }
        Console.out("PROBLEMS: \(problems.count) problem(s)"
                    + (damagedSequences.isEmpty ? "" : " at sequence(s) \(damagedSequences.map(String.init).joined(separator: ", "))"))
        for problem in problems {
            Console.out("  " + (problem.sequence.map { "seq \($0): " } ?? "") + "\(problem.message) [\(problem.kind)]")
        }
        Console.out("the damaged events cannot be trusted; restore \(path) from a backup")
    }
}
