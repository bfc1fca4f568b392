import Testing
import Foundation
import LMDB
import VaultCrypto
@testable import EventLog
import VaultLogTesting
import VaultLogTestSupport

/// Store format 8 keeps the item index in the `items` database: one key per merge and item,
/// holding the sequences of that item's events the merge covered. Each item's events must read
/// as the headers say; a format 5–7 store (one `0x03` key of `index` per event) is upcast in one
/// transaction when opened writable and refused, naming what to run, when opened read-only.
@Suite struct ItemIndexLayoutTests {
    typealias Layout = UserIndexLayoutTests

    /// Rewrites a store written by this build as a format 5–7 writer left it: each item entry
    /// a key `0x03 ‖ generation ‖ user ‖ item ‖ sequence` of `index`, no `items` database, the
    /// marker `format`. Closes the store.
    static func rewriteItemsAsFormer(_ store: EventLogStore, format: UInt8) throws {
        try store.environment.write { txn in
            try moveItemsToIndex(txn, store)
            try txn.put(store.meta, key: Array("format".utf8), value: [format])
        }
        store.close()
    }

    /// In `txn`, every entry of `items` becomes a `0x03` key of `index`, and `items` is dropped.
    static func moveItemsToIndex(_ txn: Transaction, _ store: EventLogStore) throws {
        var entries: [[UInt8]] = []
        try txn.scan(store.items) { key, value in
            entries.append(Array(key) + Array(value))
            return true
        }
        for entry in entries { try txn.put(store.index, key: [IndexKey.itemTag] + entry, value: []) }
        try txn.dropDatabase(store.items)
    }

    /// What the closed store at `dir` holds, read with LMDB alone: its format marker, the
    /// `0x03` keys of `index`, and the entries and keys of `items` (nil when it does not exist).
    static func rawLayout(_ dir: TemporaryDirectory) throws -> (format: [UInt8]?, itemKeysInIndex: Int, items: (entries: Int, keys: Int)?) {
        try Layout.withRawStore(dir) { environment, index, meta in
            let items = (try? environment.openExistingDatabases([ItemIndex.databaseName]))?.first
            return try environment.read { txn in
                var layout: (entries: Int, keys: Int)?
                if let items {
                    var keys = 0
                    try txn.withCursor(items) { cursor in
                        var entry = try cursor.first()
                        while entry != nil {
                            keys += 1
                            entry = try cursor.nextKey()
                        }
                    }
                    layout = (try txn.count(items), keys)
                }
                return (try txn.get(meta, key: Array("format".utf8)), try Layout.countKeys(txn, index, tagged: IndexKey.itemTag), layout)
            }
        }
    }

    /// Each item's events after a random point, from the item index and from the headers, and
    /// a clean `verify` with every user's key.
    static func checkItems(_ store: EventLogStore, random: inout SplitMix64, _ context: String) throws {
        let all = try Layout.headers(store)
        let last = all.last?.sequence ?? 0
        for user in Layout.users {
            for item in Layout.items where !item.isEmpty {
                let after = random.next() % 3 == 0 ? random.next() % (last + 1) : 0
                let expected = all.filter { $0.userId == user && $0.cipherId == item && $0.sequence > after }.map(\.sequence)
                #expect(try store.read { try $0.sequences(userId: user, cipherId: item, after: after) } == expected,
                        "\(context): \(user)/\(item) after \(after)")
            }
        }
        let report = try store.verify(keys: Layout.keys)
        #expect(report.isClean, "\(context): \(report.problems.prefix(3).map(\.message))")
    }

    /// A store of several users, bulk loads and merges every 40 events, rewritten as a format
    /// `format` writer left it; returns how many item entries it holds.
    static func makeFormerStore(_ dir: TemporaryDirectory, format: UInt8, random: inout SplitMix64) throws -> Int {
        var n = 0
        let store = try openStore(dir, itemIndexMergeInterval: 40)
        for round in 0..<4 {
            let user = Layout.users[round]
            try store.append(batches: (0..<2).map { _ in Layout.events(90, from: &n, random: &random, user: user) }, key: Layout.keys[user]!)
            try Layout.append(Layout.events(70, from: &n, random: &random), to: store)
        }
        let entries = try store.environment.read { try $0.count(store.items) }
        try rewriteItemsAsFormer(store, format: format)
        return entries
    }

    /// A merge writes one key per item it met, holding all of that item's events it covered
    /// (a key per event was the format 5–7 layout, about 105 bytes each).
    @Test func aMerge_writesOneKeyPerItem_withItsEventsAsValues() throws {
        let dir = TemporaryDirectory()
        var random = SplitMix64(seed: 80)
        var n = 0
        let store = try openStore(dir, itemIndexMergeInterval: 100)
        for _ in 0..<6 { try Layout.append(Layout.events(100, from: &n, random: &random), to: store) }
        let merged = try store.read { try $0.itemIndexedThrough() }
        #expect(merged >= 500, "merged \(merged)")
        let generations = try store.read { try $0.itemGenerations() }
        var expectedKeys = Set<[UInt8]>(), expectedEntries = 0
        for header in try Layout.headers(store) where !header.cipherId.isEmpty && header.sequence <= merged {
            let generation = try #require(IndexKey.generation(of: header.sequence, in: generations))
            expectedKeys.insert(ItemIndex.key(generation, header.userId, header.cipherId))
            expectedEntries += 1
        }
        store.close()
        let layout = try #require(try Self.rawLayout(dir).items)
        #expect(layout.entries == expectedEntries && layout.keys == expectedKeys.count,
                "\(layout.entries) entries under \(layout.keys) keys; expected \(expectedEntries) under \(expectedKeys.count)")
        #expect(layout.keys < layout.entries / 2, "several events per key")
    }

    @Test(arguments: [UInt8(5), 6, 7])
    func aFormerStore_isUpcastInPlace_andEveryItemReadsAsBefore(format: UInt8) throws {
        let dir = TemporaryDirectory()
        var random = SplitMix64(seed: 81 + UInt64(format))
        let count = try Self.makeFormerStore(dir, format: format, random: &random)
        let before = try Self.rawLayout(dir)
        #expect(before.format == [format] && before.itemKeysInIndex == count && before.items == nil, "the builder's store: \(before)")

        let store = try openStore(dir, itemIndexMergeInterval: 40)
        #expect(try store.storedFormatVersion() == EventLogStore.storeFormatVersion)
        try Self.checkItems(store, random: &random, "after the upcast")
        var n = 10_000
        try Layout.append(Layout.events(150, from: &n, random: &random), to: store)
        try Self.checkItems(store, random: &random, "appended after the upcast")
        _ = try store.deleteUser(Layout.users[1])
        try Self.checkItems(store, random: &random, "after a logout")
        store.close()
        let after = try Self.rawLayout(dir)
        #expect(after.format == [UInt8(EventLogStore.storeFormatVersion)] && after.itemKeysInIndex == 0 && (after.items?.entries ?? 0) > 0, "\(after)")
    }

    @Test func aFormat7Store_openedReadOnly_isRefusedNamingItsVersionAndWhatToRun() throws {
        let dir = TemporaryDirectory()
        var random = SplitMix64(seed: 90)
        let count = try Self.makeFormerStore(dir, format: 7, random: &random)
        Layout.expectRefusedReadOnly(dir, found: 7)
        let layout = try Self.rawLayout(dir)
        #expect(layout.format == [7] && layout.itemKeysInIndex == count && layout.items == nil, "nothing changed: \(layout)")
    }

    /// The upcast is one transaction: cut short after some entries moved, the store is the
    /// format 7 store it was, and the next writable open upcasts it whole.
    @Test(arguments: [1, 150])
    func anUpcastCutShort_leavesTheFormat7Store(at moved: Int) throws {
        struct CutShort: Error {}
        let dir = TemporaryDirectory()
        var random = SplitMix64(seed: 91)
        let count = try Self.makeFormerStore(dir, format: 7, random: &random)
        #expect(moved < count)
        var options = EventLogOptions()
        options.upcastInterruption = { if $0 == moved { throw CutShort() } }
        #expect(throws: CutShort.self) { try EventLogStore(path: dir.path, options: options) }
        let layout = try Self.rawLayout(dir)
        #expect(layout.format == [7] && layout.itemKeysInIndex == count && layout.items == nil, "the old store, whole: \(layout)")

        let store = try openStore(dir, itemIndexMergeInterval: 40)
        #expect(try store.environment.read { try $0.count(store.items) } == count)
        try Self.checkItems(store, random: &random, "upcast after one cut short at \(moved)")
        store.close()
    }
}
