import Foundation
import LMDB
import Testing
@testable import EventLog
import VaultCrypto
import VaultModel
@_spi(Tools) @testable import OfflineSync
import VaultLogTesting
import VaultLogTestSupport

/// Nothing unauthenticated steers an unlocked vault: the unsealed pending checkpoint and bytes
/// copied around inside `data.mdb` are edited here with LMDB directly, as anyone holding the
/// file could, and the vault must still act on what the sealed log says.
@Suite struct UnauthenticatedStateTests {
    static let userId = "user-a"
    static let items = 8

    /// A store with eight synced items, each edited offline (new password "offline-N"), closed.
    final class Device {
        let dir = TemporaryDirectory("offlinesync-tamper")
        let clock = ManualClock()
        let userKey = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 1001))
        let server = ScriptedServer()

        func open() throws -> VaultLogStore {
            var options = VaultLogStoreOptions()
            options.dependencies = .deterministic(seed: 1, clock: clock)
            let store = try VaultLogStore(path: dir.path, options: options)
            store.unlock(userId: UnauthenticatedStateTests.userId, userKey: userKey)
            return store
        }

        /// Creates the items and their offline edits; returns the log's last sequence.
        func prepare() async throws -> UInt64 {
            let store = try open()
            defer { store.close() }
            let repository = VaultRepository(store: store, userId: UnauthenticatedStateTests.userId, server: server)
            for n in 0..<UnauthenticatedStateTests.items {
                let view = Harness.login("Item \(n)", password: "server-\(n)")
                var cipher = try view.encrypt(userKey: userKey, random: SeededRandomSource(seed: UInt64(n)))
                cipher.id = "server-\(n)"
                cipher.revisionDate = try BitwardenDate("2026-01-01T00:00:00.0000000Z")
                server.put(cipher)
                try await store.applyLocal([.upsert(cipher)], userId: UnauthenticatedStateTests.userId)
            }
            server.fail(with: NotConnectedError(), times: UnauthenticatedStateTests.items)
            for n in 0..<UnauthenticatedStateTests.items {
                var view = try #require(try store.localCipher(userId: UnauthenticatedStateTests.userId, id: "server-\(n)")).decrypt(userKey: userKey)
                view.login?.password = "offline-\(n)"
                guard case .savedOffline = try await repository.updateCipher(view) else {
                    Issue.record("edit \(n) was not saved offline"); return 0
                }
            }
            #expect(try store.pendingState(userId: UnauthenticatedStateTests.userId).count == UnauthenticatedStateTests.items)
            return try store.log.lastSequence()
        }

        /// Writes the 13-byte "nothing pending as of `sequence`" checkpoint with LMDB directly.
        func forgeEmptyPendingCheckpoint(asOf sequence: UInt64) throws {
            let environment = try Environment(path: dir.path)
            defer { environment.close() }
            let pending = try environment.openDatabase("pending", create: false)
            var forged: [UInt8] = [1]
            withUnsafeBytes(of: sequence.bigEndian) { forged.append(contentsOf: $0) }
            forged += [0, 0, 0, 0]
            #expect(forged.count == 13)
            try environment.write { txn in
                try txn.put(pending, key: [UInt8(UnauthenticatedStateTests.userId.utf8.count)] + Array(UnauthenticatedStateTests.userId.utf8), value: forged)
            }
        }

        func password(_ cipher: Cipher?) throws -> String? {
            try cipher?.decrypt(userKey: userKey).login?.password
        }
    }

    @Test func forgedPendingCheckpoint_syncStillResolvesEveryPendingItem() async throws {
        let device = Device()
        let last = try await device.prepare()
        try device.forgeEmptyPendingCheckpoint(asOf: last)

        let store = try device.open()
        defer { store.close() }
        let resolver = OfflineSyncResolver(store: store, server: device.server)
        let result = try await SyncService(store: store, server: device.server, resolver: resolver)
            .fetchSync(userId: Self.userId, forceSync: true)
        #expect(result.isApplied, "\(result)")
        #expect(result.resolution?.items.count == Self.items, "the resolver ran for every pending item")
        for n in 0..<Self.items {
            #expect(try device.password(device.server.cipher("server-\(n)")) == "offline-\(n)", "the offline edit reached the server")
            #expect(try device.password(store.localCipher(userId: Self.userId, id: "server-\(n)")) == "offline-\(n)", "the local copy is the edit")
        }
        #expect(try store.pendingState(userId: Self.userId).count == 0)
    }

    @Test func forgedPendingCheckpoint_syncWithoutResolutionOverwritesNoPendingItem() async throws {
        let device = Device()
        let last = try await device.prepare()
        try device.forgeEmptyPendingCheckpoint(asOf: last)

        let store = try device.open()
        defer { store.close() }
        let resolver = OfflineSyncResolver(store: store, server: device.server)
        let result = try await SyncService(store: store, server: device.server, resolver: resolver,
                                           flags: OfflineSyncFlags(resolution: false))
            .fetchSync(userId: Self.userId, forceSync: true)
        #expect(result.isApplied, "\(result)")
        for n in 0..<Self.items {
            #expect(try device.password(store.localCipher(userId: Self.userId, id: "server-\(n)")) == "offline-\(n)",
                    "the pending local copy was kept, not replaced by the server's")
        }
    }

    @Test func forgedPendingCheckpoint_isReportedByVerify() async throws {
        let device = Device()
        let last = try await device.prepare()
        do {
            let store = try device.open()
            #expect(try store.verify(keys: [Self.userId: store.sealingKey(userId: Self.userId)]).isClean)
            store.close()
        }
        try device.forgeEmptyPendingCheckpoint(asOf: last)
        let store = try device.open()
        defer { store.close() }
        let report = try store.verify(keys: [Self.userId: store.sealingKey(userId: Self.userId)])
        let mismatch = report.problems.filter { $0.kind == .derivedRecordMismatch }
        #expect(mismatch.count == 1, "\(report.problems)")
        #expect(mismatch.first?.sequence == last)
        #expect(mismatch.first?.message.contains("pending checkpoint of user \(Self.userId)") == true)
        #expect(mismatch.first?.message.contains("\(Self.items) pending") == true, "\(mismatch)")
        store.lock(userId: Self.userId)
        #expect(try store.verify().problems.contains { $0.kind == .derivedRecordMismatch }, "also without a key")
    }

    @Test func envelopeCopiedUnderAnotherKey_projectionAndPendingStateThrowNamingTheKey() async throws {
        let device = Device()
        let last = try await device.prepare()
        do {
            let environment = try Environment(path: device.dir.path)
            defer { environment.close() }
            let events = try environment.openDatabase("events", create: false)
            let users = try environment.openDatabase("users", create: false)
            let target = last + 5
            try environment.write { txn in
                let copied = try #require(try txn.get(events, key: sequenceKey(2)))
                try txn.put(events, key: sequenceKey(target), value: copied)
                try txn.put(users, key: [UInt8(Self.userId.utf8.count)] + Array(Self.userId.utf8), value: sequenceKey(target))
            }
        }
        let store = try device.open()
        defer { store.close() }
        let expected = EnvelopeError.keyMismatch(key: last + 5, headerSequence: 2)
        #expect(throws: expected) { try store.projection(userId: Self.userId) }
        #expect(throws: expected) { try store.pendingState(userId: Self.userId) }
        #expect(throws: expected) { try store.pendingFromHeaders(userId: Self.userId) }
        #expect(throws: expected) { try store.events(userId: Self.userId) }
    }
}

/// An event at sequence 2^64 − 1 (an import of a crafted export can put one there).
@Suite struct LastSequenceTests {
    @Test func eventAtTheLastSequence_projectionReads_andAppendIsRefused() throws {
        let h = try Harness()
        let cipher = try Harness.login("item", password: "pw").encrypt(userKey: h.userKey)
        let operation = OperationBody(cipher: cipher, passwordChanged: true, baseRevisionDate: nil, at: BitwardenDate(h.clock.now))
        try h.store.append(userId: h.userId, cipherId: "item-1", type: .created, body: .operation(operation))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Chained onto the user's event before it, with the head record moved to it, as an
        // append would have made it (only an import of a crafted file can put it there).
        let key = try h.store.sealingKey(userId: h.userId)
        let previous = try #require(try h.store.log.read { try $0.envelope(at: $0.lastSequence()) })
        let header = EventHeader(sequence: .max, userId: h.userId, cipherId: "item-2",
                                 eventType: VaultEventType.created.rawValue, recordedAtMillis: 0, previousMAC: Array(previous.mac))
        let sealed = try Envelope(bytes: Envelope.seal(header: header, body: Array(encoder.encode(operation)),
                                                       key: key, iv: [UInt8](repeating: 3, count: 16)[...]))
        try h.store.log.write { txn in
            try txn.appendSealed(sealed)
            try txn.putHead(HeadRecord(userId: h.userId, lastSequence: .max, chain: Array(sealed.mac)), key: key)
        }
        // A sealed checkpoint as of the last sequence: the next fold starts after it.
        try h.store.saveCheckpoint(try h.store.projection(userId: h.userId))
        h.store.lock(userId: h.userId)
        h.store.unlock(userId: h.userId, userKey: h.userKey)

        let projection = try h.store.projection(userId: h.userId)
        #expect(projection.lastSequence == .max)
        #expect(Set(projection.pending.keys) == ["item-1", "item-2"])
        #expect(try h.store.pendingFromHeaders(userId: h.userId).count == 2)
        #expect {
            try h.store.append(userId: h.userId, cipherId: "item-3", type: .created, body: .operation(operation))
        } throws: { error in
            guard case EventLogError.sequenceSpaceExhausted = error else { return false }
            return true
        }
        #expect(try h.eventCount() == 2)
    }
}
