import Testing
import Foundation
import LMDB
import VaultCrypto
@testable import EventLog
import VaultLogTesting
import VaultLogTestSupport

/// `append(batches:)` seals the next batch on other threads while the current one commits. The
/// log it leaves must be the one the same batches appended one call at a time leave, byte for
/// byte, whatever the batches hold and whoever else writes in between.
@Suite struct BulkAppendTests {
    /// Every entry of the log's own databases, as stored.
    func contents(_ store: EventLogStore) throws -> [String: [[UInt8]]] {
        try store.environment.read { txn in
            var out: [String: [[UInt8]]] = [:]
            for (name, db) in [("events", store.events), ("index", store.index), ("users", store.users), ("heads", store.heads!), ("meta", store.meta)] {
                try txn.scan(db) { key, value in
                    out[name, default: []].append(Array(key) + [0xFF] + Array(value))
                    return true
                }
            }
            return out
        }
    }

    /// Batches of three users (one with history before the load), runs and alternations, user
    /// level events, empty batches, batches of one and of thousands.
    func batches(seed: UInt64) -> [[NewEvent]] {
        var random = SplitMix64(seed: seed)
        // More than eight users in some batches: a batch's users are then looked up by hash.
        let users = ["user-a", "user-b", "a-much-longer-user-identifier-0123456789"] + (0..<9).map { "user-\($0)" }
        var n = 0
        // Batches of a megabyte or more are sealed into mappings that go round within the
        // load (a later batch reuses an earlier one's, smaller or not).
        return [0, 1, 700, 3, 0, 2_500, 64, 1, 65, 2_000, 1_800, 2_100, 3_000, 1_900].enumerated().map { b, size in
            let count = b % 2 == 0 ? 3 : users.count
            var user = Int(random.next() % UInt64(count))
            return (0..<size).map { _ in
                if random.next() % 5 == 0 { user = Int(random.next() % UInt64(count)) }
                n += 1
                return event(n, user: users[user], cipher: n % 11 == 0 ? "" : "item-\(random.next() % 40)", bodySize: Int(random.next() % 900))
            }
        }
    }

    /// With seed 3 the item index is merged every 1,000 events, inside the load.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func bulkLoad_isByteForByte_theSameAsOneAppendPerBatch(seed: UInt64) throws {
        let history = (0..<5).map { event($0, user: "user-b") }
        let oneByOne = TemporaryDirectory(), bulk = TemporaryDirectory()
        let interval = seed == 3 ? 1_000 : nil
        let reference = try openStore(oneByOne, seed: seed, itemIndexMergeInterval: interval)
        try reference.append(history, key: keyA)
        var expected: [Range<UInt64>] = []
        for batch in batches(seed: seed) {
            let sequences = try reference.append(batch, key: keyA)
            let last = try reference.lastSequence()
            expected.append(sequences.first.map { $0..<last + 1 } ?? last + 1..<last + 1)
        }

        let store = try openStore(bulk, seed: seed, itemIndexMergeInterval: interval)
        try store.append(history, key: keyA)
        var reported: [(Int, Range<UInt64>)] = []
        let ranges = try store.append(batches: batches(seed: seed), key: keyA) { reported.append(($0, $1)) }
        #expect(ranges == expected)
        #expect(reported.map(\.0) == Array(expected.indices))
        #expect(reported.map(\.1) == expected)
        #expect(try contents(store) == contents(reference))
        if interval != nil { #expect(try store.read { try $0.itemIndexedThrough() } > 0, "merged during the load") }
        let report = try store.verify(keys: Dictionary(uniqueKeysWithValues: try store.read { try $0.userIds() }.map { ($0, keyA) }))
        #expect(report.isClean, "\(report.problems.prefix(3))")
        #expect(report.eventsAuthenticated == (try store.eventCount()))
    }

    /// Another writer appends between two batches (here from the progress callback, after one
    /// commit and while the next batch is already sealed for the log as it was): that batch is
    /// sealed again for the log it meets, so sequences and chains stay whole.
    @Test func aWriterInBetween_getsItsEventsAndTheLoadIsResealed() throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        let load = (0..<4).map { b in (0..<300).map { event(1_000 * b + $0, user: $0 % 3 == 0 ? "user-b" : "user-a") } }
        var interloper: [UInt64] = []
        let ranges = try store.append(batches: load, key: keyA) { batch, _ in
            if batch == 1 { interloper = try store.append([event(9, user: "user-b"), event(10, user: "user-a")], key: keyA) }
        }
        #expect(ranges == [1..<301, 301..<601, 603..<903, 903..<1_203])
        #expect(interloper == [601, 602])
        #expect(try store.lastSequence() == 1_202)
        let report = try store.verify(keys: ["user-a": keyA, "user-b": keyA])
        #expect(report.isClean, "\(report.problems.prefix(3))")
        #expect(report.eventsAuthenticated == 1_202)
        // Each event is the one appended at its place.
        for (batch, range) in zip(load, ranges) {
            for (event, sequence) in zip(batch, range) {
                #expect(try store.envelope(at: sequence)!.open(key: keyA) == event.body)
            }
        }
    }

    /// Two bulk loads at once on two threads, both users in both: every batch lands once, in
    /// one contiguous run of sequences, and every chain is whole (each load keeps finding its
    /// next batch sealed for a log the other one has moved on).
    @Test func twoLoadsAtOnce_interleaveWholeBatches() async throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        func load(_ tag: Int) -> [[NewEvent]] {
            (0..<8).map { b in (0..<150).map { i in event(100_000 * tag + 1_000 * b + i, user: i % 2 == 0 ? "user-a" : "user-b") } }
        }
        async let first = Task.detached { try store.append(batches: load(1), key: keyA) }.value
        async let second = Task.detached { try store.append(batches: load(2), key: keyA) }.value
        let ranges = try await first + second
        #expect(ranges.count == 16 && ranges.allSatisfy { $0.count == 150 })
        #expect(Set(ranges.map(\.lowerBound)).count == 16)
        #expect(try store.lastSequence() == 2_400)
        let report = try store.verify(keys: ["user-a": keyA, "user-b": keyA])
        #expect(report.isClean, "\(report.problems.prefix(3))")
        #expect(report.eventsAuthenticated == 2_400)
        for (tag, batches) in [(1, load(1)), (2, load(2))] {
            for (batch, range) in zip(batches, ranges[(tag - 1) * 8..<tag * 8]) {
                for (event, sequence) in zip(batch, range) {
                    #expect(try store.envelope(at: sequence)!.open(key: keyA) == event.body)
                }
            }
        }
    }

    /// A batch that cannot be sealed stops the load: the batches before it are appended and
    /// reported, it and the ones after it are not.
    @Test func aFailingBatch_keepsTheOnesBeforeIt_andWritesNothingAfter() throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        let tooLong = NewEvent(userId: "user-a", cipherId: String(repeating: "x", count: Envelope.maxIdLength + 1), eventType: 1,
                               recordedAtMillis: 0, body: [1])
        let load = [[event(1), event(2)], [event(3)], [event(4), tooLong], [event(5)]]
        var reported: [Int] = []
        #expect(throws: EnvelopeError.self) {
            try store.append(batches: load, key: keyA) { batch, _ in reported.append(batch) }
        }
        #expect(reported == [0, 1])
        #expect(try store.lastSequence() == 3)
        #expect(try store.verify(keys: ["user-a": keyA]).isClean)
    }

    /// A user whose head record fails authentication stops the load at that user's first batch
    /// with the same error a single append gives; the batches before it stay.
    @Test func aTamperedHeadRecord_stopsTheLoadAtThatUsersBatch() throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        try store.append([event(1, user: "user-a"), event(2, user: "user-b")], key: keyA)
        let heads = try #require(store.heads)
        let headKey = IndexKey.checkpointPrefix("user-a")
        var bytes = try #require(try store.read { try $0.transaction.get(heads, key: headKey) })
        bytes[bytes.count - 40] ^= 0x01   // inside the chain value
        try store.environment.write { try $0.put(heads, key: headKey, value: bytes) }

        let load = [[event(3, user: "user-b")], [event(4, user: "user-a"), event(5, user: "user-b")], [event(6, user: "user-b")]]
        var reported: [Int] = []
        #expect { try store.append(batches: load, key: keyA) { batch, _ in reported.append(batch) } } throws: { error in
            guard case EventLogError.headRecord = error else { return false }
            return "\(error)".contains("user-a") && "\(error)".contains("nothing was written")
        }
        #expect(reported == [0])
        #expect(try store.lastSequence() == 3)
    }

    /// An error thrown by the progress callback stops the load after the batch it was told of.
    @Test func aThrowingCallback_stopsAfterItsBatch() throws {
        struct Stop: Error {}
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        let load = (0..<5).map { b in (0..<100).map { event(100 * b + $0) } }
        #expect(throws: Stop.self) {
            try store.append(batches: load, key: keyA) { batch, _ in if batch == 2 { throw Stop() } }
        }
        #expect(try store.lastSequence() == 300)
        #expect(try store.verify(keys: ["user-a": keyA]).isClean)
        // The load can go on where it stopped.
        try store.append(batches: load.dropFirst(3), key: keyA)
        #expect(try store.lastSequence() == 500)
        #expect(try store.verify(keys: ["user-a": keyA]).isClean)
    }
}
