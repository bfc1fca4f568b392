import ArgumentParser
import EventLog
import Foundation
@_spi(Tools) import OfflineSync

/// `vaultlog info DIR`: what a store holds, without a key.
struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a store's size, map use, users, event count and checkpoints.",
        discussion: """
        Needs no key: everything shown comes from headers and store metadata. \
        Size on disk is what data.mdb and lock.mdb occupy; the map is the address space \
        LMDB reserves (it grows automatically when full).

        Example:
          vaultlog info ~/Library/VaultLog
          vaultlog info --json store | jq .eventCount
        """
    )

    @Argument(help: ArgumentHelp("The store directory (holding data.mdb).", valueName: "dir"))
    var directory: String

    @Flag(help: "Print one JSON document instead of text.")
    var json = false

    func run() throws {
        try reportingErrors(storePath: directory) {
            let store = try StoreAccess.openForReading(directory)
            defer { store.close() }
            let report = try StoreInfo(store: store)
            if json {
                try Console.jsonDocument(report)
            } else {
                report.printText()
            }
        }
    }
}

/// The facts `info` reports.
struct StoreInfo: Encodable {
    struct FileSize: Encodable {
        var name: String
        /// Apparent size.
        var bytes: Int
        /// Blocks actually allocated (LMDB files are sparse).
        var allocatedBytes: Int
    }

    struct User: Encodable {
        var userId: String
        /// Emails of stored accounts (what `--email` unlocks).
        var emails: [String]
        var eventCount: Int
        var firstSequence: UInt64?
        var lastSequence: UInt64?
        /// Sequences at which a sealed projection checkpoint is stored.
        var checkpoints: [UInt64]
        /// The compaction horizon: states before it are gone (nil: never compacted).
        var horizon: UInt64?
        /// Events removed by compactions so far.
        var compactedEvents: UInt64?
        /// Items with versions kept in the snapshot.
        var itemsWithKeptVersions: Int?
    }

    var path: String
    var files: [FileSize]
    var sizeOnDisk: Int
    var mapSize: Int
    var mapUsedBytes: Int
    var pageSize: Int
    var storeFormatVersion: Int
    var eventCount: Int
    var lastSequence: UInt64
    /// How far the item index goes (nil: a store of format 3 or older, every event indexed).
    var itemIndexedThrough: UInt64?
    var users: [User]

    init(store: VaultLogStore) throws {
        path = store.log.path
        files = ["data.mdb", "lock.mdb"].compactMap { name in
            var info = stat()
            let file = (store.log.path as NSString).appendingPathComponent(name)
            guard stat(file, &info) == 0 else { return nil }
            return FileSize(name: name, bytes: Int(info.st_size), allocatedBytes: Int(info.st_blocks) * 512)
        }
        sizeOnDisk = files.reduce(0) { $0 + $1.allocatedBytes }
        let environment = try store.log.environment.info()
        mapSize = environment.mapSize
        mapUsedBytes = environment.usedBytes
        pageSize = environment.pageSize
        storeFormatVersion = try store.log.storedFormatVersion()
        eventCount = try store.log.eventCount()
        lastSequence = try store.log.lastSequence()
        let mark = try store.log.read { try $0.itemIndexedThrough() }
        itemIndexedThrough = mark == .max ? nil : mark
        let accounts = try store.storedAccounts()
        users = try StoreAccess.userIds(store).map { userId in
            try store.log.read { reader in
                let sequences = try reader.sequences(userId: userId, cipherId: nil)
                let snapshot = try reader.snapshotInfo(userId: userId)
                return User(userId: userId, emails: accounts.filter { $0.userId == userId }.map(\.email),
                            eventCount: sequences.count, firstSequence: sequences.first, lastSequence: sequences.last,
                            checkpoints: try reader.checkpointSequences(userId: userId),
                            horizon: snapshot?.horizon, compactedEvents: snapshot?.removedEvents, itemsWithKeptVersions: snapshot?.itemCount)
            }
        }
    }

    func printText() {
        let percent = mapSize > 0 ? Double(mapUsedBytes) * 100 / Double(mapSize) : 0
        let fileText = files.map { "\($0.name) \(Format.bytes($0.bytes))" }.joined(separator: ", ")
        for line in Format.table([
            ["store", path],
            ["size on disk", "\(Format.bytes(sizeOnDisk)) (\(fileText))"],
            ["map", "\(Format.bytes(mapSize)), \(Format.bytes(mapUsedBytes)) used (\(Format.decimal(percent))%), page \(pageSize) B"],
            ["events", "\(eventCount), last sequence \(lastSequence)"],
            ["item index", itemIndexedThrough.map { mark in
                mark >= lastSequence ? "up to date (seq \(mark))"
                    : "up to seq \(mark); one item's later events are found by their headers (by default an append merges them every \(EventLogOptions().itemIndexMergeInterval) events)"
            } ?? "every event (written before store format 4)"],
            ["users", "\(users.count)"],
        ]) { Console.out(line) }
        for user in users {
            Console.out("")
            Console.out("user \(user.userId)")
            var range = ""
            if let first = user.firstSequence, let last = user.lastSequence {
                range = first == last ? " (seq \(first))" : " (seq \(first)–\(last))"
            }
            for line in Format.table([
                ["  account", user.emails.isEmpty ? "none stored (unlock with --user-key-file)" : user.emails.joined(separator: ", ")],
                ["  events", "\(user.eventCount)\(range)"],
                ["  checkpoints", user.checkpoints.isEmpty ? "none" : user.checkpoints.map { "seq \($0)" }.joined(separator: ", ")],
                ["  horizon", user.horizon.map { "compacted before seq \($0) (\(user.compactedEvents ?? 0) events removed, versions of \(user.itemsWithKeptVersions ?? 0) items kept in the snapshot)" }
                    ?? "none (never compacted)"],
            ]) { Console.out(line) }
        }
    }
}
