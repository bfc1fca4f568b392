import Testing
import Foundation
import LMDB
import VaultCrypto
@testable import EventLog
import VaultLogTestSupport

/// Envelope format 2: each user's events are chained by their MACs and a sealed head record
/// holds the user's last sequence and chain value, so `verify` reports an event removed from
/// the middle or the tail, or moved, by sequence, with or without the key.
@Suite struct ChainTests {
    /// Removes event `sequence` and its index entries, as someone editing `data.mdb` who knows
    /// the layout would (leaving nothing dangling for the index checks to find).
    func removeEvent(_ store: EventLogStore, _ sequence: UInt64) throws {
        let envelope = try #require(try store.envelope(at: sequence))
        let header = envelope.header
        try store.environment.write { txn in
            _ = try txn.delete(store.events, key: sequenceKey(sequence))
            _ = try txn.delete(store.users, key: UserIndex.key(header.userId), value: sequenceKey(sequence))
            if !header.cipherId.isEmpty {
                let generations = try LogReader(transaction: txn, store: store).itemGenerations()
                if let generation = IndexKey.generation(of: sequence, in: generations) {
                    _ = try txn.delete(store.items, key: ItemIndex.key(generation, header.userId, header.cipherId), value: sequenceKey(sequence))
                }
            }
        }
    }

    /// Users a and b interleaved: a at odd sequences 1…19, b at even 2…20.
    func interleaved(_ dir: TemporaryDirectory) throws -> EventLogStore {
        let store = try openStore(dir)
        for n in 0..<10 {
            try store.append(event(n, user: "user-a", cipher: "c\(n % 3)"), key: keyA)
            try store.append(event(n, user: "user-b", cipher: "d\(n % 3)"), key: keyB)
        }
        return store
    }

    @Test func newEvents_areFormat3_andEachNamesItsUsersPreviousMAC() throws {
        let dir = TemporaryDirectory()
        let store = try interleaved(dir)
        let a = try store.envelopes(userId: "user-a")
        #expect(a.allSatisfy { $0.header.formatVersion == 3 })
        #expect(a[0].header.previousMAC == Envelope.chainStart)
        for (previous, next) in zip(a, a.dropFirst()) { #expect(next.header.previousMAC.map { $0[...] } == previous.mac) }
        #expect(try store.storedFormatVersion() >= 7, "a new store is format 7 or later (envelope format 3 with its body MACs)")
        #expect(try store.verify(keys: ["user-a": keyA, "user-b": keyB]).isClean)
        #expect(try store.verify().isClean, "the links are checked without a key too")
    }

    @Test(arguments: [false, true])
    func eventRemovedFromTheMiddle_isReportedAtTheNextEventOfThatUser(withKey: Bool) throws {
        let dir = TemporaryDirectory()
        let store = try interleaved(dir)
        try removeEvent(store, 9)
        let report = try store.verify(keys: withKey ? ["user-a": keyA, "user-b": keyB] : [:])
        #expect(report.problems.map(\.kind) == [.chainBroken], "\(report.problems)")
        #expect(report.problems.first?.sequence == 11)
        #expect(report.problems.first?.message.contains("event 7") == true, "names the event before the gap")
    }

    @Test func usersFirstEventRemoved_isReported() throws {
        let dir = TemporaryDirectory()
        let store = try interleaved(dir)
        try removeEvent(store, 2)
        let report = try store.verify(keys: ["user-b": keyB])
        #expect(report.problems.map(\.kind) == [.chainBroken])
        #expect(report.problems.first?.sequence == 4)
    }

    @Test func truncatedTail_isReportedByTheHeadRecord_andStaysReportedAfterLaterAppends() throws {
        let dir = TemporaryDirectory()
        let store = try interleaved(dir)
        try removeEvent(store, 19)
        try removeEvent(store, 17)
        var report = try store.verify(keys: ["user-a": keyA, "user-b": keyB])
        #expect(report.problems.map(\.kind) == [.truncated], "\(report.problems)")
        #expect(report.problems.first?.message.contains("last event is 19") == true)
        #expect(report.problems.first?.message.contains("15") == true)

        // The app appends again: the new event chains onto the head (the removed event 19), so
        // the gap stays visible.
        let next = try store.append(event(50, user: "user-a"), key: keyA)
        report = try store.verify(keys: ["user-a": keyA, "user-b": keyB])
        #expect(report.problems.map(\.kind) == [.chainBroken], "\(report.problems)")
        #expect(report.problems.first?.sequence == next)
    }

    /// Rewrites event `sequence`'s first byte (its format version) as a newer one.
    func damageVersion(_ store: EventLogStore, _ sequence: UInt64) throws {
        var bytes = try #require(try store.envelope(at: sequence)).bytes
        bytes[0] = 9
        try store.environment.write { try $0.put(store.events, key: sequenceKey(sequence), value: bytes) }
    }

    /// A removed tail behind a damaged record: the damage is reported, and so is the removal
    /// (the walk used to take the damaged record for the head's missing event and say only
    /// "newer format").
    @Test func truncatedTailBehindADamagedRecord_isStillReported() throws {
        let dir = TemporaryDirectory()
        let store = try interleaved(dir)
        try removeEvent(store, 19)
        try damageVersion(store, 17)
        let report = try store.verify(keys: ["user-a": keyA, "user-b": keyB])
        #expect(Set(report.problems.map(\.kind)) == [.unsupportedVersion, .truncated], "\(report.problems)")
        #expect(report.problems.contains { $0.kind == .truncated && $0.message.contains("last event is 19") }, "\(report.problems)")
        #expect(report.problems.contains { $0.kind == .unsupportedVersion && $0.sequence == 17 && $0.message.contains("damaged") })
    }

    /// The damaged record is the one the head names: only the damage is reported.
    @Test func damagedLastEvent_isReportedOnce() throws {
        let dir = TemporaryDirectory()
        let store = try interleaved(dir)
        try damageVersion(store, 19)
        let report = try store.verify(keys: ["user-a": keyA, "user-b": keyB])
        #expect(report.problems.map(\.kind) == [.unsupportedVersion], "\(report.problems)")
    }

    @Test func allEventsOfAUserRemoved_isReported() throws {
        let dir = TemporaryDirectory()
        let store = try interleaved(dir)
        for sequence in stride(from: 2, through: 20, by: 2) { try removeEvent(store, UInt64(sequence)) }
        let report = try store.verify()
        #expect(report.problems.map(\.kind) == [.truncated])
        #expect(report.problems.first?.message.contains("no event of that user") == true)
    }

    @Test func eventsSwapped_areReported() throws {
        let dir = TemporaryDirectory()
        let store = try interleaved(dir)
        let five = try #require(try store.read { try $0.transaction.get(store.events, key: sequenceKey(5)) })
        let seven = try #require(try store.read { try $0.transaction.get(store.events, key: sequenceKey(7)) })
        try store.environment.write { txn in
            try txn.put(store.events, key: sequenceKey(5), value: seven)
            try txn.put(store.events, key: sequenceKey(7), value: five)
        }
        let report = try store.verify(keys: ["user-a": keyA])
        #expect(report.problemSequences == [5, 7], "\(report.problems)")
        #expect(!report.isClean)
    }

    @Test func headRecordRemoved_isReported() throws {
        let dir = TemporaryDirectory()
        let store = try interleaved(dir)
        let heads = try #require(store.heads)
        try store.environment.write { _ = try $0.delete(heads, key: IndexKey.checkpointPrefix("user-a")) }
        let report = try store.verify()
        #expect(report.problems.map(\.kind) == [.malformedHead])
        #expect(report.problems.first?.message.contains("user-a") == true)
    }

    /// Removing a user's last events and the head record together left nothing that named the
    /// removed tail: the next append chained onto the last event left, `verify` was clean
    /// afterwards.
    @Test func tailAndHeadRecordRemoved_theNextAppendIsRefusedWithoutWriting() throws {
        let dir = TemporaryDirectory()
        let store = try interleaved(dir)
        try removeEvent(store, 19)
        try removeEvent(store, 17)
        let heads = try #require(store.heads)
        try store.environment.write { _ = try $0.delete(heads, key: IndexKey.checkpointPrefix("user-a")) }
        let before = try store.eventCount()
        #expect { try store.append(event(99, user: "user-a"), key: keyA) } throws: { error in
            guard case EventLogError.headRecord(let message) = error else { return false }
            return message.contains("user-a") && message.contains("no head record") && message.contains("15")
                && message.contains("nothing was written")
        }
        #expect(try store.eventCount() == before)
        #expect(!(try store.verify(keys: ["user-a": keyA, "user-b": keyB]).isClean))
        // A user with no event yet starts a chain as before.
        try store.append(event(1, user: "user-c"), key: keyA)
    }

    @Test func tamperedHeadRecord_isReported_andAppendsRefuseWithoutWriting() throws {
        let dir = TemporaryDirectory()
        let store = try interleaved(dir)
        let heads = try #require(store.heads)
        let key = IndexKey.checkpointPrefix("user-a")
        var bytes = try #require(try store.read { try $0.transaction.get(heads, key: key) })
        bytes[bytes.count - 40] ^= 0x01   // inside the chain value
        try store.environment.write { try $0.put(heads, key: key, value: bytes) }

        let report = try store.verify(keys: ["user-a": keyA])
        #expect(report.problems.map(\.kind) == [.headAuthenticationFailed])
        let before = try store.eventCount()
        #expect { try store.append(event(99, user: "user-a"), key: keyA) } throws: { error in
            guard case EventLogError.headRecord = error else { return false }
            return "\(error)".contains("nothing was written") && "\(error)".contains("user-a")
        }
        #expect(try store.eventCount() == before)
        // Another user's appends are unaffected.
        try store.append(event(99, user: "user-b"), key: keyB)
    }

    @Test func format1Store_isUpcastOnOpen_andNewEventsChainOntoItsLastEvent() throws {
        let dir = TemporaryDirectory()
        // A store as format 1 wrote it: version 1 envelopes, marker 1, no head records, every
        // event's item indexed with it.
        do {
            let store = try openStore(dir, itemIndexMergeInterval: 1)
            try store.write { txn in
                for n in 1...4 {
                    let header = EventHeader(formatVersion: 1, sequence: UInt64(n), userId: "user-a", cipherId: "c\(n % 2)",
                                             eventType: 1, recordedAtMillis: Int64(n))
                    try txn.appendSealed(Envelope(bytes: Envelope.seal(header: header, body: Array("v1-\(n)".utf8), key: keyA,
                                                                       iv: [UInt8](repeating: UInt8(n), count: 16)[...])))
                }
            }
            try store.environment.write { try $0.put(store.meta, key: Array("format".utf8), value: [1]) }
            store.environment.close()
        }
        var options = EventLogOptions()
        options.environment.readOnly = true
        let refusal = #expect(throws: EventLogError.self, "a read-only open cannot upcast it: refused") {
            _ = try EventLogStore(path: dir.path, options: options)
        }
        #expect(refusal.map { "\($0)" } == EventLogError.olderStoreFormat(path: dir.path, found: 1, current: EventLogStore.storeFormatVersion).description)

        let store = try openStore(dir)
        #expect(try store.storedFormatVersion() == EventLogStore.storeFormatVersion, "upcast to the current format in one step")
        #expect(try store.read { try $0.itemIndexedThrough() } == 4, "its items were indexed with its events")
        let old = try store.envelopes(userId: "user-a")
        #expect(old.map(\.header.formatVersion) == [1, 1, 1, 1])
        #expect(try old.map { try $0.open(key: keyA) } == (1...4).map { Array("v1-\($0)".utf8) })
        let sequence = try store.append(event(5, user: "user-a"), key: keyA)
        let new = try #require(try store.envelope(at: sequence))
        #expect(new.header.formatVersion == Envelope.currentFormatVersion)
        #expect(new.header.previousMAC.map { $0[...] } == old.last?.mac)
        #expect(try store.envelopes(userId: "user-a", cipherId: "c1").map(\.header.sequence) == [1, 3],
                "one item's events: the index from the old writer")
        #expect(try store.verify(keys: ["user-a": keyA]).isClean)
    }
}
