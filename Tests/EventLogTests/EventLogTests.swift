import Testing
import Foundation
import LMDB
import VaultCrypto
@testable import EventLog
import VaultLogTesting
import VaultLogTestSupport

func openStore(_ dir: TemporaryDirectory, mapSize: Int? = nil, seed: UInt64 = 7, itemIndexMergeInterval: Int? = nil) throws -> EventLogStore {
    var options = EventLogOptions()
    if let mapSize { options.environment.mapSize = mapSize }
    if let itemIndexMergeInterval { options.itemIndexMergeInterval = itemIndexMergeInterval }
    options.random = SeededRandomSource(seed: seed)
    return try EventLogStore(path: dir.path, options: options)
}

func event(_ n: Int, user: String = "user-a", cipher: String? = nil, type: UInt16 = 1, bodySize: Int = 0) -> NewEvent {
    var body = Array("{\"n\":\(n),\"password\":\"p\(n)\"}".utf8)
    if bodySize > body.count { body += [UInt8](repeating: UInt8(ascii: " "), count: bodySize - body.count) }
    return NewEvent(userId: user, cipherId: cipher ?? "cipher-\(n % 17)", eventType: type,
                    recordedAtMillis: 1_700_000_000_000 + Int64(n), body: body)
}

let keyA = SealingKey(userKey: SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 100)))
let keyB = SealingKey(userKey: SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 200)))

@Suite struct EventLogTests {
    @Test func hundredThousandEvents_readBackIdenticallyAfterReopen() throws {
        let dir = TemporaryDirectory()
        var written: [[UInt8]] = []
        do {
            let store = try openStore(dir)
            for batch in 0..<100 {
                let events = (0..<1000).map { event(batch * 1000 + $0) }
                let seqs = try store.append(events, key: keyA)
                #expect(seqs.first == UInt64(batch * 1000 + 1) && seqs.last == UInt64(batch * 1000 + 1000))
                written += events.map(\.body)
            }
            store.environment.close()
        }
        let store = try openStore(dir)
        #expect(try store.lastSequence() == 100_000)
        var index = 0
        try store.forEachEnvelope(batchSize: 5000) { envelope in
            #expect(envelope.header.sequence == UInt64(index + 1))
            let body = try envelope.open(key: keyA)
            if body != written[index] { Issue.record("event \(index + 1) differs after reopen") }
            index += 1
            return true
        }
        #expect(index == 100_000)
    }

    @Test func tinyMap_growsPast100MBWithoutSurfacingErrors() throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir, mapSize: 64 << 10)
        var appended = 0
        while try store.environment.info().usedBytes < 100_000_000 {
            try store.append((0..<2000).map { event(appended + $0, bodySize: 2000) }, key: keyA)
            appended += 2000
        }
        #expect(try store.environment.info().mapSize >= 100_000_000)
        #expect(try store.lastSequence() == UInt64(appended))
        #expect(try store.envelope(at: UInt64(appended))?.open(key: keyA) == event(appended - 1, bodySize: 2000).body)
    }

    @Test func eightConcurrentWriters_getGaplessIncreasingSequences() async throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        let perTask = try await withThrowingTaskGroup(of: [UInt64].self) { group in
            for writer in 0..<8 {
                group.addTask {
                    var mine: [UInt64] = []
                    for i in 0..<1000 {
                        let seq = try await store.writeAsync { txn in
                            try txn.append(event(i, user: "user-\(writer)"), key: keyA)
                        }
                        mine.append(seq)
                    }
                    return mine
                }
            }
            var all: [[UInt64]] = []
            for try await seqs in group { all.append(seqs) }
            return all
        }
        for seqs in perTask { #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $0 < $1 }, "each writer's sequences increase") }
        let all = perTask.flatMap { $0 }.sorted()
        #expect(all == Array(1...8000))
        #expect(try store.eventCount() == 8000)
        #expect(try store.verify(keys: [:]).isClean)
    }

    @Test func headers_readWithoutKey_byUserAndCipher() throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        try store.append([event(1, user: "a", cipher: "c1"), event(2, user: "a", cipher: "c2")], key: keyA)
        try store.append([event(3, user: "b", cipher: "c1")], key: keyB)
        try store.append([event(4, user: "a", cipher: "c1", type: 3)], key: keyA)
        #expect(try store.headers(userId: "a").map(\.sequence) == [1, 2, 4])
        #expect(try store.headers(userId: "a", cipherId: "c1").map(\.sequence) == [1, 4])
        #expect(try store.headers(userId: "a", cipherId: "c1").map(\.eventType) == [1, 3])
        #expect(try store.headers(userId: "b", cipherId: "c1").map(\.sequence) == [3])
        #expect(try store.headers(userId: "a", after: 2).map(\.sequence) == [4])
        #expect(try store.read { try $0.userIds() } == ["a", "b"])
    }

    @Test func otherUsersKey_cannotOpenEvents() throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        let seq = try store.append(event(1, user: "a"), key: keyA)
        #expect(throws: EnvelopeError.authenticationFailed(sequence: seq)) {
            try store.envelope(at: seq)?.open(key: keyB)
        }
    }

    @Test func wrongKeyRead_throwsAndWritesNothing() throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        try store.append((0..<50).map { event($0) }, key: keyA)
        let dataFile = dir.path + "/data.mdb"
        let before = try Data(contentsOf: URL(fileURLWithPath: dataFile))
        let txnBefore = try store.environment.info().lastTransactionID
        for seq in UInt64(1)...50 {
            #expect(throws: EnvelopeError.authenticationFailed(sequence: seq)) { try store.envelope(at: seq)?.open(key: keyB) }
        }
        #expect(try store.environment.info().lastTransactionID == txnBefore)
        #expect(try Data(contentsOf: URL(fileURLWithPath: dataFile)) == before)
        let message = EnvelopeError.authenticationFailed(sequence: 7).description
        #expect(message.contains("event 7") && message.contains("wrong key or tampered") && message.contains("vaultlog verify"))
    }

    @Test func deleteUser_removesOnlyThatUsersEventsIndexAndCheckpoints() throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        try store.append((0..<10).map { event($0, user: "a") }, key: keyA)
        try store.append((0..<5).map { event($0, user: "b") }, key: keyB)
        try store.saveCheckpoint(userId: "a", sequence: 10, payload: [1, 2, 3], key: keyA)
        try store.saveCheckpoint(userId: "b", sequence: 15, payload: [4], key: keyB)
        #expect(try store.deleteUser("a") == 10)
        #expect(try store.headers(userId: "a").isEmpty)
        #expect(try store.latestCheckpoint(userId: "a", key: keyA) == nil)
        #expect(try store.headers(userId: "b").map(\.sequence) == [11, 12, 13, 14, 15])
        #expect(try store.latestCheckpoint(userId: "b", key: keyB)?.payload == [4])
        #expect(try store.verify(keys: ["b": keyB]).isClean)
        #expect(try store.lastSequence() == 15)
        // Sequences are never reused after a logout.
        #expect(try store.append(event(0, user: "c"), key: keyA) == 16)
    }

    @Test func checkpoints_latestAtOrBefore_andTamperDetected() throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        try store.saveCheckpoint(userId: "a", sequence: 10, payload: Array("ten".utf8), key: keyA)
        try store.saveCheckpoint(userId: "a", sequence: 20, payload: Array("twenty".utf8), key: keyA)
        try store.saveCheckpoint(userId: "ab", sequence: 15, payload: Array("other user".utf8), key: keyB)
        #expect(try store.latestCheckpoint(userId: "a", key: keyA)?.sequence == 20)
        #expect(try store.latestCheckpoint(userId: "a", atOrBefore: 19, key: keyA).map { String(decoding: $0.payload, as: UTF8.self) } == "ten")
        #expect(try store.latestCheckpoint(userId: "a", atOrBefore: 9, key: keyA) == nil)
        #expect(throws: EventLogError.self) { try store.latestCheckpoint(userId: "a", key: keyB) }
    }

    @Test func stream_deliversEverythingInBoundedBatches() async throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        try store.append((0..<2500).map { event($0) }, key: keyA)
        var count = 0
        var last: UInt64 = 0
        for try await envelope in store.stream(from: 1, to: 2400, batchSize: 100) {
            #expect(envelope.header.sequence == last + 1)
            last = envelope.header.sequence
            count += 1
        }
        #expect(count == 2400)
    }

    @Test func newerStoreFormat_isRefusedWithoutChanges() throws {
        let dir = TemporaryDirectory()
        do {
            let store = try openStore(dir)
            try store.append(event(1), key: keyA)
            let meta = try store.environment.openDatabase("meta")
            try store.environment.write { try $0.put(meta, key: Array("format".utf8), value: [9]) }
            store.environment.close()
        }
        #expect(throws: EventLogError.self) { try openStore(dir) }
        do {
            _ = try openStore(dir)
        } catch {
            #expect("\(error)".contains("v9 is newer"))
        }
    }

    /// A reader of one user's events hands its user id string to each header it parses; an
    /// event of another user (a misfiled one, which the reader then refuses) must keep its own id,
    /// also when the two ids have the same length or one is the other's prefix.
    @Test(arguments: [("user-a", "user-a"), ("user-a", "user-b"), ("user-a", "user-"), ("user-a", "user-ab"), ("user-a", "")])
    func expectedUserId_isUsedOnlyWhenEqual(expected: String, actual: String) throws {
        let header = EventHeader(sequence: 9, userId: actual, cipherId: "c", eventType: 1, recordedAtMillis: 0)
        let bytes = try Envelope.seal(header: header, body: [1], key: keyA, iv: [UInt8](repeating: 0, count: 16)[...])
        let parsed = try Envelope(bytes: bytes, userId: expected)
        #expect(parsed.header.userId == actual)
        #expect(parsed.header == (try Envelope(bytes: bytes)).header)
    }

    /// An event filed under another user's index entries is refused by the batch read and the
    /// header walk, not returned as the reader's user's.
    @Test func batchRead_refusesAnotherUsersEventUnderTheUsersIndex() throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        try store.append([event(1, user: "user-a"), event(2, user: "user-b")], key: keyA)
        // User-b's event (sequence 2) listed under user-a too.
        try store.environment.write { txn in try txn.put(store.users, key: UserIndex.key("user-a"), value: sequenceKey(2)) }
        #expect(throws: EnvelopeError.self) { _ = try store.read { try $0.envelopes(userId: "user-a", after: 1, limit: 10) } }
        #expect(throws: EnvelopeError.self) { try store.read { try $0.forEachHeader(userId: "user-a", after: 1) { _ in true } } }
        #expect(throws: EnvelopeError.self) {
            try store.read { reader in try reader.mappedEvents(userId: "user-a", after: 1, limit: 10).forEach { _ = try $0.open(userId: "user-a", key: keyA) } }
        }
        let inPlace = try store.read { reader in
            try reader.mapEventsInPlace(userId: "user-a", after: 1, limit: 10, key: keyA, parallelThreshold: 256) { event, _ in
                (sequence: event.sequence, refused: (try? event.header.get()) == nil)
            }
        }
        #expect(inPlace.map(\.sequence) == [2] && inPlace.map(\.refused) == [true], "lent in place: the header is the refusal")
        let b = try store.read { try $0.envelopes(userId: "user-b", after: 0, limit: 10) }
        #expect(b.map(\.header.userId) == ["user-b"])
    }

    /// Opening an event where LMDB maps it gives what copying it out and opening the copy
    /// gives; one whose MAC fails comes back as that failure (a fold quarantines its item), not
    /// as an error of the read.
    @Test func mappedEvents_openAsTheirCopiesDo() throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        try store.append((1...6).map { event($0, user: $0 == 4 ? "user-b" : "user-a", bodySize: 40 * $0) }, key: keyA)
        try store.environment.write { txn in
            var bytes = try #require(try txn.get(store.events, key: sequenceKey(3)))
            bytes[bytes.count - 1] ^= 1
            try txn.put(store.events, key: sequenceKey(3), value: bytes)
        }
        let copies = try store.read { try $0.envelopes(userId: "user-a", after: 0, limit: 10) }
        let opened = try store.read { reader in
            try reader.mappedEvents(userId: "user-a", after: 0, limit: 10).map { try $0.open(userId: "user-a", key: keyA) }
        }
        #expect(opened.map(\.header.sequence) == [1, 2, 3, 5, 6])
        #expect(opened.map(\.header) == copies.map(\.header))
        for (copy, (_, plaintext)) in zip(copies, opened) {
            switch plaintext {
            case .success(let bytes): #expect(bytes == (try copy.open(key: keyA)))
            case .failure(let error): #expect(error == .authenticationFailed(sequence: 3) && copy.header.sequence == 3)
            }
        }
        #expect(try store.read { try $0.mappedEvents(userId: "user-a", after: 1, limit: 2).map(\.sequence) } == [2, 3])
        // Lent in place to a closure (serially, and on all cores with a threshold of 1): the
        // same headers and plaintexts, owned by what leaves the read; and the two ends of a
        // body decrypted alone are the ends of its plaintext.
        for threshold in [256, 1] {
            let lent = try store.read { reader in
                try reader.mapEventsInPlace(userId: "user-a", after: 0, limit: 10, key: keyA, parallelThreshold: threshold) { event, decryptor in
                    let ends = try? event.withDecryptedEnds(headBlocks: 1, tailBlocks: 1, decryptor: &decryptor) { head, tail, count in
                        (head: Array(head), tail: Array(tail), count: count)
                    }
                    let plaintext = event.plaintext()
                    let failure: String? = switch plaintext {
                    case .success: nil
                    case .failure(let error): "\(error)"
                    }
                    return (header: try? event.header.get(), bytes: try? plaintext.get(), failure: failure, ends: ends)
                }
            }
            #expect(lent.map { $0.header } == copies.map { Optional($0.header) })
            #expect(lent.contains { ($0.ends ?? nil) != nil }, "ends were decrypted alone")
            for (copy, event) in zip(copies, lent) {
                if let bytes = event.bytes {
                    #expect(bytes == (try copy.open(key: keyA)))
                    if let ends = event.ends ?? nil {
                        #expect(ends.count == bytes.count && ends.head == Array(bytes.prefix(16)) && Array(bytes.suffix(ends.tail.count)) == ends.tail)
                    }
                } else {
                    #expect(event.failure == "\(EnvelopeError.authenticationFailed(sequence: 3))" && copy.header.sequence == 3)
                }
            }
        }
    }

    /// The previous MAC is kept inline but reads, compares, hashes and codes as the array it
    /// was set to; one of another length reads back as set and sealing refuses it.
    @Test func previousMAC_behavesAsTheArrayItWasSetTo() throws {
        let mac = (0..<32).map { UInt8($0 * 7 % 251) }
        var header = EventHeader(sequence: 4, userId: "u", cipherId: "c", eventType: 1, recordedAtMillis: 5, previousMAC: mac)
        #expect(header.previousMAC == mac)
        let sealed = try Envelope(bytes: Envelope.seal(header: header, body: [1], key: keyA, iv: [UInt8](repeating: 0, count: 16)[...]))
        #expect(sealed.header == header)
        #expect(sealed.header.previousMAC == mac)
        #expect(Set([sealed.header, header]).count == 1)
        let json = try JSONEncoder().encode(header)
        #expect(String(decoding: json, as: UTF8.self).contains("\"previousMAC\":[0,7,14,"))
        #expect(try JSONDecoder().decode(EventHeader.self, from: json) == header)
        var other = header
        other.previousMAC = Array(mac.dropLast()) + [255]
        #expect(other != header)
        header.previousMAC = Array(mac.prefix(31))
        #expect(header.previousMAC == Array(mac.prefix(31)))
        #expect(throws: EnvelopeError.self) { try Envelope.seal(header: header, body: [1], key: keyA, iv: [UInt8](repeating: 0, count: 16)[...]) }
        header.previousMAC = nil
        #expect(try Envelope(bytes: Envelope.seal(header: header, body: [1], key: keyA, iv: [UInt8](repeating: 0, count: 16)[...])).header.previousMAC == Envelope.chainStart)
    }

    @Test func envelopeOfNewerVersion_reportsUnsupportedVersion() throws {
        let header = EventHeader(sequence: 5, userId: "u", cipherId: "c", eventType: 1, recordedAtMillis: 0)
        var bytes = try Envelope.seal(header: header, body: [1], key: keyA, iv: [UInt8](repeating: 0, count: 16)[...])
        let newer = Envelope.currentFormatVersion + 1
        bytes[0] = newer
        #expect(throws: EnvelopeError.unsupportedVersion(sequence: 5, version: newer)) { try Envelope(bytes: bytes) }
    }

    @Test(arguments: 0..<200)
    func garbageBytes_neverCrashTheParser(seed: Int) {
        let random = SeededRandomSource(seed: UInt64(seed))
        let length = Int(random.bytes(1)[0]) + seed % 3 * 100
        var bytes = random.bytes(length)
        if seed % 2 == 0, bytes.count > 2 { bytes[0] = 1; bytes[1] = UInt8(min(bytes.count, 40)) }
        _ = try? Envelope(bytes: bytes)
        _ = try? Envelope.parseHeader(bytes)
    }
}
