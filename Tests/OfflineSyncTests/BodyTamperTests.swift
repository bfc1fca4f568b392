import Foundation
import Testing
import VaultCrypto
import VaultModel
@testable import EventLog
@_spi(Tools) @testable import OfflineSync

/// What the app sees of a ciphertext byte changed between the two ends of an event's body
/// (envelope format 3, whose event MAC covers only the ends a fold decrypts): where the fold
/// reads only the ends, nothing it counts changes and every read of that version refuses it;
/// where it reads the body whole, the item is quarantined as before.
@Suite struct BodyTamperTests {
    /// Bank edited offline three times (three versions; the first carries its base, the
    /// server's version, before the fields a fold reads, so the fold reads that one whole),
    /// Mail once; the sequences of Bank's versions.
    static func pendingEdits() async throws -> (Harness, bank: [UInt64]) {
        let h = try Harness()
        for name in ["Bank", "Mail"] {
            var view = try await h.seedSynced(name)
            for n in 1...(name == "Bank" ? 3 : 1) {
                view.login?.password = "\(name)-pw-\(n)"
                h.server.fail(with: NotConnectedError())
                _ = try await h.repository().updateCipher(view)
            }
        }
        h.server.state.withLock { $0.failures.removeAll() }
        let bank = try #require(try h.pending("server-Bank")?.versionSequences)
        #expect(bank.count == 3)
        return (h, bank)
    }

    /// Flips a ciphertext byte in the middle of event `sequence`'s body, where the store keeps it.
    static func flipMiddleByte(of sequence: UInt64, in h: Harness) throws {
        let log = h.store.log
        try log.environment.write { txn in
            var bytes = try #require(try txn.get(log.events, key: sequenceKey(sequence)))
            let start = try Envelope.parseHeader(bytes).length + 64
            #expect(bytes.count - start > Envelope.coveredHeadBytes + Envelope.coveredTailBytes + 32, "a body longer than its covered ends")
            bytes[start + (bytes.count - start) / 2] ^= 0x10
            try txn.put(log.events, key: sequenceKey(sequence), value: bytes)
        }
        // A new open: nothing the store keeps from before the change.
        h.store.lock(userId: h.userId)
        h.store.unlock(userId: h.userId, userKey: h.userKey)
    }

    /// An intermediate version the fold reads by its ends changed: the pending state (three
    /// password changes, both items) is the one written; reading that version fails with the
    /// authentication error; `verify` names it.
    @Test func intermediateVersionChanged_pendingStateStands_andItsReadFails() async throws {
        let (h, bank) = try await Self.pendingEdits()
        let before = try h.store.projection(userId: h.userId)
        try Self.flipMiddleByte(of: bank[1], in: h)
        let after = try h.store.projection(userId: h.userId)
        #expect(after.quarantined == nil)
        #expect(after.pending["server-Bank"]?.offlinePasswordChangeCount == 3 && after.pending.count == 2)
        #expect(after.pending == before.pending)
        #expect(throws: EnvelopeError.authenticationFailed(sequence: bank[1])) { try h.store.event(at: bank[1], userId: h.userId) }
        #expect(try h.store.event(at: bank[0], userId: h.userId) != nil && h.store.event(at: bank[2], userId: h.userId) != nil)
        let report = try h.store.log.verify(keys: [h.userId: h.store.keys(h.userId).sealing])
        #expect(report.problemSequences == [bank[1]], "\(report.problems)")
    }

    /// The first edit, read whole by the fold (its base comes before the fields): a changed
    /// byte between its ends quarantines the item there.
    @Test func firstEditChanged_quarantinesTheItem() async throws {
        let (h, bank) = try await Self.pendingEdits()
        try Self.flipMiddleByte(of: bank[0], in: h)
        let projection = try h.store.projection(userId: h.userId)
        #expect(projection.quarantined?["server-Bank"]?.contains("event \(bank[0])") == true, "\(projection.quarantined ?? [:])")
        #expect(projection.pending["server-Mail"] != nil && projection.quarantined?["server-Mail"] == nil)
    }

    /// The latest version changed: the fold reads it whole for the item's snapshot, so the
    /// item is quarantined there (the other stays pending and is pushed), and nothing of it
    /// reaches the server.
    @Test func latestVersionChanged_quarantinesTheItem_andNothingOfItIsPushed() async throws {
        let (h, bank) = try await Self.pendingEdits()
        try Self.flipMiddleByte(of: bank[2], in: h)
        let projection = try h.store.projection(userId: h.userId)
        #expect(projection.quarantined?["server-Bank"]?.contains("event \(bank[2])") == true, "\(projection.quarantined ?? [:])")
        let report = try await OfflineSyncResolver(store: h.store, server: h.server).processPendingChanges(userId: h.userId)
        #expect(report.items.first { $0.cipherId == "server-Mail" }?.outcome == .pushed)
        #expect(report.items.first { $0.cipherId == "server-Bank" }?.outcome == .skipped)
        let serverBank = try #require(h.server.cipher("server-Bank")).decrypt(userKey: h.userKey)
        #expect(serverBank.login?.password == "pw-0", "the server keeps its copy")
    }
}
