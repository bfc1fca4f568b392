import Testing
import Foundation
import LMDB
import VaultCrypto
@testable import EventLog
import VaultLogTestSupport

/// Bytes an attacker (or a bad copy) can put in the file: every read gives an error naming the
/// record, never a hang, a trap or a changed store.
@Suite struct UntrustedInputTests {
    /// Copies the stored bytes of event `source` under the key `target` (and, with `indexFor`,
    /// lists it in that user's index), as someone editing `data.mdb` could.
    func copyEnvelope(_ store: EventLogStore, from source: UInt64, to target: UInt64, indexFor user: String? = nil) throws {
        let bytes = try #require(try store.read { try $0.transaction.get(store.events, key: sequenceKey(source)) })
        try store.environment.write { txn in
            try txn.put(store.events, key: sequenceKey(target), value: bytes)
            if let user { try txn.put(store.users, key: UserIndex.key(user), value: sequenceKey(target)) }
        }
    }

    @Test func envelopeCopiedUnderAnotherKey_everyReadNamesTheKey() throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        try store.append((0..<5).map { event($0) }, key: keyA)
        try copyEnvelope(store, from: 2, to: 9, indexFor: "user-a")

        func isMismatch(_ error: any Error) -> Bool {
            guard case EnvelopeError.keyMismatch(key: 9, headerSequence: 2) = error else { return false }
            return "\(error)".contains("key 9") && "\(error)".contains("vaultlog verify")
        }
        #expect { try store.envelope(at: 9) } throws: { isMismatch($0) }
        #expect { try store.envelopes(in: 1...20) } throws: { isMismatch($0) }
        #expect { try store.envelopes(userId: "user-a") } throws: { isMismatch($0) }
        #expect { try store.headers(userId: "user-a") } throws: { isMismatch($0) }
        #expect { try store.read { try $0.envelopes(userId: "user-a", after: 0, limit: 100) } } throws: { isMismatch($0) }
        #expect { try store.read { try $0.forEachHeader(userId: "user-a") { _ in true } } } throws: { isMismatch($0) }
        #expect { try store.read { try $0.forEachHeader { _ in true } } } throws: { isMismatch($0) }
        // The batched walk used to go back to event 3 after the copy and loop; bounded here so
        // that the old behaviour fails the test instead of hanging it.
        var visits = 0
        #expect {
            try store.forEachEnvelope(batchSize: 2) { _ in visits += 1; return visits < 100 }
        } throws: { isMismatch($0) }
        #expect(visits <= 5, "no event visited twice: the error comes with the batch holding the copy")
        let report = try store.verify(keys: ["user-a": keyA])
        #expect(report.problems.contains { $0.sequence == 9 && $0.kind == .sequenceMismatch && $0.message.contains("key 9") })
        // The real events still read.
        #expect(try store.envelope(at: 2)?.open(key: keyA) == event(1).body)
    }

    @Test func envelopeCopiedUnderAnotherKey_streamThrowsInsteadOfLooping() async throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        try store.append((0..<5).map { event($0) }, key: keyA)
        try copyEnvelope(store, from: 1, to: 7)
        var seen = 0
        await #expect(throws: EnvelopeError.keyMismatch(key: 7, headerSequence: 1)) {
            for try await _ in store.stream(batchSize: 3) {
                seen += 1
                if seen > 50 { break }
            }
        }
        #expect(seen <= 5, "no event seen twice")
    }

    @Test func eventAtTheLastSequence_readsAndRefusesFurtherAppends() throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        try store.append(event(0), key: keyA)
        let first = try #require(try store.envelopes(userId: "user-a").first)
        let header = EventHeader(sequence: .max, userId: "user-a", cipherId: "cipher-x", eventType: 1, recordedAtMillis: 0,
                                 previousMAC: Array(first.mac))
        let sealed = try Envelope(bytes: Envelope.seal(header: header, body: event(1).body, key: keyA, iv: [UInt8](repeating: 7, count: 16)[...]))
        try store.write { try $0.appendSealed(sealed) }

        #expect(try store.lastSequence() == .max)
        #expect(try store.envelopes(userId: "user-a").map(\.header.sequence) == [1, .max])
        #expect(try store.read { try $0.sequences(userId: "user-a", cipherId: nil, after: .max) }.isEmpty,
                "nothing comes after the last sequence (no wrap to the start)")
        #expect(try store.read { try $0.envelopes(userId: "user-a", after: .max, limit: 10) }.isEmpty)
        var headersAfter = 0
        try store.read { try $0.forEachHeader(userId: "user-a", after: .max) { _ in headersAfter += 1; return true } }
        #expect(headersAfter == 0)
        #expect(try store.envelopes(in: 1...UInt64.max).count == 2)
        // The crafted event chains onto event 1, but it was placed without the head record
        // moving: verify names exactly that.
        #expect(try store.verify(keys: ["user-a": keyA]).problems.map(\.kind) == [.truncated])

        #expect { try store.append(event(2), key: keyA) } throws: { error in
            guard case EventLogError.sequenceSpaceExhausted(last: .max) = error else { return false }
            return "\(error)".contains("nothing was written")
        }
        #expect(try store.eventCount() == 2, "nothing was appended")
    }

    @Test(arguments: [[UInt8](), [0], [1, 0], [200]])
    func craftedFormatMarker_isRefusedWithAClearError(marker: [UInt8]) throws {
        let dir = TemporaryDirectory()
        do {
            let store = try openStore(dir)
            try store.append(event(0), key: keyA)
            try store.environment.write { try $0.put(store.meta, key: Array("format".utf8), value: marker) }
            store.environment.close()
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: dir.path + "/data.mdb"))
        #expect { try openStore(dir) } throws: { error in
            switch error {
            case EventLogError.corruptMetadata(let what): return what.contains("format marker")
            case EventLogError.newerStoreFormat(found: 200, _): return true
            default: return false
            }
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir.path + "/data.mdb")) == before, "nothing was changed")
    }
}
