import Foundation
import Testing
import VaultCrypto
import VaultModel
@_spi(Tools) @testable import OfflineSync
import VaultLogTesting

/// The sync behaviour table (the original iOS design's SyncServiceTests) plus the count/replace race, against the
/// emulator over loopback HTTP.
@Suite struct SyncServiceTests {
    typealias H = ResolverHarness

    /// Another device's item: on the server, not yet in the local store.
    func itemFromAnotherDevice(_ h: H) throws -> String {
        let encrypted = try H.login("From elsewhere", password: "x").encrypt(userKey: h.userKey)
        return h.emulator.insertCipher(userId: h.userId, encrypted).id!
    }

    @Test func fetchSync_preSyncResolution_triggersPendingChanges() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await h.editOffline(view, password: "mine")
        let other = try itemFromAnotherDevice(h)
        let result = try await h.syncService().fetchSync(userId: h.userId)
        #expect(result.isApplied)
        #expect(try h.pendingCount() == 0)
        #expect(try h.serverItems(named: "Bank").map { $0.login?.password } == ["mine"])
        #expect(try h.local(other) != nil)
        #expect(try h.allEventTypes().last == .syncApplied)
    }

    @Test func fetchSync_preSyncResolution_skipsWhenVaultLocked() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await h.editOffline(view, password: "mine")
        let other = try itemFromAnotherDevice(h)
        h.store.lock(userId: h.userId)
        let result = try await h.syncService().fetchSync(userId: h.userId)
        #expect(result.isApplied)
        // Not resolved, and the pending local copy was not replaced by the server's.
        #expect(try h.store.pendingCount(userId: h.userId) == 1)
        #expect(try h.store.localCipher(userId: h.userId, id: other) != nil)
        let localCopy = try #require(try h.store.localCipher(userId: h.userId, id: view.id!))
        h.store.unlock(userId: h.userId, userKey: h.userKey)
        #expect(try localCopy.decrypt(userKey: h.userKey).login?.password == "mine")
        #expect(try h.serverItems(named: "Bank").map { $0.login?.password } == ["pw-0"])
    }

    @Test func fetchSync_preSyncResolution_noPendingChanges() async throws {
        let h = try await H.make()
        _ = try await h.seedSynced("Bank")
        let other = try itemFromAnotherDevice(h)
        let result = try await h.syncService().fetchSync(userId: h.userId)
        guard case .applied(_, _, let resolution) = result else { Issue.record("expected applied, got \(result)"); return }
        #expect(resolution == nil)   // the resolver was not called
        #expect(try h.local(other) != nil)
        #expect(try h.allEventTypes() == [.syncApplied])
    }

    /// A pending item that cannot be resolved now keeps its local copy; every other item still
    /// gets the server's changes (one stuck item never keeps the other devices' changes away).
    @Test func fetchSync_preSyncResolution_pendingItemKeepsItsCopy_othersArrive() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await h.editOffline(view, password: "mine")
        let other = try itemFromAnotherDevice(h)
        h.failNext(1, "GET", "/api/ciphers/\(view.id!)")
        let result = try await h.syncService().fetchSync(userId: h.userId)
        guard case .applied(_, let pending, _) = result else { Issue.record("expected applied, got \(result)"); return }
        #expect(pending.map(\.cipherId) == [view.id!])
        guard case .retrying = pending.first?.state else { Issue.record("expected a retry time: \(pending)"); return }
        // The other device's item arrived; the local edit is intact and still pending.
        #expect(try h.local(other) != nil)
        #expect(try h.local(view.id!)?.login?.password == "mine")
        #expect(try h.pending(view.id!) != nil)
        let applied = try #require(try h.store.events(userId: h.userId).last)
        #expect(applied.type == .syncApplied)
        #expect(applied.outcome?.pendingCount == 1)
    }

    @Test func fetchSync_preSyncResolution_resolverThrows_syncFails() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await h.editOffline(view, password: "mine")
        let other = try itemFromAnotherDevice(h)
        let sync = h.syncService(server: EffectObservingServer(h.client) { _ in throw SimulatedCrash() })
        await #expect(throws: SimulatedCrash.self) { try await sync.fetchSync(userId: h.userId) }
        #expect(try h.local(other) == nil)
    }

    @Test func fetchSync_preSyncResolution_stillResolvesWhenOfflineSyncFlagDisabled() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await h.editOffline(view, password: "mine")
        let result = try await h.syncService(flags: OfflineSyncFlags(offlineChanges: false, resolution: true)).fetchSync(userId: h.userId)
        #expect(result.isApplied)
        #expect(try h.pendingCount() == 0)
        #expect(try h.serverItems(named: "Bank").map { $0.login?.password } == ["mine"])
    }

    @Test func fetchSync_preSyncResolution_skipsWhenResolutionFlagDisabled() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await h.editOffline(view, password: "mine")
        let result = try await h.syncService(flags: OfflineSyncFlags(offlineChanges: true, resolution: false)).fetchSync(userId: h.userId)
        #expect(result.isApplied)
        #expect(try h.pendingCount() == 1)
        #expect(try h.local(view.id!)?.login?.password == "mine")
        #expect(try h.serverItems(named: "Bank").map { $0.login?.password } == ["pw-0"])
    }

    /// SS-2: an edit saved while `/api/sync` is in flight is never overwritten by the replace.
    @Test func fetchSync_editDuringSync_isNeverOverwritten() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        let server = InterceptingServer(h.client, on: "beforeSync") {
            _ = try await h.editOffline(view, password: "typed during sync")
        }
        let result = try await h.syncService(server: server).fetchSync(userId: h.userId)
        // The edit made the replace stop; the retry loop counts again and applies around it.
        #expect(result.stillPending.map(\.cipherId) == [view.id!])
        #expect(try h.local(view.id!)?.login?.password == "typed during sync")
        #expect(try h.pending(view.id!) != nil)
    }
}

/// `forceSync`, as a Bitwarden client's `needsSync`: a non-forced sync fetches only when the account
/// changed since the last applied sync; a forced one always fetches. Resolution runs first
/// either way.
@Suite struct ForceSyncTests {
    typealias H = ResolverHarness

    @Test func notForced_skipsTheFetchWhenTheAccountIsUnchanged_forcedAlwaysFetches() async throws {
        let h = try await H.make()
        defer { Task { await h.stop() } }
        let view = try await h.seedSynced("Bank")
        #expect(try await h.syncService().fetchSync(userId: h.userId).isApplied, "no sync yet: fetched")
        h.clock.advance(by: 60)
        let quiet = try await h.syncService().fetchSync(userId: h.userId)
        guard case .upToDate(let resolution) = quiet else { Issue.record("expected up to date, got \(quiet)"); return }
        #expect(resolution == nil)
        #expect(quiet.isCurrent && !quiet.isApplied)
        #expect(try await h.syncService().fetchSync(userId: h.userId, forceSync: true).isApplied)

        _ = try h.anotherDeviceEdits(view.id!) { $0.notes = "changed elsewhere" }
        h.clock.advance(by: 60)
        #expect(try await h.syncService().fetchSync(userId: h.userId).isApplied, "the account changed: fetched")
        #expect(try h.local(view.id!)?.notes == "changed elsewhere")
    }

    @Test func notForced_stillResolvesPendingChangesFirst() async throws {
        let h = try await H.make()
        defer { Task { await h.stop() } }
        let view = try await h.seedSynced("Bank")
        _ = try await h.syncService().fetchSync(userId: h.userId)
        try await h.editOffline(view, password: "mine")
        let result = try await h.syncService().fetchSync(userId: h.userId)
        #expect(result.resolution?.items.map(\.outcome) == [.pushed])
        #expect(result.isCurrent)
        #expect(try h.pendingCount() == 0)
    }
}
