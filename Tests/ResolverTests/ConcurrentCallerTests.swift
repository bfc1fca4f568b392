import BitwardenAPI
import Foundation
import Synchronization
import Testing
import VaultCrypto
import VaultModel
@_spi(Tools) @testable import OfflineSync
import VaultLogTesting
import VaultLogTestSupport

/// Many callers at once: syncs from a timer and from pull-to-refresh together, saves while a
/// resolution runs, another device's change that keeps the name, and a save from a screen that
/// read the item before another save.
@Suite struct ConcurrentCallerTests {
    typealias H = ResolverHarness

    static func offlineCreate(_ h: H, name: String) async throws -> String {
        h.goOffline()
        defer { h.goOnline() }
        guard case .savedOffline(let saved?, _) = try await h.repository().addCipher(H.login(name, password: "pw-\(name)")) else {
            throw HarnessError("expected an offline create of \(name)")
        }
        return saved.id!
    }

    // MARK: One resolution at a time

    /// Two `fetchSync` calls at once on one resolver, and a third caller with a resolver of its
    /// own (what a repository made without one uses): every offline create reaches the server
    /// exactly once, round after round.
    @Test func concurrentSyncs_ofOfflineCreates_createEachItemOnce() async throws {
        let h = try await H.make()
        defer { Task { await h.stop() } }
        let resolver = h.resolver()
        let first = SyncService(store: h.store, server: h.client, resolver: resolver)
        let second = SyncService(store: h.store, server: h.client, resolver: resolver)
        let other = SyncService(store: h.store, server: h.client, resolver: h.resolver())
        for round in 1...100 {
            for n in 1...3 { _ = try await Self.offlineCreate(h, name: "Item \(round).\(n)") }
            async let a = first.fetchSync(userId: h.userId, forceSync: true)
            async let b = second.fetchSync(userId: h.userId, forceSync: true)
            async let c = other.resolver.processPendingChanges(userId: h.userId)
            _ = try await (a, b, c)
            #expect(try h.serverItems(named: "Item \(round).").count == 3, "round \(round)")
            #expect(try h.pendingCount() == 0, "round \(round)")
        }
        #expect(try h.serverItems().count == 300)
    }

    /// The lock file tells a run whether the previous one died holding it (its requests may
    /// still be in flight: the run waits `settleAfterInterruptedRun` first).
    @Test func resolutionLock_tellsWhetherThePreviousHolderDied() async throws {
        let dir = TemporaryDirectory("resolution-lock", create: true)
        let path = dir.path + "/resolve-test.lock"
        let first = try #require(try await FileLock.acquire(path: path, wait: false))
        #expect(!first.previousHolderDied)
        #expect(try await FileLock.acquire(path: path, wait: false) == nil, "held: a second holder is refused")
        first.release()
        let second = try #require(try await FileLock.acquire(path: path, wait: false))
        #expect(!second.previousHolderDied, "released cleanly")
        close(second.descriptor)   // the process died: the kernel drops the lock, the file still names it
        let third = try #require(try await FileLock.acquire(path: path, wait: false))
        #expect(third.previousHolderDied)
        third.release()
    }

    // MARK: Saves during a run

    enum SaveDuringRun: String, CaseIterable, Sendable {
        /// The app saves through its repository (its resolution finds the run in progress).
        case edit
        /// Another process (an extension whose requests fail) saves the item offline: only the
        /// log tells the run about it.
        case editElsewhere
        case permanentDelete
    }

    /// A save of an item while its resolution is in flight, right after each server effect of
    /// the run (the run's first effect, its second, ...): afterwards the server holds what the
    /// user saved last (the edit as the active item's password; the deleted item gone), nothing is
    /// pending, and no item is duplicated.
    @Test(arguments: SaveDuringRun.allCases)
    func saveAtEveryServerEffect_isOnTheServerAfterwards(save: SaveDuringRun) async throws {
        for effect in 1...2 {
            let h = try await H.make(seed: UInt64(effect))
            defer { Task { await h.stop() } }
            let bank = try await h.seedSynced("Bank")
            try await h.editOffline(bank, password: "offline-1")
            let createdId = try await Self.offlineCreate(h, name: "Fresh")
            let count = Mutex(0)
            let server = EffectHookServer(h.client) { _ in
                let n = count.withLock { $0 += 1; return $0 }
                guard n == effect else { return }
                let repository = h.repository()
                switch save {
                case .edit:
                    var view = try #require(try h.local(bank.id!))
                    view.login?.password = "during-\(n)"
                    _ = try await repository.updateCipher(view)
                    var fresh = try #require(try h.local(try repository.currentId(createdId)))
                    fresh.notes = "during-\(n)"
                    _ = try await repository.updateCipher(fresh)
                case .editElsewhere:
                    var view = try #require(try h.local(bank.id!))
                    view.login?.password = "during-\(n)"
                    let extension_ = VaultRepository(store: h.store, userId: h.userId, server: UnreachableServer())
                    guard case .savedOffline = try await extension_.updateCipher(view) else { throw HarnessError("expected an offline save") }
                case .permanentDelete:
                    _ = try await repository.deleteCipher(id: bank.id!)
                }
            }
            let report = try await h.resolver(server: server).processPendingChanges(userId: h.userId)
            #expect(count.withLock { $0 } >= effect, "the run made at least \(effect) effects")
            #expect(try h.pendingCount() == 0, "effect \(effect): \(report.items)")
            let banks = try h.serverItems(named: "Bank")
            switch save {
            case .edit, .editElsewhere:
                #expect(banks.count == 1, "effect \(effect)")
                #expect(banks.first?.login?.password == "during-\(effect)", "effect \(effect)")
                #expect(banks.first?.passwordHistory?.contains { $0.password == "offline-1" } == true, "effect \(effect)")
                #expect(try h.local(bank.id!)?.login?.password == "during-\(effect)", "effect \(effect): the local copy is the last save")
                let fresh = try h.serverItems(named: "Fresh")
                #expect(fresh.count == 1, "effect \(effect)")
                #expect(fresh.first?.notes == (save == .edit ? "during-\(effect)" : "notes of Fresh"), "effect \(effect)")
            case .permanentDelete:
                #expect(banks.isEmpty, "effect \(effect): the deleted item came back: \(banks.map { $0.deletedDate as Any })")
                #expect(try h.local(bank.id!) == nil, "effect \(effect): the deleted item came back locally")
                #expect(try h.serverItems(named: "Fresh").count == 1, "effect \(effect)")
            }
        }
    }

    // MARK: Own writes by identity

    enum NamePreservingChange: String, CaseIterable, Sendable { case favorite, folder, restoreFromTrash }

    /// Another device changes the item without changing its encrypted name while this device
    /// has a permanent delete pending: the delete is dropped and the server's copy restored
    /// locally (the decision matrix's conflict row), never applied as if the change were ours.
    @Test(arguments: NamePreservingChange.allCases)
    func namePreservingChangeByAnotherDevice_dropsAPendingPermanentDelete(change: NamePreservingChange) async throws {
        let h = try await H.make()
        defer { Task { await h.stop() } }
        let item = try await h.seedSynced("Bank")
        let id = item.id!
        if change == .restoreFromTrash { _ = try await h.repository().softDeleteCipher(item) }
        h.clock.advance(by: 60)
        h.goOffline()
        guard case .savedOffline = try await h.repository().deleteCipher(id: id) else { throw HarnessError("expected an offline delete") }
        h.goOnline()
        h.clock.advance(by: 60)
        switch change {
        case .favorite: _ = try h.emulator.editAsAnotherDevice(cipherId: id) { $0.favorite = true }
        case .folder:
            let folder = try await h.client.createFolder(name: EncString.encrypt("Work", key: h.userKey))
            _ = try h.emulator.editAsAnotherDevice(cipherId: id) { $0.folderId = folder.id }
        case .restoreFromTrash:
            let desktop = BitwardenClient(configuration: .selfHosted(try #require(h.emulator.baseURL)))
            _ = try await desktop.login(email: h.email, password: h.password)
            _ = try await desktop.restoreCipher(id: id)
        }
        let report = try await h.resolver().processPendingChanges(userId: h.userId)
        #expect(report.items.map(\.outcome) == [.deleteDropped])
        let onServer = try h.serverItems(named: "Bank")
        #expect(onServer.count == 1)
        #expect(try h.local(id) != nil, "the server's copy is restored locally")
    }

    // MARK: Stale views

    /// Screen A reads the item; screen B saves new notes and a new username; A saves its view
    /// with a new password: the server item has B's notes and username and A's password, with
    /// the old password in its history, and no backup (no part was changed by both).
    @Test(arguments: [false, true])
    func staleViewSave_mergesPartsOnlyTheOtherSaveChanged(offline: Bool) async throws {
        let h = try await H.make()
        defer { Task { await h.stop() } }
        let item = try await h.seedSynced("Bank", password: "pw-0")
        let screenA = try #require(try h.local(item.id!))
        var screenB = try #require(try h.local(item.id!))
        if offline { h.goOffline() }
        h.clock.advance(by: 10)
        screenB.notes = "notes from B"
        screenB.login?.username = "bob"
        _ = try await h.repository().updateCipher(screenB)
        h.clock.advance(by: 10)
        var edited = screenA
        edited.login?.password = "pw-A"
        _ = try await h.repository().updateCipher(edited)
        h.goOnline()
        _ = try await h.syncService().fetchSync(userId: h.userId, forceSync: true)
        let items = try h.serverItems(named: "Bank")
        #expect(items.count == 1, "no backup: \(items.map(\.name))")
        #expect(items.first?.notes == "notes from B")
        #expect(items.first?.login?.username == "bob")
        #expect(items.first?.login?.password == "pw-A")
        #expect(items.first?.passwordHistory?.contains { $0.password == "pw-0" } == true)
        #expect(try h.pendingCount() == 0)
    }

    /// Both screens change the notes (and both the password): the later save's notes and
    /// password win, the earlier save's password is in the history, and the earlier save's
    /// version is kept as a backup under the usual name.
    @Test func staleViewSave_bothChangedTheNotes_keepsTheOtherAsABackup() async throws {
        let h = try await H.make()
        defer { Task { await h.stop() } }
        let item = try await h.seedSynced("Bank", password: "pw-0")
        var screenA = try #require(try h.local(item.id!))
        var screenB = try #require(try h.local(item.id!))
        h.goOffline()
        h.clock.advance(by: 10)
        screenB.notes = "notes from B"
        screenB.login?.password = "pw-B"
        _ = try await h.repository().updateCipher(screenB)
        h.clock.advance(by: 10)
        screenA.notes = "notes from A"
        screenA.login?.password = "pw-A"
        _ = try await h.repository().updateCipher(screenA)
        h.goOnline()
        _ = try await h.syncService().fetchSync(userId: h.userId, forceSync: true)
        let items = try h.serverItems(named: "Bank")
        let active = try #require(items.first { $0.id == item.id })
        #expect(active.notes == "notes from A")
        #expect(active.login?.password == "pw-A")
        #expect(active.passwordHistory?.contains { $0.password == "pw-B" } == true)
        let backups = items.filter { $0.id != item.id }
        #expect(backups.count == 1)
        #expect(backups.first?.notes == "notes from B")
        #expect(backups.first?.name?.hasPrefix("Bank - ") == true)
    }

    // MARK: No tokens

    /// A cold start offline: the vault unlocks from the stored account, but the client has no
    /// session tokens. Edits and creates are saved offline (not refused with "log in"), and
    /// resolve once the client logs in.
    @Test func coldStartWithoutTokens_savesEditsOffline() async throws {
        let h = try await H.make()
        defer { Task { await h.stop() } }
        let item = try await h.seedSynced("Bank")
        let cold = BitwardenClient(configuration: .selfHosted(try #require(h.emulator.baseURL)))
        let repository = VaultRepository(store: h.store, userId: h.userId, server: cold)
        var edited = try #require(try h.local(item.id!))
        edited.login?.password = "typed offline"
        guard case .savedOffline = try await repository.updateCipher(edited) else { throw HarnessError("the edit was not saved offline") }
        guard case .savedOffline = try await repository.addCipher(H.login("New", password: "new")) else {
            throw HarnessError("the create was not saved offline")
        }
        #expect(try h.pendingCount() == 2)
        #expect(try h.allEventTypes().contains(.createPlanned) == false, "a request that never left is not an uncertain create")
        _ = try await cold.login(email: h.email, password: h.password)
        _ = try await SyncService(store: h.store, server: cold, resolver: repository.resolver).fetchSync(userId: h.userId)
        #expect(try h.serverItems(named: "Bank").first?.login?.password == "typed offline")
        #expect(try h.serverItems(named: "New").count == 1)
    }
}

/// A server port that awaits `afterEffect` after each create, update, trash move and delete that
/// succeeded, before the answer reaches the caller: a save made there happens while the run is
/// in flight, at a known point. `beforeUpdate` runs before an update is sent (a request that
/// reaches the server late).
struct EffectHookServer: CipherServer {
    let base: any CipherServer
    let afterEffect: @Sendable (ServerEffect) async throws -> Void
    let beforeUpdate: @Sendable (Cipher) async throws -> Void

    init(_ base: any CipherServer, beforeUpdate: @escaping @Sendable (Cipher) async throws -> Void = { _ in },
         afterEffect: @escaping @Sendable (ServerEffect) async throws -> Void) {
        self.base = base
        self.afterEffect = afterEffect
        self.beforeUpdate = beforeUpdate
    }

    func getCipher(id: String) async throws -> Cipher { try await base.getCipher(id: id) }
    func createCipher(_ cipher: Cipher) async throws -> Cipher {
        let created = try await base.createCipher(cipher)
        try await afterEffect(.created(serverId: created.id ?? "?"))
        return created
    }
    func updateCipher(_ cipher: Cipher, lastKnownRevisionDate: BitwardenDate?) async throws -> Cipher {
        try await beforeUpdate(cipher)
        let updated = try await base.updateCipher(cipher, lastKnownRevisionDate: lastKnownRevisionDate)
        try await afterEffect(.updated(cipherId: cipher.id ?? "?"))
        return updated
    }
    func softDeleteCipher(id: String) async throws {
        try await base.softDeleteCipher(id: id)
        try await afterEffect(.softDeleted(cipherId: id))
    }
    func deleteCipher(id: String) async throws {
        try await base.deleteCipher(id: id)
        try await afterEffect(.deleted(cipherId: id))
    }
    func restoreCipher(id: String) async throws -> Cipher {
        let restored = try await base.restoreCipher(id: id)
        try await afterEffect(.restored(cipherId: id))
        return restored
    }
    func sync() async throws -> SyncSnapshot { try await base.sync() }
    func accountRevisionDate() async throws -> Date? { try await base.accountRevisionDate() }
    func downloadAttachment(cipherId: String, attachmentId: String) async throws -> [UInt8] {
        try await base.downloadAttachment(cipherId: cipherId, attachmentId: attachmentId)
    }
    func createAttachment(cipherId: String, fileName: EncString, key: EncString, encryptedData: [UInt8]) async throws -> Cipher {
        let updated = try await base.createAttachment(cipherId: cipherId, fileName: fileName, key: key, encryptedData: encryptedData)
        try await afterEffect(.attachmentAdded(cipherId: cipherId, attachmentId: updated.attachments?.last?.id ?? "?"))
        return updated
    }
    func deleteAttachment(cipherId: String, attachmentId: String) async throws {
        try await base.deleteAttachment(cipherId: cipherId, attachmentId: attachmentId)
        try await afterEffect(.attachmentDeleted(cipherId: cipherId, attachmentId: attachmentId))
    }
}
