import Testing
import Foundation
import LMDB
import VaultCrypto
@testable import EventLog
import VaultLogTesting
import VaultLogTestSupport

/// Store format 6 keeps the user index in the `users` database (each user's sequences in a
/// tree of their own, appended at its end). Every read of it must give what the events'
/// headers say, whatever the appends, logouts, compactions and reopens; a format 5 store (user
/// entries as `0x01` keys of `index`) is upcast in one transaction when opened writable and
/// refused, naming what to run, when opened read-only.
@Suite struct UserIndexLayoutTests {
    /// Users of different id lengths, so one user's key is a prefix of none other's reads.
    static let users = ["u", "user-a", "user-ab", "8a1b3c4d-0000-4000-8000-000000000001", "user-b"]
    static let items = (0..<9).map { "item-\($0)" } + [""]
    static let keys = Dictionary(uniqueKeysWithValues: users.enumerated().map { i, user in
        (user, SealingKey(userKey: SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 300 + UInt64(i)))))
    })

    /// `count` events of users and items drawn from `random`, numbered from `n`.
    static func events(_ count: Int, from n: inout Int, random: inout SplitMix64, user: String? = nil) -> [NewEvent] {
        (0..<count).map { _ in
            n += 1
            return event(n, user: user ?? users[Int(random.next() % UInt64(users.count))],
                         cipher: items[Int(random.next() % UInt64(items.count))])
        }
    }

    /// Appends `events`, each user's in its own call (a `SealingKey` seals one user's events).
    static func append(_ events: [NewEvent], to store: EventLogStore) throws {
        for user in users {
            let mine = events.filter { $0.userId == user }
            if !mine.isEmpty { try store.append(mine, key: keys[user]!) }
        }
    }

    /// Every event's (user, item, sequence), from the headers (the oracle).
    static func headers(_ store: EventLogStore) throws -> [EventHeader] {
        var out: [EventHeader] = []
        try store.read { reader in try reader.forEachHeader { out.append($0); return true } }
        return out
    }

    /// Every read of the user index against the headers.
    static func checkReads(_ store: EventLogStore, random: inout SplitMix64, _ context: String) throws {
        let all = try headers(store)
        let last = all.last?.sequence ?? 0
        let withEvents = Set(all.map(\.userId))
        #expect(try store.read { try $0.userIds() } == withEvents.sorted { UserIndex.key($0).lexicographicallyPrecedes(UserIndex.key($1)) },
                "\(context): the users with events, in key order")
        for user in users {
            let mine = all.filter { $0.userId == user }.map(\.sequence)
            let after = random.next() % 2 == 0 ? random.next() % (last + 1) : 0
            try store.read { reader in
                #expect(try reader.sequences(userId: user, cipherId: nil, after: after) == mine.filter { $0 > after },
                        "\(context): \(user)'s events after \(after)")
                #expect(try reader.firstSequence(userId: user) == mine.first, "\(context): \(user)'s first event")
                #expect(try reader.lastSequence(userId: user) == mine.last, "\(context): \(user)'s last event")
                var walked: [UInt64] = []
                try reader.forEachHeader(userId: user, after: after) { walked.append($0.sequence); return true }
                #expect(walked == mine.filter { $0 > after }, "\(context): \(user)'s headers after \(after)")
                let batch = try reader.envelopes(userId: user, after: after, limit: 7).map(\.header.sequence)
                #expect(batch == Array(mine.filter { $0 > after }.prefix(7)), "\(context): a batch of \(user)'s envelopes")
                for _ in 0..<5 where last > 0 {
                    let probe = 1 + random.next() % last
                    #expect(try reader.hasEvent(userId: user, at: probe) == mine.contains(probe), "\(context): \(user) at \(probe)")
                }
                for item in items where !item.isEmpty {
                    let expected = all.filter { $0.userId == user && $0.cipherId == item && $0.sequence > after }.map(\.sequence)
                    #expect(try reader.sequences(userId: user, cipherId: item, after: after) == expected, "\(context): \(user)/\(item)")
                }
            }
        }
        let report = try store.verify(keys: keys)
        #expect(report.isClean, "\(context): \(report.problems.prefix(3).map(\.message))")
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func everyReadOfTheUserIndex_isWhatTheHeadersSay(seed: UInt64) throws {
        let dir = TemporaryDirectory()
        var random = SplitMix64(seed: seed)
        var n = 0
        var store = try openStore(dir, itemIndexMergeInterval: 50)
        try Self.checkReads(store, random: &random, "empty")
        for round in 0..<8 {
            // A bulk load of one user's batches, then small appends of everyone.
            let user = Self.users[round % Self.users.count]
            let batches = (0..<3).map { _ in Self.events(Int(20 + random.next() % 200), from: &n, random: &random, user: user) }
            try store.append(batches: batches, key: Self.keys[user]!)
            try Self.append(Self.events(Int(1 + random.next() % 60), from: &n, random: &random), to: store)
            try store.append(Self.events(1, from: &n, random: &random, user: "u"), key: Self.keys["u"]!)
            try Self.checkReads(store, random: &random, "round \(round)")
            if round == 3 {
                let gone = Self.users[3 + Int(random.next() % 2)]
                let removed = try store.deleteUser(gone)
                let left = try store.read { try $0.sequences(userId: gone, cipherId: nil) }
                #expect(removed > 0 && left.isEmpty, "\(gone) logged out")
                try Self.checkReads(store, random: &random, "after \(gone)'s logout")
            }
            if round == 5 {
                let mine = try store.read { try $0.sequences(userId: "user-ab", cipherId: nil) }
                let horizon = mine[mine.count / 2]
                let counts = try store.write { try $0.compact(userId: "user-ab", through: horizon, payload: [1], items: [:], key: Self.keys["user-ab"]!) }
                #expect(counts.removedEvents == mine.count / 2 + 1)
                try Self.checkReads(store, random: &random, "after user-ab's compaction through \(horizon)")
            }
            if round % 3 == 2 {
                store.close()
                store = try openStore(dir, itemIndexMergeInterval: 50)
                try Self.checkReads(store, random: &random, "reopened after round \(round)")
            }
        }
        store.close()
    }

    /// An imported event (``LogTransaction/appendSealed(_:)``) gets its user entry too.
    @Test func importedEvents_areInTheUserIndex() throws {
        let source = TemporaryDirectory(), target = TemporaryDirectory()
        var random = SplitMix64(seed: 9)
        var n = 0
        let from = try openStore(source)
        try Self.append(Self.events(120, from: &n, random: &random), to: from)
        let envelopes = try from.envelopes(in: 1...120)
        let into = try openStore(target)
        try into.write { txn in
            for envelope in envelopes { try txn.appendSealed(envelope) }
            for user in Self.users {
                let head = try #require(try from.read { try $0.transaction.get(from.heads!, key: IndexKey.checkpointPrefix(user)) })
                try txn.putSealedHead(userId: user, bytes: head)
            }
        }
        for user in Self.users {
            #expect(try into.read { try $0.sequences(userId: user, cipherId: nil) } == from.read { try $0.sequences(userId: user, cipherId: nil) })
        }
        try Self.checkReads(into, random: &random, "imported")
    }

    // MARK: Format 5 stores

    /// Rewrites a store written by this build as a format 5 writer left it: every user entry a
    /// key `0x01 ‖ userLength ‖ user ‖ sequence` of `index`, no `users` database, each item
    /// entry a `0x03` key of `index`, no `items` database, marker 5.
    static func rewriteAsFormat5(_ store: EventLogStore) throws {
        try store.environment.write { txn in
            var entries: [(String, UInt64)] = []
            try txn.scan(store.users) { key, value in
                entries.append((UserIndex.user(ofKey: key)!, readBE(value, at: 0, as: UInt64.self)))
                return true
            }
            for (user, sequence) in entries { try txn.put(store.index, key: IndexKey.user(user, sequence), value: []) }
            try txn.dropDatabase(store.users)
            try ItemIndexLayoutTests.moveItemsToIndex(txn, store)
            try txn.put(store.meta, key: Array("format".utf8), value: [5])
        }
        store.close()
    }

    /// What the closed store at `dir` holds, read with LMDB alone: its format marker, the
    /// `0x01` keys of `index` and whether a `users` database exists.
    static func rawLayout(_ dir: TemporaryDirectory) throws -> (format: [UInt8]?, userKeysInIndex: Int, hasUsers: Bool) {
        try withRawStore(dir) { environment, index, meta in
            let hasUsers = (try? environment.openExistingDatabases([UserIndex.databaseName])) != nil
            return try environment.read { txn in
                (try txn.get(meta, key: Array("format".utf8)), try countKeys(txn, index, tagged: IndexKey.userTag), hasUsers)
            }
        }
    }

    /// Runs `body` on the closed store at `dir` opened read-only with LMDB alone, with its
    /// `index` and `meta` databases.
    static func withRawStore<T>(_ dir: TemporaryDirectory, _ body: (Environment, Database, Database) throws -> T) throws -> T {
        var options = EnvironmentOptions()
        options.readOnly = true
        let environment = try Environment(path: dir.path, options: options)
        defer { environment.close() }
        let databases = try environment.openExistingDatabases(["index", "meta"])
        return try body(environment, databases[0], databases[1])
    }

    /// How many keys of `db` start with `tag`.
    static func countKeys(_ txn: Transaction, _ db: Database, tagged tag: UInt8) throws -> Int {
        var count = 0
        try txn.scan(db, from: [tag]) { key, _ in
            guard key.first == tag else { return false }
            count += 1
            return true
        }
        return count
    }

    /// A format 5 store of several users, bulk loads and merges; returns how many events.
    static func makeFormat5Store(_ dir: TemporaryDirectory, random: inout SplitMix64) throws -> Int {
        var n = 0
        let store = try openStore(dir, itemIndexMergeInterval: 40)
        for round in 0..<4 {
            let user = users[round]
            try store.append(batches: (0..<2).map { _ in events(90, from: &n, random: &random, user: user) }, key: keys[user]!)
            try append(events(70, from: &n, random: &random), to: store)
        }
        try rewriteAsFormat5(store)
        return n
    }

    @Test func aFormat5Store_isUpcastInPlace_andReadsAsBefore() throws {
        let dir = TemporaryDirectory()
        var random = SplitMix64(seed: 55)
        let count = try Self.makeFormat5Store(dir, random: &random)
        let before = try Self.rawLayout(dir)
        #expect(before.format == [5] && before.userKeysInIndex == count && !before.hasUsers, "the builder's store is format 5: \(before)")

        let store = try openStore(dir, itemIndexMergeInterval: 40)
        #expect(try store.storedFormatVersion() == EventLogStore.storeFormatVersion)
        #expect(try store.environment.read { try $0.count(store.users) } == count, "every user entry moved")
        try Self.checkReads(store, random: &random, "after the upcast")
        var n = 10_000
        try Self.append(Self.events(150, from: &n, random: &random), to: store)
        try Self.checkReads(store, random: &random, "appended after the upcast")
        store.close()
        let after = try Self.rawLayout(dir)
        #expect(after.format == [UInt8(EventLogStore.storeFormatVersion)] && after.userKeysInIndex == 0 && after.hasUsers, "\(after)")
    }

    /// A read-only open of the store at `dir`, of format `found`, is refused with an error
    /// naming the store, its format and the command that upcasts it.
    static func expectRefusedReadOnly(_ dir: TemporaryDirectory, found: Int) {
        var options = EventLogOptions()
        options.environment.readOnly = true
        let error = #expect(throws: EventLogError.self) { try EventLogStore(path: dir.path, options: options) }
        guard case .olderStoreFormat(let path, let stored, let current)? = error else {
            Issue.record("expected olderStoreFormat, got \(String(describing: error))")
            return
        }
        #expect(path == dir.path && stored == found && current == EventLogStore.storeFormatVersion)
        let text = "\(error!)"
        #expect(text.contains(dir.path) && text.contains("v\(found)") && text.contains("vaultlog upgrade \(dir.path)"), "\(text)")
    }

    @Test func aFormat5Store_openedReadOnly_isRefusedNamingItsVersionAndWhatToRun() throws {
        let dir = TemporaryDirectory()
        var random = SplitMix64(seed: 56)
        let count = try Self.makeFormat5Store(dir, random: &random)
        Self.expectRefusedReadOnly(dir, found: 5)
        let layout = try Self.rawLayout(dir)
        #expect(layout.format == [5] && layout.userKeysInIndex == count && !layout.hasUsers, "nothing changed: \(layout)")
    }

    /// The upcast is one transaction: cut short after some entries moved, the store is the
    /// format 5 store it was, and the next writable open upcasts it whole.
    @Test(arguments: [1, 137, 400])
    func anUpcastCutShort_leavesTheFormat5Store(at moved: Int) throws {
        struct CutShort: Error {}
        let dir = TemporaryDirectory()
        var random = SplitMix64(seed: 57)
        let count = try Self.makeFormat5Store(dir, random: &random)
        #expect(moved < count)
        var options = EventLogOptions()
        options.upcastInterruption = { if $0 == moved { throw CutShort() } }
        #expect(throws: CutShort.self) { try EventLogStore(path: dir.path, options: options) }
        let layout = try Self.rawLayout(dir)
        #expect(layout.format == [5] && layout.userKeysInIndex == count && !layout.hasUsers, "the old store, whole: \(layout)")

        let store = try openStore(dir, itemIndexMergeInterval: 40)
        #expect(try store.storedFormatVersion() == EventLogStore.storeFormatVersion)
        #expect(try store.environment.read { try $0.count(store.users) } == count)
        try Self.checkReads(store, random: &random, "upcast after one cut short at \(moved)")
        store.close()
    }
}
