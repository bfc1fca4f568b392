import EventLog
import Foundation
import Synchronization
import Testing
import VaultCrypto
import VaultModel
@_spi(Tools) @testable import OfflineSync
import VaultLogTesting

/// The pending-count stream: commits the store did not make itself (another process's, here
/// written straight into the log, past the store's own save path) show within a second; a value
/// never repeats; the stream ends with the store. Waits are bounded polls, never blind sleeps.
@Suite(.timeLimit(.minutes(1))) struct PendingCountStreamTests {
    /// The values a consumer task received, in order.
    final class Received: Sendable {
        private let values = Mutex<[(value: Int, at: Date)]>([])
        var all: [Int] { values.withLock { $0.map(\.value) } }
        /// When the consumer received the last value.
        var lastArrival: Date? { values.withLock { $0.last?.at } }
        func append(_ value: Int) { values.withLock { $0.append((value, Date())) } }
        /// Polls every 10 ms until `condition` holds for the values or `seconds` pass.
        func wait(within seconds: Double, until condition: ([Int]) -> Bool) async -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if condition(all) { return true }
                try? await Task.sleep(for: .milliseconds(10))
            }
            return condition(all)
        }
    }

    static func consume(_ stream: AsyncStream<Int>, into received: Received) -> Task<Void, Never> {
        Task { for await value in stream { received.append(value) } }
    }

    /// An event committed without the store's save path (as another process commits it).
    static func commitBehindTheStore(_ h: Harness, cipherId: String, type: VaultEventType) throws {
        try h.store.log.append([NewEvent(userId: h.userId, cipherId: cipherId, eventType: type.rawValue, recordedAtMillis: 0,
                                         body: Array("{}".utf8))], key: SealingKey(userKey: h.userKey))
    }

    /// Shown by the watcher's poll (every 250 ms); the latency is printed, not asserted: a
    /// loaded machine (CI on two cores) takes longer, and speed belongs in benchmarks.
    @Test func aCommitTheStoreDidNotMake_isShownByTheWatcher() async throws {
        let h = try Harness()
        let received = Received()
        let consumer = Self.consume(h.store.pendingCountUpdates(userId: h.userId), into: received)
        defer { consumer.cancel() }
        #expect(await received.wait(within: 5) { $0 == [0] })
        try Self.commitBehindTheStore(h, cipherId: "c-1", type: .created)
        let committed = Date()
        #expect(await received.wait(within: 5) { $0 == [0, 1] }, "\(received.all)")
        let latency = (received.lastArrival ?? .distantFuture).timeIntervalSince(committed)
        print("pending-count stream: another process's commit shown after \(String(format: "%.3f", latency)) s")
        try Self.commitBehindTheStore(h, cipherId: "c-1", type: .resolved)
        #expect(await received.wait(within: 5) { $0 == [0, 1, 0] }, "\(received.all)")
    }

    @Test func aSaveThatLeavesTheCountAsItWas_givesNoValue() async throws {
        let h = try Harness()
        var view = try await h.seedSynced("Bank")
        let received = Received()
        let consumer = Self.consume(h.store.pendingCountUpdates(userId: h.userId), into: received)
        defer { consumer.cancel() }
        #expect(await received.wait(within: 5) { $0 == [0] })
        h.server.fail(with: NotConnectedError(), times: 3)
        view.login?.password = "offline-1"
        _ = try await h.repository().updateCipher(view)
        #expect(await received.wait(within: 5) { $0 == [0, 1] }, "\(received.all)")
        // Two more offline edits of the same item: still one pending item, so nothing new,
        // also not after the watcher's next look (a poll every 250 ms).
        for n in 2...3 {
            view = try #require(try h.local(view.id!)).decrypt(userKey: h.userKey)
            view.login?.password = "offline-\(n)"
            _ = try await h.repository().updateCipher(view)
        }
        #expect(await received.wait(within: 0.8) { $0 != [0, 1] } == false, "a value repeated: \(received.all)")
        try Self.commitBehindTheStore(h, cipherId: view.id!, type: .resolved)
        #expect(await received.wait(within: 5) { $0 == [0, 1, 0] }, "\(received.all)")
    }

    @Test func aSlowConsumer_getsTheNewestValue_neverABacklog() async throws {
        let h = try Harness()
        var iterator = h.store.pendingCountUpdates(userId: h.userId).makeAsyncIterator()
        #expect(await iterator.next() == 0)
        // 1, 2, 3 pending (this process's saves) while nobody reads: the consumer then gets 3.
        for n in 1...3 {
            var cipher = try Harness.login("item \(n)", password: "pw").encrypt(userKey: h.userKey, random: SeededRandomSource(seed: UInt64(n)))
            cipher.id = "c-\(n)"
            try await h.store.append(userId: h.userId, cipherId: "c-\(n)", type: .created,
                                     body: .operation(OperationBody(cipher: cipher, passwordChanged: true, baseRevisionDate: nil, at: BitwardenDate(Date()))))
        }
        #expect(await iterator.next() == 3)
    }

    @Test func theStreamEnds_whenTheStoreCloses_orItsTaskIsCancelled() async throws {
        let h = try Harness()
        let received = Received()
        let stream = h.store.pendingCountUpdates(userId: h.userId)
        let consumer = Task {
            for await value in stream { received.append(value) }
            received.append(-1)   // the end
        }
        defer { consumer.cancel() }
        #expect(await received.wait(within: 5) { $0 == [0] })
        let cancelled = Received()
        let (store, userId) = (h.store, h.userId)
        let cancelledConsumer = Task {
            for await value in store.pendingCountUpdates(userId: userId) { cancelled.append(value) }
            cancelled.append(-1)
        }
        #expect(await cancelled.wait(within: 5) { $0 == [0] })
        cancelledConsumer.cancel()
        #expect(await cancelled.wait(within: 5) { $0 == [0, -1] }, "the cancelled stream ended: \(cancelled.all)")
        h.store.close()
        #expect(await received.wait(within: 5) { $0 == [0, -1] }, "the stream ended with the store: \(received.all)")
    }
}
