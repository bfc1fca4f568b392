import Foundation
import Testing
import VaultCrypto
import VaultModel
import EventLog
@_spi(Tools) @testable import OfflineSync

/// Generated logs with unreadable events among the operations: whatever the order, both folds
/// (lazy and eager) give the same projection, and each item's latest version is the last
/// operation folded before its quarantine, or its last operation when it has none.
@Suite struct FoldQuarantinePropertyTests {
    @Test(arguments: 0..<60)
    func quarantinedItems_keepTheLastOperationBeforeTheQuarantine(seed: UInt64) throws {
        let h = try Harness(seed: seed + 1)
        let keys = try h.store.keys(h.userId)
        var random = XorShift(state: 0x9E37_79B9_7F4A_7C15 ^ (seed &* 0x1000_0001) | 1)
        func pick(_ n: Int) -> Int { Int(random.next() % UInt64(n)) }
        let items = (0..<3).map { "item-\($0)" }
        let at = BitwardenDate(h.clock.now)
        // The reference: what each item's projection must hold.
        var quarantined = Set<String>()
        var expectedLatest: [String: String] = [:]   // pending items: the name of their latest version
        var events: [NewEvent] = []
        for n in 0..<(20 + pick(40)) {
            let item = items[pick(items.count)]
            switch pick(10) {
            case 0:   // authentic but unreadable: an operation type with an outcome body
                events.append(NewEvent(userId: h.userId, cipherId: item, eventType: VaultEventType.updated.rawValue, recordedAtMillis: 0,
                                       body: try VaultEvent.encode(.outcome(OutcomeBody(at: at)))))
                quarantined.insert(item)
            case 1:   // resolved
                events.append(NewEvent(userId: h.userId, cipherId: item, eventType: VaultEventType.resolved.rawValue, recordedAtMillis: 0,
                                       body: try VaultEvent.encode(.outcome(OutcomeBody(at: at)))))
                if !quarantined.contains(item) { expectedLatest[item] = nil }
            default:  // an edit, its body of the canonical shape or not (both folds take both paths)
                let name = "\(item) v\(n)"
                let cipher = try Harness.login(name, password: "pw\(n)", id: item).encrypt(userKey: h.userKey)
                var body = try VaultEvent.encode(.operation(OperationBody(cipher: cipher, passwordChanged: pick(2) == 0,
                                                                          baseRevisionDate: nil, at: at)))
                if pick(4) == 0 { body.insert(UInt8(ascii: " "), at: 1) }
                events.append(NewEvent(userId: h.userId, cipherId: item, eventType: VaultEventType.updated.rawValue, recordedAtMillis: 0, body: body))
                if !quarantined.contains(item) { expectedLatest[item] = name }
            }
        }
        // Appended in a few transactions; the fold reads them as one batch.
        var start = 0
        while start < events.count {
            let end = min(events.count, start + 1 + pick(15))
            try h.store.log.append(Array(events[start..<end]), key: keys.sealing)
            start = end
        }
        h.store.lock(userId: h.userId)
        h.store.unlock(userId: h.userId, userKey: h.userKey)
        let projection = try h.store.projection(userId: h.userId)
        #expect(Set((projection.quarantined ?? [:]).keys) == quarantined, "seed \(seed)")
        for item in items {
            let change = projection.pending[item]
            #expect((change != nil) == (expectedLatest[item] != nil), "seed \(seed): \(item) pending")
            if let change, let name = expectedLatest[item] {
                #expect(try change.latest.decrypt(userKey: h.userKey).name == name, "seed \(seed): \(item)'s latest version")
            }
        }
        let disagreement = try h.store.lazyFoldDisagreement(userId: h.userId)
        #expect(disagreement == nil, "seed \(seed)")
    }
}
