import Testing
import Foundation
import VaultCrypto
import VaultLogTesting
@testable import EventLog

/// A batch sealed into one buffer is byte for byte what sealing its events one at a time makes,
/// chains included, on one core and on all of them.
@Suite struct SealedBatchTests {
    /// Events of three users interleaved (runs and alternations, empty and long bodies, user-level
    /// events without an item), sealed as a batch and one by one with the same IVs.
    @Test(arguments: [1, 5, 63, 64, 300, 2_000])
    func batch_matchesEnvelopeSeal_eventByEvent(count: Int) throws {
        var random = SplitMix64(seed: UInt64(count))
        // Past eight users a batch's users are looked up by hash: the larger batches have eleven.
        let users = ["user-a", "user-b", "a-much-longer-user-identifier-0123456789"] + (count >= 300 ? (0..<8).map { "user-\($0)" } : [])
        var events: [NewEvent] = []
        var user = 0
        for i in 0..<count {
            if random.next() % 4 == 0 { user = Int(random.next() % UInt64(users.count)) }
            let length = [0, 1, 15, 16, 17, 600, 4_000][Int(random.next() % 7)]
            events.append(NewEvent(userId: users[user], cipherId: i % 5 == 0 ? "" : "item-\(i % 7)", eventType: UInt16(i % 9),
                                   recordedAtMillis: 1_700_000_000_000 + Int64(i),
                                   body: (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) }))
        }
        let ivs = (0..<16 * count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        // user-b continues an existing chain; the others start one.
        let previous: [String: [UInt8]] = ["user-b": (0..<32).map { UInt8($0 * 3) }]
        for threshold in [Int.max, 1] {   // one core, then all cores
            let batch = try SealedBatch(events, key: keyA, ivs: ivs, parallelThreshold: threshold) { _ in SealingBase(lastSequence: 40, tips: previous) }
            var chains = previous
            for (i, event) in events.enumerated() {
                let header = EventHeader(sequence: 41 + UInt64(i), userId: event.userId, cipherId: event.cipherId, eventType: event.eventType,
                                         recordedAtMillis: event.recordedAtMillis, previousMAC: chains[event.userId] ?? Envelope.chainStart)
                let expected = try Envelope.seal(header: header, body: event.body, key: keyA, iv: ivs[16 * i..<16 * i + 16])
                #expect(Array(batch.envelope(i)) == expected, "event \(i) of \(count), threshold \(threshold)")
                let envelope = try Envelope(bytes: expected)
                #expect(try envelope.open(key: keyA) == event.body)
                chains[event.userId] = Array(envelope.mac)
            }
            for u in Set(events.map(\.userId)) { #expect(batch.chains[u] == chains[u], "chain of \(u)") }
        }
    }

    /// An id too long for a header is refused before anything is sealed.
    @Test func tooLongAnId_throwsBeforeSealing() {
        let events = [NewEvent(userId: "u", cipherId: String(repeating: "x", count: Envelope.maxIdLength + 1), eventType: 1,
                               recordedAtMillis: 0, body: [1])]
        #expect(throws: EnvelopeError.self) {
            _ = try SealedBatch(events, key: keyA, ivs: [UInt8](repeating: 0, count: 16), parallelThreshold: 64) { _ in SealingBase(lastSequence: 0, tips: [:]) }
        }
    }
}
