import Testing
import Foundation
import LMDB
import VaultCrypto
@testable import EventLog
import VaultLogTestSupport

/// A user's events are walked through the index with one cursor over the events, stepping to
/// the next entry when the sequence follows the previous one and searching otherwise. These
/// walks must give exactly what looking each indexed sequence up on its own gives.
@Suite struct UserWalkTests {
    /// Two users whose events come in runs of different lengths (so both the step and the search
    /// are taken), one of user-a's events missing from the events database (its index entry
    /// kept), and a non-ASCII cipher id.
    func interleavedStore(_ dir: TemporaryDirectory) throws -> EventLogStore {
        let store = try openStore(dir)
        let runs = [("user-a", 3), ("user-b", 1), ("user-a", 1), ("user-b", 4), ("user-a", 5), ("user-b", 2), ("user-a", 2)]
        var n = 0
        for (user, length) in runs {
            let key = user == "user-a" ? keyA : keyB
            try store.append((0..<length).map { _ in defer { n += 1 }; return event(n, user: user, cipher: n == 12 ? "carte-bleue-é" : nil) },
                             key: key)
        }
        // user-a's sixth event (inside the run of five) goes missing.
        let missing = try #require(try store.read { try $0.sequences(userId: "user-a", cipherId: nil) }.dropFirst(5).first)
        try store.environment.write { txn in _ = try txn.delete(store.events, key: sequenceKey(missing)) }
        return store
    }

    /// The reference: each indexed sequence looked up on its own.
    func reference(_ store: EventLogStore, _ user: String, after: UInt64) throws -> [UInt64] {
        try store.read { reader in
            try reader.sequences(userId: user, cipherId: nil, after: after).filter { try reader.envelope(at: $0) != nil }
        }
    }

    @Test func envelopesAndHeaders_matchLookingUpEachIndexedSequence() throws {
        let dir = TemporaryDirectory()
        let store = try interleavedStore(dir)
        for user in ["user-a", "user-b"] {
            let indexed = try store.read { try $0.sequences(userId: user, cipherId: nil) }
            for after in [0] + indexed {
                let expected = try reference(store, user, after: after)
                for limit in [1, 2, 3, 100] {
                    let batch = try store.read { try $0.envelopes(userId: user, after: after, limit: limit) }
                    #expect(batch.map(\.header.sequence) == Array(expected.prefix(limit)), "\(user) after \(after) limit \(limit)")
                    #expect(batch.allSatisfy { $0.header.userId == user })
                }
                var headers: [EventHeader] = []
                try store.read { try $0.forEachHeader(userId: user, after: after) { headers.append($0); return true } }
                #expect(headers.map(\.sequence) == expected, "\(user) headers after \(after)")
                #expect(headers.allSatisfy { $0.userId == user })
                // Stopping early stops at once.
                var visited = 0
                try store.read { try $0.forEachHeader(userId: user, after: after) { _ in visited += 1; return visited < 2 } }
                #expect(visited == min(2, expected.count))
            }
        }
        // The non-ASCII id reads back as written.
        let headers = try store.headers(userId: "user-a")
        #expect(headers.contains { $0.cipherId == "carte-bleue-é" })
        // The missing event is missing from both walks, and from nothing else.
        let all = try store.read { try $0.sequences(userId: "user-a", cipherId: nil) }
        #expect(try reference(store, "user-a", after: 0).count == all.count - 1)
    }

    @Test func headerWithInvalidUTF8Id_isMalformed() throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        try store.append(event(0), key: keyA)
        var bytes = try #require(try store.read { try $0.transaction.get(store.events, key: sequenceKey(1)) })
        // The cipher id ("cipher-0") starts after the fixed fields and the user id.
        let cipherStart = Envelope.fixedHeaderBytes + 1 + "user-a".utf8.count + 1
        bytes[cipherStart] = 0xC3   // a lead byte followed by ASCII: not UTF-8
        try store.environment.write { txn in try txn.put(store.events, key: sequenceKey(1), value: bytes) }
        #expect {
            try store.read { try $0.forEachHeader(userId: "user-a") { _ in true } }
        } throws: { error in
            guard case EnvelopeError.malformed(_, let reason) = error else { return false }
            return reason.contains("cipher id is not UTF-8")
        }
    }
}
