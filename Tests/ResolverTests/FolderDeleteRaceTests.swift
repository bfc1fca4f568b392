import BitwardenEmulator
import Foundation
import Synchronization
import Testing
import VaultCrypto
import VaultModel
@_spi(Tools) @testable import OfflineSync
import VaultLogTestSupport

/// An online save and an online folder delete at once, from two screens of one store: the
/// save's request reaches the server after the folder's delete. Bitwarden keeps the gone
/// folder's id as sent; Vaultwarden refuses it. Either way the item ends in no folder, on the
/// server and locally, with what the save typed.
@Suite struct FolderDeleteRaceTests {
    typealias H = ResolverHarness

    /// A folder made online and an item "Bank" saved online into it: the folder's id and the
    /// item as its screen shows it.
    static func itemInFolder(_ h: H) async throws -> (folderId: String, view: CipherView) {
        let folder = try await h.client.createFolder(encryptedName: EncString.encrypt("Old", key: h.userKey))
        var view = H.login("Bank", password: "pw-1")
        view.folderId = folder.id
        return (folder.id, try #require(try await h.repository().addCipher(view).cipher).decrypt(userKey: h.userKey))
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func saveReachingTheServerAfterItsFoldersDelete_endsInNoFolder(flavor: EmulatorFlavor) async throws {
        let h = try await H.make(flavor: flavor)
        defer { Task { await h.stop() } }
        let (folderId, shown) = try await Self.itemInFolder(h)
        var edited = shown
        edited.notes = "typed beside the delete"

        // The first update waits, before it is sent, until the folder's delete is done.
        let (deleted, deletedDone) = AsyncStream<Void>.makeStream()
        let (arrived, arrival) = AsyncStream<Void>.makeStream()
        let first = Mutex(true)
        let late = EffectHookServer(h.client, beforeUpdate: { _ in
            guard first.withLock({ let was = $0; $0 = false; return was }) else { return }
            arrival.yield()
            for await _ in deleted { break }
        }, afterEffect: { _ in })
        let screen = VaultRepository(store: h.store, userId: h.userId, server: late)
        let save = Task { try await screen.updateCipher(edited) }
        for await _ in arrived { break }
        try await h.repository().deleteFolder(id: folderId)
        deletedDone.yield()
        let result = try await save.value

        #expect(!result.isOffline)
        let item = try #require(try h.serverItems(named: "Bank").first)
        #expect(item.folderId == nil, "the server keeps the item in a deleted folder")
        #expect(item.notes == "typed beside the delete")
        let local = try #require(try h.store.localCipher(userId: h.userId, id: item.id ?? "")).decrypt(userKey: h.userKey)
        #expect(local.folderId == nil)
        #expect(local.notes == "typed beside the delete")
        #expect(try h.pendingCount() == 0)
        #expect(h.emulator.folders(userId: h.userId).isEmpty)
    }

    /// "Bank" in a folder, edited offline ("typed offline"), then a run whose first push waits
    /// until `beforeFirstPush` (given the folder's id) is done, through `wrap` of the hooked
    /// server: the item must end in no folder on the server and locally, pushed, nothing pending.
    static func pushAfterFolderDelete(_ h: H, wrap: (EffectHookServer) -> any CipherServer = { $0 },
                                      beforeFirstPush: @escaping @Sendable (String) async throws -> Void) async throws {
        let (folderId, shown) = try await itemInFolder(h)
        var edited = shown
        h.goOffline()
        edited.notes = "typed offline"
        #expect(try await h.repository().updateCipher(edited).isOffline)
        h.goOnline()
        let first = Mutex(true)
        let late = EffectHookServer(h.client, beforeUpdate: { _ in
            guard first.withLock({ let was = $0; $0 = false; return was }) else { return }
            try await beforeFirstPush(folderId)
        }, afterEffect: { _ in })
        _ = try await h.resolver(server: wrap(late)).processPendingChanges(userId: h.userId)
        let item = try #require(try h.serverItems(named: "Bank").first)
        #expect(item.folderId == nil, "the server keeps the item in a folder that is gone")
        #expect(item.notes == "typed offline")
        #expect(try h.store.localCipher(userId: h.userId, id: item.id ?? "")?.folderId == nil)
        #expect(try h.pendingCount() == 0)
    }

    /// The resolver's push of a pending edit, sent after another screen deleted the item's folder
    /// online (the run listed the folders before): the item ends in no folder.
    @Test(arguments: EmulatorFlavor.allCases)
    func resolverPushSentAfterAnOnlineFolderDelete_endsInNoFolder(flavor: EmulatorFlavor) async throws {
        let h = try await H.make(flavor: flavor)
        defer { Task { await h.stop() } }
        let other = h.repository()
        try await Self.pushAfterFolderDelete(h) { folderId in try await other.deleteFolder(id: folderId) }
    }

    /// Another device deleted the folder and this one has not synced since: an online save from
    /// the local copy, which still names the folder, and a create into it end in no folder on
    /// the server and locally (Bitwarden stored the gone id, Vaultwarden refused the save), and
    /// the folder is no longer listed on the device.
    @Test(arguments: EmulatorFlavor.allCases)
    func saveIntoAFolderAnotherDeviceDeleted_endsInNoFolder(flavor: EmulatorFlavor) async throws {
        let h = try await H.make(flavor: flavor)
        defer { Task { await h.stop() } }
        let (folderId, shown) = try await Self.itemInFolder(h)
        _ = try await h.syncService().fetchSync(userId: h.userId)
        #expect(try h.store.localFolders(userId: h.userId).map(\.id) == [folderId])
        try await h.client.deleteFolder(id: folderId)   // another device, straight to the server
        var stale = shown
        stale.notes = "saved before hearing of the delete"
        let saved = try await h.repository().updateCipher(stale)
        var other = H.login("New", password: "pw-2")
        other.folderId = folderId
        let created = try await h.repository().addCipher(other)

        #expect(!saved.isOffline && !created.isOffline)
        for name in ["Bank", "New"] {
            let item = try #require(try h.serverItems(named: name).first)
            #expect(item.folderId == nil, "\(name): the server keeps the item in a folder it does not have")
            #expect(try h.store.localCipher(userId: h.userId, id: item.id ?? "")?.folderId == nil, "\(name): the local copy")
        }
        #expect(try h.serverItems(named: "Bank").first?.notes == "saved before hearing of the delete")
        #expect(try h.store.localFolders(userId: h.userId).isEmpty)
        #expect(try h.pendingCount() == 0)
    }

    /// Another device deletes the item's folder while a run goes on, after the run listed the
    /// folders and before the item's push: the item ends in no folder on the server and locally,
    /// nothing pending (Bitwarden stored the gone id: sent again after the pass; Vaultwarden
    /// refused the push: sent again in no folder at once).
    @Test(arguments: EmulatorFlavor.allCases)
    func resolverPushAfterAnotherDevicesFolderDelete_endsInNoFolder(flavor: EmulatorFlavor) async throws {
        let h = try await H.make(flavor: flavor)
        defer { Task { await h.stop() } }
        let anotherDevice = h.client
        try await Self.pushAfterFolderDelete(h, wrap: { FolderRoutes($0, folders: anotherDevice) }) { folderId in
            try await anotherDevice.deleteFolder(id: folderId)
        }
        #expect(try h.store.localFolders(userId: h.userId).isEmpty)
    }

    /// A screen opened before the folder was deleted saves with the folder's id: it is sent in no folder.
    @Test func saveFromAScreenOpenedBeforeTheDelete_isSentInNoFolder() async throws {
        let h = try await H.make()
        defer { Task { await h.stop() } }
        let (folderId, shown) = try await Self.itemInFolder(h)
        var stale = shown
        try await h.repository().deleteFolder(id: folderId)
        stale.notes = "saved from the old screen"
        _ = try await h.repository().updateCipher(stale)
        var other = H.login("New", password: "pw-2")
        other.folderId = folderId
        _ = try await h.repository().addCipher(other)
        #expect(try h.serverItems(named: "Bank").first?.folderId == nil)
        #expect(try h.serverItems(named: "Bank").first?.notes == "saved from the old screen")
        #expect(try h.serverItems(named: "New").first?.folderId == nil)
        #expect(try h.store.isFolderDeleted(userId: h.userId, folderId: folderId))
        try h.store.logout(userId: h.userId)
        #expect(try h.store.isFolderDeleted(userId: h.userId, folderId: folderId) == false, "a logout removes the user's records")
    }
}

/// `base` with the folder routes of `folders`: a server port the resolver lists folders through.
struct FolderRoutes: CipherServer, FolderServer {
    let base: EffectHookServer
    let folders: any FolderServer

    init(_ base: EffectHookServer, folders: any FolderServer) {
        self.base = base
        self.folders = folders
    }

    func getCipher(id: String) async throws -> Cipher { try await base.getCipher(id: id) }
    func createCipher(_ cipher: Cipher) async throws -> Cipher { try await base.createCipher(cipher) }
    func updateCipher(_ cipher: Cipher, lastKnownRevisionDate: BitwardenDate?) async throws -> Cipher {
        try await base.updateCipher(cipher, lastKnownRevisionDate: lastKnownRevisionDate)
    }
    func softDeleteCipher(id: String) async throws { try await base.softDeleteCipher(id: id) }
    func deleteCipher(id: String) async throws { try await base.deleteCipher(id: id) }
    func restoreCipher(id: String) async throws -> Cipher { try await base.restoreCipher(id: id) }
    func sync() async throws -> SyncSnapshot { try await base.sync() }
    func accountRevisionDate() async throws -> Date? { try await base.accountRevisionDate() }
    func downloadAttachment(cipherId: String, attachmentId: String) async throws -> [UInt8] {
        try await base.downloadAttachment(cipherId: cipherId, attachmentId: attachmentId)
    }
    func createAttachment(cipherId: String, fileName: EncString, key: EncString, encryptedData: [UInt8]) async throws -> Cipher {
        try await base.createAttachment(cipherId: cipherId, fileName: fileName, key: key, encryptedData: encryptedData)
    }
    func deleteAttachment(cipherId: String, attachmentId: String) async throws {
        try await base.deleteAttachment(cipherId: cipherId, attachmentId: attachmentId)
    }
    func listFolders() async throws -> [ServerFolder] { try await folders.listFolders() }
    func createFolder(encryptedName: EncString) async throws -> ServerFolder { try await folders.createFolder(encryptedName: encryptedName) }
    func renameFolder(id: String, encryptedName: EncString) async throws -> ServerFolder {
        try await folders.renameFolder(id: id, encryptedName: encryptedName)
    }
    func deleteFolder(id: String) async throws { try await folders.deleteFolder(id: id) }
}
