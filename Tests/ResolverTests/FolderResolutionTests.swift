import BitwardenAPI
import BitwardenEmulator
import Foundation
import Testing
import VaultCrypto
import VaultModel
@_spi(Tools) @testable import OfflineSync
import VaultLogTesting
import VaultLogTestSupport

/// Folders edited offline, replayed against the emulator over loopback HTTP: a folder created
/// offline is created before the items in it and they get its server id; a lost answer never
/// makes a second folder; renames and deletes are applied (or found done by another device);
/// an item whose folder another device deleted goes to no folder, with an outcome that says so.
@Suite struct FolderResolutionTests {
    typealias H = ResolverHarness

    static func serverFolderNames(_ h: H) throws -> [String] {
        try h.emulator.folders(userId: h.userId).map { try EncString($0.name).decryptString(key: h.userKey) }.sorted()
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func folderCreatedOffline_itemInIt_isPushedWithTheServersFolderId(flavor: EmulatorFlavor) async throws {
        let h = try await H.make(flavor: flavor)
        defer { Task { await h.stop() } }
        h.goOffline()
        let tempId = try await h.repository().createFolder(name: "Work")
        var view = H.login("Bank", password: "pw-1")
        view.folderId = tempId
        let saved = try await h.repository().addCipher(view)
        #expect(saved.isOffline)
        #expect(try h.store.projection(userId: h.userId).folders?[tempId]?.change == .create)
        h.goOnline()
        _ = try await h.resolver().processPendingChanges(userId: h.userId)
        let folders = h.emulator.folders(userId: h.userId)
        #expect(try Self.serverFolderNames(h) == ["Work"])
        let item = try #require(try h.serverItems(named: "Bank").first)
        #expect(item.folderId == folders.first?.id)
        #expect(try h.pendingCount() == 0)
        #expect(try h.store.projection(userId: h.userId).folders == nil)
        #expect(try h.store.projection(userId: h.userId).folderIdMap?[tempId] == folders.first?.id)
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func itemMovedIntoFolderAnotherDeviceDeleted_goesToNoFolder_withAnOutcome(flavor: EmulatorFlavor) async throws {
        let h = try await H.make(flavor: flavor)
        defer { Task { await h.stop() } }
        let folder = try await h.client.createFolder(encryptedName: EncString.encrypt("Old", key: h.userKey))
        let view = try await h.seedSynced("Bank")
        var moved = view
        moved.folderId = folder.id
        h.goOffline()
        h.clock.advance(by: 60)
        #expect(try await h.repository().updateCipher(moved).isOffline)
        h.goOnline()
        try await h.client.deleteFolder(id: folder.id)   // another device
        _ = try await h.resolver().processPendingChanges(userId: h.userId)
        let item = try #require(try h.serverItems(named: "Bank").first)
        #expect(item.folderId == nil)
        #expect(try h.pendingCount() == 0)
        let records = try h.store.resolutionRecords(userId: h.userId)
        #expect(records.contains { $0.kind == .folderMissing && $0.cipherId == view.id })
    }

    @Test func folderCreate_answerLost_isFoundAgain_neverDuplicated() async throws {
        let h = try await H.make()
        defer { Task { await h.stop() } }
        h.goOffline()
        let tempId = try await h.repository().createFolder(name: "Work")
        var view = H.login("Bank", password: "pw-1")
        view.folderId = tempId
        _ = try await h.repository().addCipher(view)
        h.goOnline()
        h.emulator.faults.dropResponseAfterApplying(matching: RouteMatcher("POST /api/folders"))
        let first = try await h.resolver().processPendingChanges(userId: h.userId)
        // The item waited for its folder; the folder is on the server once.
        #expect(first.items.first?.outcome == .skipped)
        #expect(try h.store.projection(userId: h.userId).folders?[tempId]?.mayBeOnServer == true)
        try h.reopen()
        _ = try await h.resolver().processPendingChanges(userId: h.userId)
        let folders = h.emulator.folders(userId: h.userId)
        #expect(folders.count == 1)
        #expect(try h.serverItems(named: "Bank").first?.folderId == folders.first?.id)
        #expect(try h.pendingCount() == 0)
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func renameAndDeleteOffline_areApplied(flavor: EmulatorFlavor) async throws {
        let h = try await H.make(flavor: flavor)
        defer { Task { await h.stop() } }
        let keep = try await h.client.createFolder(encryptedName: EncString.encrypt("Work", key: h.userKey))
        let drop = try await h.client.createFolder(encryptedName: EncString.encrypt("Old", key: h.userKey))
        h.goOffline()
        try await h.repository().renameFolder(id: keep.id, name: "Office")
        try await h.repository().deleteFolder(id: drop.id)
        h.goOnline()
        // Another device renamed it meanwhile: this device's rename is the newer and wins.
        _ = try await h.client.renameFolder(id: keep.id, encryptedName: EncString.encrypt("Theirs", key: h.userKey))
        _ = try await h.resolver().processPendingChanges(userId: h.userId)
        #expect(try Self.serverFolderNames(h) == ["Office"])
        #expect(try h.store.projection(userId: h.userId).folders == nil)
    }

    @Test func renameOfFolderAnotherDeviceDeleted_isDone_withAnOutcome() async throws {
        let h = try await H.make(flavor: .vaultwarden)
        defer { Task { await h.stop() } }
        let folder = try await h.client.createFolder(encryptedName: EncString.encrypt("Work", key: h.userKey))
        h.goOffline()
        try await h.repository().renameFolder(id: folder.id, name: "Office")
        h.goOnline()
        try await h.client.deleteFolder(id: folder.id)
        _ = try await h.resolver().processPendingChanges(userId: h.userId)
        #expect(try Self.serverFolderNames(h).isEmpty)
        #expect(try h.store.projection(userId: h.userId).folders == nil)
        #expect(try h.events(folder.id).contains(.folderAlreadyDeleted))
    }

    /// A sync while a folder's delete is still pending (the server still has the folder, and its
    /// copies of the items name it) shows those items in no folder, as the server will have them.
    @Test func syncWhileFolderDeletePending_showsItsItemsInNoFolder() async throws {
        let h = try await H.make()
        defer { Task { await h.stop() } }
        let folder = try await h.client.createFolder(encryptedName: EncString.encrypt("Old", key: h.userKey))
        var view = H.login("Bank", password: "pw-1")
        view.folderId = folder.id
        let saved = try await h.repository().addCipher(view)
        let id = try #require(saved.cipher?.id)
        h.goOffline()
        try await h.repository().deleteFolder(id: folder.id)
        #expect(try h.store.localCipher(userId: h.userId, id: id)?.folderId == nil)
        h.goOnline()
        let snapshot = try await h.client.sync()
        #expect(snapshot.ciphers.first { $0.id == id }?.folderId == folder.id)
        try await h.store.replaceCiphers(userId: h.userId, ciphers: snapshot.ciphers)
        #expect(try h.store.localCipher(userId: h.userId, id: id)?.folderId == nil)
        #expect(try h.store.projection(userId: h.userId).folders?[folder.id]?.change == .delete)
    }

    @Test func pendingFolders_showInTheLocalFolderList() async throws {
        let h = try await H.make()
        defer { Task { await h.stop() } }
        let work = try await h.client.createFolder(encryptedName: EncString.encrypt("Work", key: h.userKey))
        let old = try await h.client.createFolder(encryptedName: EncString.encrypt("Old", key: h.userKey))
        let server = try await h.client.listFolders()
        h.goOffline()
        let tempId = try await h.repository().createFolder(name: "New")
        try await h.repository().renameFolder(id: work.id, name: "Office")
        try await h.repository().deleteFolder(id: old.id)
        let local = try h.repository().localFolders(serverFolders: server)
        #expect(local.map(\.id) == [work.id, tempId])
        #expect(try local.map { try $0.name.decryptString(key: h.userKey) } == ["Office", "New"])
    }
}
