import Foundation
import LMDB
import Testing
@testable import EventLog
import VaultCrypto
import VaultModel
@_spi(Tools) @testable import OfflineSync
import VaultLogTesting
import VaultLogTestSupport

/// The app's own reads check the log's chain, not only `verify`: with an event removed from the
/// middle, a removed tail or a dropped compaction snapshot, the projection, the pending count
/// and a sync stop with an error naming the user and the event, and nothing is sent. Before,
/// each read the shortened log as if it were whole: the removed edits were silently gone, and
/// a sync pushed what was left.
@Suite struct ChainOnReadTests {
    typealias Device = UnauthenticatedStateTests.Device
    static let userId = UnauthenticatedStateTests.userId

    /// The user's events, in order.
    func sequences(_ device: Device) throws -> [UInt64] {
        let store = try device.open()
        defer { store.close() }
        return try store.log.read { try $0.sequences(userId: Self.userId, cipherId: nil) }
    }

    /// Edits the file as someone who knows its layout would: `body` gets a write transaction
    /// on the store's environment, with the store closed around it.
    func edit(_ device: Device, _ body: (EventLogStore, Transaction) throws -> Void) throws {
        let store = try device.open()
        defer { store.close() }
        try store.log.environment.write { try body(store.log, $0) }
    }

    /// Removes each event and its entry under the user (the fold's index).
    func remove(_ sequences: [UInt64], from device: Device) throws {
        try edit(device) { log, txn in
            for sequence in sequences {
                let event = try txn.delete(log.events, key: sequenceKey(sequence))
                let entry = try txn.delete(log.users, key: UserIndex.key(Self.userId), value: sequenceKey(sequence))
                #expect(event && entry, "event \(sequence) and its entry were there")
            }
        }
    }

    func chainBroken(_ error: (any Error)?, at sequence: UInt64) -> Bool {
        guard case EventLogError.chainBroken(let user, let at, _)? = error as? EventLogError else { return false }
        return user == Self.userId && at == sequence
    }

    /// The app's reads of `device` after the damage: each must fail naming `sequence`, and a
    /// sync must send nothing.
    func expectEveryReadRefuses(_ device: Device, at sequence: UInt64) async throws {
        let store = try device.open()
        defer { store.close() }
        let projection = Result { try store.projection(userId: Self.userId) }
        #expect(chainBroken(projection.failure, at: sequence), "\(projection)")
        let count = Result { try store.pendingCount(userId: Self.userId) }
        #expect(chainBroken(count.failure, at: sequence), "the pending count: \(count)")
        let state = Result { try store.pendingState(userId: Self.userId) }
        #expect(chainBroken(state.failure, at: sequence), "the pending state: \(state)")
        store.lock(userId: Self.userId)
        let locked = Result { try store.pendingCount(userId: Self.userId) }
        #expect(chainBroken(locked.failure, at: sequence), "the locked pending count: \(locked)")
        store.unlock(userId: Self.userId, userKey: device.userKey)

        let callsBefore = device.server.calls.count
        let resolver = OfflineSyncResolver(store: store, server: device.server)
        let sync = await capture { try await SyncService(store: store, server: device.server, resolver: resolver)
            .fetchSync(userId: Self.userId, forceSync: true) }
        #expect(chainBroken(sync.failure, at: sequence), "the sync: \(sync)")
        let written = device.server.calls.dropFirst(callsBefore).filter { !$0.hasPrefix("get") && !$0.hasPrefix("sync") }
        #expect(written.isEmpty, "the sync wrote to the server: \(written)")
        for n in 0..<UnauthenticatedStateTests.items {
            #expect(try device.password(device.server.cipher("server-\(n)")) == "server-\(n)", "item \(n) changed on the server")
        }
    }

    @Test func anEventRemovedFromTheMiddle_stopsEveryRead_atTheEventAfterIt() async throws {
        let device = Device()
        _ = try await device.prepare()
        let events = try sequences(device)
        try #require(events.count >= 6)
        try remove([events[3]], from: device)
        try await expectEveryReadRefuses(device, at: events[4])
    }

    @Test func theFirstEventRemoved_stopsEveryRead() async throws {
        let device = Device()
        _ = try await device.prepare()
        let events = try sequences(device)
        try remove([events[0]], from: device)
        try await expectEveryReadRefuses(device, at: events[1])
    }

    @Test func aRemovedTail_stopsEveryRead_namingTheLastEventTheHeadRecordNames() async throws {
        let device = Device()
        _ = try await device.prepare()
        let events = try sequences(device)
        try remove(Array(events.suffix(2)), from: device)
        try await expectEveryReadRefuses(device, at: events.last!)
    }

    /// A compacted log whose snapshot is removed: its first event left follows the snapshot,
    /// not the start of a chain (the fold from a checkpoint past the horizon did not look).
    @Test func aDroppedCompactionSnapshot_stopsEveryRead() async throws {
        let device = Device()
        _ = try await device.prepare()
        do {
            let store = try device.open()
            defer { store.close() }
            // Every event goes into the snapshot (the pending items' versions it carries); then
            // one more event after it, and a checkpoint a fold would start from.
            let result = try store.compactBlocking(userId: Self.userId, policy: RetentionPolicy(keepDays: 0, keepVersions: 1))
            try #require(result.plan.horizon != nil)
            _ = try await store.append(userId: Self.userId, events: [
                .init(cipherId: "server-1", type: .resolved, body: .outcome(OutcomeBody(at: BitwardenDate(device.clock.now)))),
            ])
            _ = try store.projection(userId: Self.userId)
            _ = try await store.saveCheckpoints(userId: Self.userId)
        }
        let first = try #require(try sequences(device).first)
        try edit(device) { log, txn in
            let removed = try txn.delete(log.snapshots!, key: SnapshotRecord.key(userId: Self.userId))
            #expect(removed, "the snapshot was there")
        }
        try await expectEveryReadRefuses(device, at: first)
    }

    /// The fold resumes from the projection it keeps or a checkpoint: the event right after
    /// the point it resumes from is checked against that point's event.
    @Test func anEventRemovedRightAfterTheFoldsLastPoint_isFound() async throws {
        let device = Device()
        _ = try await device.prepare()
        let store = try device.open()
        defer { store.close() }
        _ = try store.projection(userId: Self.userId)
        var view = try #require(try store.localCipher(userId: Self.userId, id: "server-0")).decrypt(userKey: device.userKey)
        let repository = VaultRepository(store: store, userId: Self.userId, server: device.server)
        device.server.fail(with: NotConnectedError(), times: 2)
        for password in ["later-1", "later-2"] {
            view.login?.password = password
            guard case .savedOffline = try await repository.updateCipher(view) else { Issue.record("not saved offline"); return }
            view = try #require(try store.localCipher(userId: Self.userId, id: "server-0")).decrypt(userKey: device.userKey)
        }
        let events = try store.log.read { try $0.sequences(userId: Self.userId, cipherId: nil) }
        let folded = try store.projection(userId: Self.userId).lastSequence
        #expect(folded == events.last)
        // Two more saves in another process (raw appends here), the first of them removed.
        let more = try await store.append(userId: Self.userId, events: [
            .init(cipherId: "server-1", type: .resolved, body: .outcome(OutcomeBody(at: BitwardenDate(device.clock.now)))),
            .init(cipherId: "server-2", type: .resolved, body: .outcome(OutcomeBody(at: BitwardenDate(device.clock.now)))),
        ])
        try store.log.environment.write { txn in
            _ = try txn.delete(store.log.events, key: sequenceKey(more[0]))
            _ = try txn.delete(store.log.users, key: UserIndex.key(Self.userId), value: sequenceKey(more[0]))
        }
        let projection = Result { try store.projection(userId: Self.userId) }
        #expect(chainBroken(projection.failure, at: more[1]), "\(projection)")
    }

    /// Nothing removed: the reads work, before and after a compaction and across a reopen.
    @Test func anIntactLog_readsAsBefore() async throws {
        let device = Device()
        _ = try await device.prepare()
        let store = try device.open()
        defer { store.close() }
        #expect(try store.pendingCount(userId: Self.userId) == UnauthenticatedStateTests.items)
        _ = try store.compactBlocking(userId: Self.userId, policy: RetentionPolicy(keepDays: 0, keepVersions: 1))
        #expect(try store.projection(userId: Self.userId).pending.count == UnauthenticatedStateTests.items)
        #expect(try store.pendingCount(userId: Self.userId) == UnauthenticatedStateTests.items)
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
