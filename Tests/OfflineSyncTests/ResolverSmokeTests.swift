import Foundation
import Testing
import VaultCrypto
import VaultModel
@_spi(Tools) @testable import OfflineSync
import VaultLogTesting

/// Resolver flows against the scripted in-memory server (the full seed table runs against the
/// emulator over HTTP in ResolverTests); these keep the resolver's own bookkeeping honest.
@Suite struct ResolverSmokeTests {
    struct Crash: ResolutionInterruption {}

    func resolver(_ h: Harness, server: (any CipherServer)? = nil, configure: (inout ResolverOptions) -> Void = { _ in }) -> OfflineSyncResolver {
        var options = ResolverOptions()
        options.concurrency = 1
        configure(&options)
        return OfflineSyncResolver(store: h.store, server: server ?? h.server, options: options)
    }

    @Test func offlineCreate_isPostedOnce_andTheTempIdMapped() async throws {
        let h = try Harness()
        h.server.fail(with: NotConnectedError())
        guard case .savedOffline(let saved?, _) = try await h.repository().addCipher(Harness.login("New", password: "pw")) else {
            Issue.record("expected an offline save"); return
        }
        let tempId = try #require(saved.id)
        let report = try await resolver(h).processPendingChanges(userId: h.userId)
        #expect(report.items.map(\.outcome) == [.created])
        let serverId = try #require(report.items.first?.serverId)
        #expect(h.server.calls.filter { $0 == "create" }.count == 2)   // the failed online try + the resolver's
        #expect(try h.pending(tempId) == nil)
        #expect(try h.local(tempId) == nil)
        #expect(try h.local(serverId) != nil)
        #expect(try h.store.projection(userId: h.userId).idMap[tempId] == serverId)
    }

    @Test func crashAfterCreate_retryFindsTheCopyInsteadOfPostingAgain() async throws {
        let h = try Harness()
        h.server.fail(with: NotConnectedError())
        _ = try await h.repository().addCipher(Harness.login("New", password: "pw"))
        await #expect(throws: Crash.self) {
            try await resolver(h, server: EffectObservingServer(h.server) { _ in throw Crash() }).processPendingChanges(userId: h.userId)
        }
        let report = try await resolver(h).processPendingChanges(userId: h.userId)
        #expect(report.items.map(\.outcome) == [.created])
        #expect(h.server.state.withLock { $0.ciphers.count } == 1)
        #expect(try h.store.pendingCount(userId: h.userId) == 0)
    }

    /// A save that read the item while a run was resolving it and was appended after the run's
    /// outcome: its base is the revision before the run's push. The server copy is then the
    /// run's own write (recorded in the log with the earlier change), not another device's: the
    /// save is pushed without a backup (`vaultlog simulate --concurrent --seeds 699` made one
    /// about one run in thirty).
    @Test func aChangeBasedBeforeThisDevicesEarlierPush_isPushedWithoutABackup() async throws {
        let h = try Harness()
        let view = try await h.seedSynced("Bank")
        let base = try #require(view.revisionDate)
        h.server.fail(with: NotConnectedError(), times: 3)
        var edited = view
        for n in 1...3 {
            edited.login?.password = "offline-\(n)"
            guard case .savedOffline = try await h.repository().updateCipher(edited) else { Issue.record("not saved offline"); return }
        }
        let r = resolver(h)
        #expect(try await r.processPendingChanges(userId: h.userId).items.map(\.outcome) == [.pushed])
        let pushed = try #require(h.server.cipher(view.id!)?.revisionDate)
        #expect(pushed != base)
        // The racing save: made from the item as it was before the push.
        var late = edited
        late.notes = "saved during the run"
        var cipher = try late.encrypt(userKey: h.userKey)
        cipher.revisionDate = base
        try await h.store.append(userId: h.userId, cipherId: view.id!, type: .updated,
                                 body: .operation(OperationBody(cipher: cipher, passwordChanged: false, baseRevisionDate: base,
                                                                at: BitwardenDate(h.clock.now))),
                                 localChanges: [.upsert(cipher)])
        let report = try await r.processPendingChanges(userId: h.userId)
        #expect(report.items.map(\.outcome) == [.pushed], "\(report.items)")
        #expect(h.server.state.withLock { $0.ciphers.count } == 1, "no backup of the run's own write")
        #expect(try h.server.cipher(view.id!)?.decrypt(userKey: h.userKey).notes == "saved during the run")
    }

    @Test func failingItem_backsOff_thenDeadLetters_andRetryRequestRevivesIt() async throws {
        let h = try Harness()
        let view = try await h.seedSynced("Bank")
        var edited = view
        edited.login?.password = "pw-1"
        h.server.fail(with: NotConnectedError())
        _ = try await h.repository().updateCipher(edited)
        let r = resolver(h) { $0.maxAttempts = 2; $0.backoffBase = 10; $0.jitter = 0 }
        // The server answers (503): counted attempts. (A server out of reach never dead-letters.)
        h.server.fail(with: HTTPStatusError(status: 503), times: 10)
        var report = try await r.processPendingChanges(userId: h.userId)
        #expect(report.items.map(\.outcome) == [.failed])
        // Not due yet: skipped without a server call.
        let callsBefore = h.server.calls.count
        report = try await r.processPendingChanges(userId: h.userId)
        #expect(report.items.map(\.outcome) == [.skipped])
        #expect(h.server.calls.count == callsBefore)
        h.clock.advance(by: 11)
        report = try await r.processPendingChanges(userId: h.userId)
        #expect(report.items.map(\.outcome) == [.deadLetter])
        #expect(try h.pending(view.id!)?.isDeadLetter == true)
        h.clock.advance(by: 100_000)
        #expect(try await r.processPendingChanges(userId: h.userId).items.map(\.outcome) == [.skipped])
        try await r.retryDeadLetters(userId: h.userId)
        h.server.state.withLock { $0.failures = [] }
        #expect(try await r.processPendingChanges(userId: h.userId).items.map(\.outcome) == [.pushed])
        #expect(try h.store.pendingCount(userId: h.userId) == 0)
    }
}
