import ArgumentParser
import EventLog
import Foundation
import OfflineSync
import VaultCrypto

/// `vaultlog import FILE DIR`: an export back into a new or empty store.
struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load an export (JSON Lines) into a new or empty store, byte for byte.",
        discussion: """
        Every line is checked before anything is written: the metadata line, JSON shape, base64, \
        envelope structure, header fields agreeing with the envelope, strictly increasing \
        sequences, and the event count. A malformed line is refused with its line number. With a \
        key, the MAC of each of that user's envelopes is checked as well. Then all events are \
        written in one transaction (all or nothing) with their original sequences and bytes, so \
        the copy verifies under the original keys, and the new store is verified.
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
            // Pass 1: structure of every line; collect users.
            let scan = try ExportScan(path: file)
            // Pass 2 (with a key): MACs of that user's envelopes.
            let unlocked = try key.resolve(accounts: scan.metadata.accounts, users: scan.users, where: "in \(file)")
            if let unlocked { try scan.authenticate(unlocked) }

            let store = try Self.load(scan, into: directory)
            defer { store.close() }

            let report = try store.log.verify(keys: unlocked.map { [$0.userId: $0.sealingKey] } ?? [:])
            Console.out("imported \(scan.metadata.eventCount) event(s) and \(scan.metadata.accounts.count) account(s) into \(directory)")
            if report.isClean {
                Console.out("verify: OK (\(report.eventsChecked) event(s), \(report.eventsAuthenticated) authenticated)")
            } else {
                Console.out("verify: \(report.problems.count) problem(s)")
                for problem in report.problems { Console.out("  \(problem)") }
                throw ExitCode(ExitStatus.problemsFound.rawValue)
            }
        }
    }

    /// Pass 3 of an import: writes every envelope of a checked file into a new store, in one
    /// transaction, and its stored accounts. Returns the opened store.
    static func load(_ scan: ExportScan, into directory: String) throws -> VaultLogStore {
        var options = VaultLogStoreOptions()
        options.eventLog.logger = Console.logger("vaultlog.eventlog")
        options.logger = Console.logger("vaultlog.offlinesync")
        // Room for the whole file up front, so the one transaction is not re-run to grow the map.
        options.eventLog.environment.mapSize = max(options.eventLog.environment.mapSize, roundedMapSize(for: scan.fileSize))
        let store = try VaultLogStore(path: directory, options: options)
        do {
            // The closure may run again if the map grows, so it re-reads the file.
            try store.log.write { txn in
                guard try txn.lastSequence() == 0 else {
                    throw CLIError.usage("\(directory) received events while importing; nothing was imported")
                }
                let reader = try LineReader(path: scan.path)
                _ = reader.next()
                while let line = reader.next() {
                    try txn.appendSealed(try ExportScan.envelope(line, number: reader.lineNumber))
                }
                for (user, head) in scan.heads { try txn.putSealedHead(userId: user, bytes: head) }
            }
            for account in scan.metadata.accounts { try store.saveAccount(account) }
        } catch {
            store.close()
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

    static func roundedMapSize(for fileSize: Int) -> Int {
        // Base64 makes the file ~4/3 of the envelopes; index entries and B-tree pages add back
        // less than that. Twice the file size, in whole MiB, leaves room.
        (fileSize * 2 / (1 << 20) + 1) << 20
    }
}

/// The structural check of an export file (pass 1 of an import).
struct ExportScan {
    let path: String
    let metadata: ExportFormat.Metadata
    let users: [String]
    let fileSize: Int
    /// Each user's sealed head record, from the metadata (checked by verify after the import).
    let heads: [String: [UInt8]]

    init(path: String) throws {
        self.path = path
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw CLIError.storage("cannot read \(path): no such file, or not readable")
        }
        fileSize = ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int) ?? 0
        let reader = try LineReader(path: path)
        guard let first = reader.next() else { throw Self.malformed(path, 1, "the file is empty") }
        let metadata: ExportFormat.Metadata
        do {
            metadata = try ExportFormat.metadata(line: first)
        } catch {
            throw Self.malformed(path, 1, error.reason)
        }
        self.metadata = metadata
        for account in metadata.accounts {
            do {
                try account.kdf.validate()
            } catch {
                throw Self.malformed(path, 1, "the stored account \(account.email) has KDF settings no client accepts (\(error))")
            }
        }
        var heads: [String: [UInt8]] = [:]
        for (user, text) in metadata.heads ?? [:] {
            guard let bytes = Base64.decode(text) else { throw Self.malformed(path, 1, "the head record of user \(user) is not base64") }
            heads[user] = bytes
        }
        self.heads = heads
        var previous: UInt64 = 0
        var count = 0
        var users: Set<String> = Set(metadata.accounts.map(\.userId))
        while let line = reader.next() {
            let envelope = try Self.envelope(line, number: reader.lineNumber, path: path)
            let sequence = envelope.header.sequence
            guard sequence > previous else {
                throw Self.malformed(path, reader.lineNumber, "sequence \(sequence) is not after the previous line's \(previous)")
            }
            previous = sequence
            count += 1
            users.insert(envelope.header.userId)
        }
        guard count == metadata.eventCount else {
            throw Self.malformed(path, reader.lineNumber + 1,
                                 "the metadata announces \(metadata.eventCount) event(s) but the file has \(count): it is truncated or was edited")
        }
        guard count == 0 || previous == metadata.lastSequence else {
            throw Self.malformed(path, reader.lineNumber, "the last sequence is \(previous), the metadata says \(metadata.lastSequence)")
        }
        self.users = users.sorted()
    }

    /// Parses and checks one envelope line.
    static func envelope(_ line: String, number: Int, path: String? = nil) throws -> Envelope {
        do {
            return try ExportFormat.envelope(line: line)
        } catch {
            throw malformed(path, number, error.reason)
        }
    }

    /// Checks the MAC of every envelope of the key's user (pass 2).
    func authenticate(_ unlocked: UnlockedUser) throws {
        let key = unlocked.sealingKey
        let reader = try LineReader(path: path)
        _ = reader.next()
        var failed: [(line: Int, sequence: UInt64)] = []
        var passed = 0
        while let line = reader.next() {
            let envelope = try Self.envelope(line, number: reader.lineNumber)
            guard envelope.header.userId == unlocked.userId else { continue }
            if envelope.authenticate(key: key) { passed += 1 } else { failed.append((reader.lineNumber, envelope.header.sequence)) }
        }
        guard !failed.isEmpty else { return }
        if passed == 0 {
            throw CLIError.key("the key does not open any event of user \(unlocked.userId) in \(path) (wrong key or wrong --user); nothing was imported")
        }
        let list = failed.prefix(10).map { "line \($0.line) (seq \($0.sequence))" }.joined(separator: ", ")
        throw CLIError.storage("\(path): \(failed.count) envelope(s) fail authentication (tampered): \(list); nothing was imported")
    }

    static func malformed(_ path: String?, _ line: Int, _ reason: String) -> CLIError {
        CLIError.storage("\(path.map { "\($0): " } ?? "")line \(line): \(reason); nothing was imported")
    }
}
