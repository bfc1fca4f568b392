import Testing
import Foundation
import LMDB
import VaultCrypto
@testable import EventLog
import VaultLogTesting
import VaultLogTestSupport

/// An event's entry under its user and item is written in merges, after the event: one item's
/// events are the index up to `itemIndexedThrough` and the headers after it. Whatever the
/// appends, merges, reopens and deletions, one item's events must be exactly the events of the
/// log with that user and item.
@Suite struct ItemIndexTests {
    static let users = ["user-a", "user-b", "user-c"]
    static let items = (0..<12).map { "item-\($0)" } + [""]

    /// One item's sequences after `after`, from every event's header (the oracle).
    func expected(_ store: EventLogStore, user: String, item: String, after: UInt64) throws -> [UInt64] {
        var out: [UInt64] = []
        try store.read { reader in
            try reader.forEachHeader { header in
                if header.userId == user, header.cipherId == item, header.sequence > after { out.append(header.sequence) }
                return true
            }
        }
        return out
    }

    func checkEveryItem(_ store: EventLogStore, interval: Int, appended: Bool, random: inout SplitMix64, _ context: String) throws {
        let last = try store.read { try $0.lastSequence() }
        for user in Self.users {
            for item in Self.items where !item.isEmpty {
                let after = random.next() % 3 == 0 ? random.next() % (last + 1) : 0
                let found = try store.read { try $0.sequences(userId: user, cipherId: item, after: after) }
                #expect(try found == expected(store, user: user, item: item, after: after),
                        "\(context): events of \(user)/\(item) after \(after)")
            }
        }
        let through = try store.read { try $0.itemIndexedThrough() }
        #expect(through <= last, "\(context): the mark \(through) is past the last event \(last)")
        if appended {
            #expect(last - through < UInt64(max(1, interval)), "\(context): \(last - through) events past the item index (interval \(interval))")
        }
        let report = try store.verify(keys: ["user-a": keyA, "user-b": keyB, "user-c": keyC])
        #expect(report.isClean, "\(context): \(report.problems.prefix(3).map(\.message))")
    }

    func randomEvent(_ n: Int, random: inout SplitMix64) -> NewEvent {
        let user = Self.users[Int(random.next() % UInt64(Self.users.count))]
        return event(n, user: user, cipher: Self.items[Int(random.next() % UInt64(Self.items.count))])
    }

    @Test(arguments: [(1, UInt64(1)), (5, 2), (37, 3), (400, 4), (32_768, 5)])
    func oneItemsEvents_areExactlyTheLogsEventsOfThatItem(interval: Int, seed: UInt64) throws {
        let dir = TemporaryDirectory()
        var random = SplitMix64(seed: seed)
        var currentInterval = interval
        var store = try openStore(dir, itemIndexMergeInterval: interval)
        var n = 0
        for step in 0..<30 {
            let operation = random.next() % 10
            switch operation {
            case 0...3:
                n += 1
                let e = randomEvent(n, random: &random)
                try store.append(e, key: key(of: e.userId))
            case 4...6:
                let user = Self.users[Int(random.next() % 3)]
                let events = (0..<Int(random.next() % 90)).map { _ -> NewEvent in
                    n += 1
                    var e = randomEvent(n, random: &random)
                    e.userId = user
                    return e
                }
                try store.append(events, key: key(of: user))
            case 7:
                // A bulk load of one user's batches.
                let user = Self.users[Int(random.next() % 3)]
                let batches = (0..<3).map { _ in
                    (0..<Int(random.next() % 60)).map { _ -> NewEvent in
                        n += 1
                        var e = randomEvent(n, random: &random)
                        e.userId = user
                        return e
                    }
                }
                try store.append(batches: batches, key: key(of: user))
            case 8:
                // Reopened, perhaps with another interval: the mark stays where it was.
                store.environment.close()
                currentInterval = [1, 3, interval, 10_000][Int(random.next() % 4)]
                store = try openStore(dir, itemIndexMergeInterval: currentInterval)
            default:
                if random.next() % 4 == 0 { _ = try store.deleteUser(Self.users[Int(random.next() % 3)]) }
            }
            try checkEveryItem(store, interval: currentInterval, appended: operation < 8, random: &random, "seed \(seed) step \(step)")
        }
    }

    func key(of user: String) -> SealingKey { ["user-a": keyA, "user-b": keyB, "user-c": keyC][user]! }

    /// `vaultlog import` copies envelopes with `appendSealed`: the copy's item index is merged
    /// like an append's, and one item's events in the copy are those of the original.
    @Test func sealedCopies_areMergedLikeAppends() throws {
        let source = TemporaryDirectory(), copy = TemporaryDirectory()
        let original = try openStore(source)
        var random = SplitMix64(seed: 9)
        try original.append((1...300).map { n -> NewEvent in
            var e = randomEvent(n, random: &random)
            e.userId = "user-a"
            return e
        }, key: keyA)
        let target = try openStore(copy, itemIndexMergeInterval: 64)
        try target.write { txn in
            for envelope in try original.envelopes(in: 1...300) { try txn.appendSealed(envelope) }
            let head = try original.environment.read { try $0.get(original.heads!, key: IndexKey.checkpointPrefix("user-a")) }
            try txn.putSealedHead(userId: "user-a", bytes: try #require(head))
        }
        #expect(try target.read { try $0.itemIndexedThrough() } > 0, "merged during the copy")
        for item in Self.items where !item.isEmpty {
            #expect(try target.envelopes(userId: "user-a", cipherId: item).map(\.bytes)
                    == original.envelopes(userId: "user-a", cipherId: item).map(\.bytes), "\(item)")
        }
        let report = try target.verify(keys: ["user-a": keyA])
        #expect(report.isClean, "\(report.problems.prefix(3).map(\.message))")
    }

    /// The merge numbers each (user, item) once, however many of its events it meets, and
    /// tells apart ids that share bytes (a user id that is another's prefix, the same item id
    /// under two users, empty ids).
    @Test func mergeGroups_oneNumberPerUserAndItem() {
        var table = ItemPrefixTable(head: ItemIndex.generationKey(7))
        let users = ["u", "u1", "u12", "", "user-" + String(repeating: "x", count: 90)]
        let items = (0..<2_000).map { "item-\($0)" } + ["", "u1"]
        var numbers: [String: Int32] = [:]
        for round in 0..<3 {
            for (i, item) in items.enumerated() {
                let user = users[(i + round) % users.count]
                let group = Array(user.utf8).withUnsafeBytes { u in Array(item.utf8).withUnsafeBytes { c in table.group(user: u, cipher: c) } }
                let name = user + "|" + item
                if let known = numbers[name] { #expect(group == known, "\(name)") } else { numbers[name] = group }
            }
        }
        #expect(Set(numbers.values).count == numbers.count, "distinct pairs get distinct numbers")
        #expect(table.prefixes.count == numbers.count)
        for (name, group) in numbers {
            let parts = name.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            #expect(table.prefixes[Int(group)] == ItemIndex.key(7, parts[0], parts[1]), "\(name)")
        }
    }

    /// A format 4 store's item entries have no generation (`0x02 ‖ user ‖ item ‖ sequence`):
    /// after the upcast they are still read, checked by `verify` and removed with their user,
    /// beside the merges' entries that follow them.
    @Test func aFormat4StoresEntries_areStillReadBesideTheMerges() throws {
        let dir = TemporaryDirectory()
        var random = SplitMix64(seed: 44)
        var n = 0, withItem = 0
        func batch(_ user: String, _ count: Int) -> [NewEvent] {
            (0..<count).map { _ -> NewEvent in
                n += 1
                var e = randomEvent(n, random: &random)
                e.userId = user
                if !e.cipherId.isEmpty { withItem += 1 }
                return e
            }
        }
        do {
            // Written by this build, then rewritten as a format 4 writer left it.
            let store = try openStore(dir, itemIndexMergeInterval: 1)
            for user in Self.users { try store.append(batch(user, 70), key: key(of: user)) }
            try store.environment.write { txn in
                var entries: [[UInt8]] = []
                try txn.scan(store.items) { k, v in
                    entries.append(Array(k[8...]) + Array(v))   // without the generation
                    return true
                }
                #expect(entries.count == withItem, "one merged entry per event with an item")
                for entry in entries { try txn.put(store.index, key: [IndexKey.cipherTag] + entry, value: []) }
                try txn.dropDatabase(store.items)
                try txn.put(store.meta, key: Array("format".utf8), value: [4])
            }
            store.environment.close()
        }
        var store = try openStore(dir, itemIndexMergeInterval: 25)
        #expect(try store.storedFormatVersion() == EventLogStore.storeFormatVersion)
        #expect(try store.read { try $0.itemIndexedThrough() } == 210, "the mark stays where the format 4 store had it")
        try checkEveryItem(store, interval: 25, appended: false, random: &random, "after the upcast")
        for round in 0..<4 {
            let user = Self.users[round % 3]
            try store.append(batch(user, 40), key: key(of: user))
            try checkEveryItem(store, interval: 25, appended: true, random: &random, "round \(round)")
        }
        #expect(try store.read { try $0.itemGenerations().count } >= 4, "the later events were merged by generation")
        _ = try store.deleteUser("user-b")
        try checkEveryItem(store, interval: 25, appended: false, random: &random, "after user-b's logout")
        store.environment.close()
        store = try openStore(dir, itemIndexMergeInterval: 25)
        try store.append(batch("user-c", 30), key: keyC)
        try checkEveryItem(store, interval: 25, appended: true, random: &random, "after a reopen")
    }

    /// An event's merged entry is under the last generation at or before its sequence (merges
    /// cover consecutive ranges, each named by its first sequence), and `verify` reads the keys
    /// of both layouts back, refusing a generation after the entry's own sequence.
    @Test func generationKeys_parseBack_andEachEventFindsItsMerge() {
        let generations: [UInt64] = [1, 33, 65, 200]
        #expect(IndexKey.generation(of: 0, in: generations) == nil)
        #expect(IndexKey.generation(of: 1, in: generations) == 1)
        #expect(IndexKey.generation(of: 32, in: generations) == 1)
        #expect(IndexKey.generation(of: 33, in: generations) == 33)
        #expect(IndexKey.generation(of: 199, in: generations) == 65)
        #expect(IndexKey.generation(of: .max, in: generations) == 200)
        #expect(IndexKey.generation(of: 5, in: []) == nil)

        func parse(_ key: [UInt8]) -> (user: String, cipher: String?, sequence: UInt64)? { key.withUnsafeBytes { IndexKey.parse($0) } }
        let key = ItemIndex.key(33, "user-a", "item-7")
        #expect(key.starts(with: ItemIndex.userPrefix(33, "user-a")) && key.starts(with: ItemIndex.generationKey(33)))
        #expect(key.withUnsafeBytes { ItemIndex.parse($0) }.map { ["\($0.generation)", $0.user, $0.cipher] } == ["33", "user-a", "item-7"])
        #expect(Array(key.dropLast()).withUnsafeBytes { ItemIndex.parse($0) } == nil, "truncated")
        #expect((key + [0]).withUnsafeBytes { ItemIndex.parse($0) } == nil, "a byte too many")
        #expect(ItemIndex.key(33, "", "").withUnsafeBytes { ItemIndex.parse($0) }.map { [$0.user, $0.cipher] } == ["", ""])
        // A format 5–7 store's entry (one key per event), as the upcast reads it.
        let merged = IndexKey.formerItem(33, "user-a", "item-7", 40)
        #expect(parse(merged).map { [$0.user, $0.cipher ?? "-", "\($0.sequence)"] } == ["user-a", "item-7", "40"])
        #expect(parse(IndexKey.cipher("user-a", "item-7", 40)).map { [$0.user, $0.cipher ?? "-", "\($0.sequence)"] } == ["user-a", "item-7", "40"])
        #expect(parse(IndexKey.user("user-a", 40)).map { [$0.user, $0.cipher ?? "-", "\($0.sequence)"] } == ["user-a", "-", "40"])
        #expect(parse(IndexKey.formerItem(41, "user-a", "item-7", 40)) == nil, "a generation after its own sequence")
        #expect(parse(Array(merged.dropLast())) == nil, "truncated")
        #expect(parse(Array(merged.prefix(9))) == nil, "a generation alone")
    }

    /// A merge appends its entries at the index's end only when nothing sorts after them: an
    /// index holding a later key (a damaged file) gets them put in place, and the appends that
    /// carry the merges still succeed.
    @Test func aLaterKeyInTheIndex_doesNotStopTheMerges() throws {
        let dir = TemporaryDirectory()
        var random = SplitMix64(seed: 12)
        let store = try openStore(dir, itemIndexMergeInterval: 10)
        let stray = ItemIndex.key(.max - 1, "user-z", "item-z")
        try store.environment.write { try $0.put(store.items, key: stray, value: sequenceKey(.max)) }
        for n in 1...45 {
            let e = randomEvent(n, random: &random)
            try store.append(e, key: key(of: e.userId))
        }
        #expect(try store.read { try $0.itemIndexedThrough() } >= 40, "merged past the stray key")
        try store.environment.write { _ = try $0.delete(store.items, key: stray, value: sequenceKey(.max)) }
        try checkEveryItem(store, interval: 10, appended: true, random: &random, "after the stray key")
    }

    /// A mark that is not 8 bytes refuses the open with an error naming it, before anything is
    /// changed.
    @Test func aBrokenMark_refusesTheOpenAndChangesNothing() throws {
        let dir = TemporaryDirectory()
        do {
            let store = try openStore(dir)
            try store.append((1...20).map { event($0) }, key: keyA)
            try store.environment.write { try $0.put(store.meta, key: LogReader.itemIndexedThroughKey, value: [1, 2, 3]) }
            store.environment.close()
        }
        #expect {
            _ = try openStore(dir)
        } throws: { error in
            "\(error)".contains("item index mark of 3 bytes")
        }
        let raw = try Environment(path: dir.path)
        defer { raw.close() }
        let meta = try raw.openExistingDatabases(["meta"])[0]
        #expect(try raw.read { try $0.get(meta, key: LogReader.itemIndexedThroughKey) } == [1, 2, 3], "left as it was")
    }
}

let keyC = SealingKey(userKey: SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 300)))
