import EventLog
import Foundation
import Testing
import VaultCrypto
import VaultLogTesting
import VaultModel
@_spi(Tools) @testable import OfflineSync

/// Reads never write: the projection, the pending state and count from headers, and the
/// pending-count stream commit nothing (no checkpoint, no write transaction, no flush), however
/// long the tail they fold; the writer saves the checkpoints after its own commits.
@Suite struct ReadsNeverWriteTests {
    /// A store holding `count` operations of one user and no checkpoint of either kind, reopened
    /// with intervals that make every checkpoint due at once.
    static func storeWithALongTail(_ h: Harness, count: Int) throws -> VaultLogStoreOptions {
        let cipher = try Harness.login("item", password: "pw").encrypt(userKey: h.userKey)
        let events = (0..<count).map { n in
            VaultLogStore.PlannedEvent(cipherId: "item-\(n % 7)", type: n < 7 ? .created : .updated,
                                       body: .operation(OperationBody(cipher: cipher, passwordChanged: false, baseRevisionDate: nil,
                                                                      at: BitwardenDate(h.clock.now))))
        }
        try h.store.append(userId: h.userId, events: events)
        h.store.close()
        var options = VaultLogStoreOptions()
        options.dependencies = .deterministic(seed: 3, clock: h.clock)
        options.checkpointInterval = 4
        options.pendingCheckpointInterval = 4
        return options
    }

    @Test func reads_commitNothing_andTheWriterSavesTheDueCheckpoints() async throws {
        let h = try Harness(checkpointInterval: 1_000_000, pendingCheckpointInterval: 0)
        let options = try Self.storeWithALongTail(h, count: 40)
        let store = try VaultLogStore(path: h.dir.path, options: options)
        defer { store.close() }
        store.unlock(userId: h.userId, userKey: h.userKey)
        let db = try #require(store.pendingCheckpoints)
        let before = try store.log.read { $0.commitID }

        #expect(try store.projection(userId: h.userId).pending.count == 7)
        #expect(try store.pendingFromHeaders(userId: h.userId).count == 7)
        #expect(try store.pendingCount(userId: h.userId) == 7)
        #expect(try store.pendingState(userId: h.userId).pending.count == 7)
        var updates = store.pendingCountUpdates(userId: h.userId).makeAsyncIterator()
        #expect(await updates.next() == 7)
        store.lock(userId: h.userId)
        #expect(try store.pendingState(userId: h.userId).pending.count == 7, "locked: from headers")

        #expect(try store.log.read { $0.commitID } == before, "no read committed a write transaction")
        #expect(try store.log.read { try $0.checkpointSequences(userId: h.userId) }.isEmpty)
        #expect(try store.log.read { try $0.get(db, key: VaultLogStore.userPrefix(h.userId)) } == nil)

        // The writer's path (the async append here): the next append saves both checkpoints after its commit.
        store.unlock(userId: h.userId, userKey: h.userKey)
        _ = try store.projection(userId: h.userId)
        let cipher = try Harness.login("item", password: "pw").encrypt(userKey: h.userKey)
        let last = try await store.append(userId: h.userId, cipherId: "item-0", type: .updated,
                                    body: .operation(OperationBody(cipher: cipher, passwordChanged: false, baseRevisionDate: nil,
                                                                   at: BitwardenDate(h.clock.now))))
        #expect(try store.log.read { try $0.checkpointSequences(userId: h.userId) } == [last])
        let pending = try #require(try store.log.read { try $0.get(db, key: VaultLogStore.userPrefix(h.userId)) })
        #expect(PendingCheckpoint.decode(pending)?.lastSequence == last)
    }

    /// The maintenance step writes what reads leave due: locked, the pending set; unlocked, the
    /// sealed projection too; and nothing when nothing is due.
    @Test func saveCheckpoints_writesWhatIsDue_once() throws {
        let h = try Harness(checkpointInterval: 1_000_000, pendingCheckpointInterval: 0)
        let options = try Self.storeWithALongTail(h, count: 40)
        let store = try VaultLogStore(path: h.dir.path, options: options)
        defer { store.close() }
        let db = try #require(store.pendingCheckpoints)
        #expect(try store.saveCheckpoints(userId: h.userId), "locked: the pending set is due")
        let pending = try #require(try store.log.read { try $0.get(db, key: VaultLogStore.userPrefix(h.userId)) })
        #expect(PendingCheckpoint.decode(pending)?.lastSequence == 40)
        #expect(try store.log.read { try $0.checkpointSequences(userId: h.userId) }.isEmpty, "locked: no sealed checkpoint")
        store.unlock(userId: h.userId, userKey: h.userKey)
        #expect(try store.saveCheckpoints(userId: h.userId), "unlocked: the sealed projection is due")
        #expect(try store.log.read { try $0.checkpointSequences(userId: h.userId) } == [40])
        let before = try store.log.read { $0.commitID }
        #expect(try store.saveCheckpoints(userId: h.userId) == false, "nothing due")
        #expect(try store.log.read { $0.commitID } == before, "and nothing written")
    }

    /// A store opened read-only (where a write transaction fails) reads its projection and
    /// pending counts, on an async path too, with a tail longer than every checkpoint interval.
    @Test func aReadOnlyStore_readsItsProjectionAndCounts() async throws {
        let h = try Harness(checkpointInterval: 1_000_000, pendingCheckpointInterval: 0)
        var options = try Self.storeWithALongTail(h, count: 40)
        options.eventLog.environment.readOnly = true
        let store = try VaultLogStore(path: h.dir.path, options: options)
        defer { store.close() }
        store.unlock(userId: h.userId, userKey: h.userKey)
        #expect(try store.projection(userId: h.userId).pending.count == 7)
        #expect(try store.pendingFromHeaders(userId: h.userId).count == 7)
        var updates = store.pendingCountUpdates(userId: h.userId).makeAsyncIterator()
        #expect(await updates.next() == 7)
        #expect(throws: (any Error).self, "the store is read-only: a write fails") {
            try store.log.write { _ in }
        }
    }
}
