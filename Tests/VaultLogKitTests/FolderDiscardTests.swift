import BitwardenAPI
import Foundation
import Testing
@_spi(Tools) import OfflineSync
import VaultLogKit
import VaultLogTestSupport
import VaultModel

/// `OfflineVault.discardFolderChange(id:)` over loopback HTTP: the way out of a folder change
/// the server keeps refusing (every sync tries it again, and a logout waits for it).
@Suite struct FolderDiscardTests {
    typealias H = VaultHarness

    /// A logged-in vault that, offline, made the folder "Trips\(suffix)" and saved a new item
    /// into it; the harness is still offline.
    struct ItemInNewFolder {
        let h: H
        let vault: OfflineVault
        let userId: String
        let folderId: String
    }

    static func itemInAFolderMadeOffline(_ suffix: String = "") async throws -> ItemInNewFolder {
        let h = try await H.make()
        let vault = try h.openVault()
        try await vault.logIn(email: h.email, masterPassword: h.password)
        let userId = try #require(vault.userId)
        h.goOffline()
        let folderId = try await vault.createFolder(name: "Trips\(suffix)")
        var item = H.login("Hotel\(suffix)", password: "pw-1\(suffix)")
        item.folderId = folderId
        _ = try await vault.save(item)
        return ItemInNewFolder(h: h, vault: vault, userId: userId, folderId: folderId)
    }

    @Test func aCreateTheServerKeepsRefusing_discarded_itsItemsInNoFolder_nothingSent_logoutAllowed() async throws {
        let made = try await Self.itemInAFolderMadeOffline()
        let (h, vault, userId, tempId) = (made.h, made.vault, made.userId, made.folderId)

        // The server refuses the create on every sync: reported, still waiting, logout refused.
        h.goOnline()
        h.failNext(100, "POST", "/api/folders", status: 400)
        for _ in 1...2 {
            let refused = try await vault.sync(force: true)
            #expect(refused.resolution?.folders.map(\.outcome) == [.failed])
        }
        #expect(vault.status().pendingFolderCount == 1)
        await #expect(throws: VaultError.self) { try await vault.logOut() }

        #expect(try await vault.discardFolderChange(id: tempId) == .discarded(.create))
        #expect(vault.status().pendingFolderCount == 0)
        #expect(try vault.folders().isEmpty)
        #expect(try vault.items().map(\.view.folderId) == [nil])
        #expect(try await vault.discardFolderChange(id: tempId) == .nothingPending)

        // Nothing about the folder is sent again; the item is on the server in no folder.
        let after = try await vault.sync(force: true)
        #expect(after.resolution?.folders.isEmpty ?? true)
        #expect(after.isCurrent)
        #expect(h.emulator.folders(userId: userId).isEmpty)
        #expect(h.emulator.ciphers(userId: userId).map(\.folderId) == [nil])
        // The operations stay in the log, the decision after them.
        let types = try vault.store.log.read { reader in
            try reader.sequences(userId: userId, cipherId: tempId).map { sequence -> VaultEventType? in
                var type: UInt16 = 0
                try reader.forEachHeader(from: sequence, to: sequence) { type = $0.eventType; return false }
                return VaultEventType(rawValue: type)
            }
        }
        #expect(types.first == .folderCreated)
        #expect(Array(types.suffix(2)) == [.folderChangeDiscarded, .folderResolved])
        try await vault.logOut()
    }

    @Test func aCreateDiscardedBeforeItWasSent_itsItemsInNoFolderAtOnce_thenSentThatWay() async throws {
        let made = try await Self.itemInAFolderMadeOffline()
        let (h, vault, userId, tempId) = (made.h, made.vault, made.userId, made.folderId)
        #expect(try await vault.discardFolderChange(id: tempId) == .discarded(.create))
        #expect(try vault.folders().isEmpty)
        #expect(try vault.items().map(\.view.folderId) == [nil])
        h.goOnline()
        #expect(try await vault.sync(force: true).isCurrent)
        #expect(h.emulator.folders(userId: userId).isEmpty)
        #expect(h.emulator.ciphers(userId: userId).map(\.folderId) == [nil])
        #expect(try vault.items().map(\.view.folderId) == [nil])
    }

    @Test func aRenameAndADeleteDiscarded_theFolderStaysAsTheServerHasIt_withItsItems() async throws {
        let h = try await H.make()
        let vault = try h.openVault()
        try await vault.logIn(email: h.email, masterPassword: h.password)
        let userId = try #require(vault.userId)
        let home = try await vault.createFolder(name: "Home")
        let bills = try await vault.createFolder(name: "Bills")
        var item = H.login("Power company", password: "pw-1")
        item.folderId = bills
        let saved = try #require(try await vault.save(item).cipher?.id)
        #expect(try await vault.sync(force: true).isCurrent)

        h.goOffline()
        try await vault.renameFolder(id: home, name: "House")
        try await vault.deleteFolder(id: bills)
        #expect(try FolderVaultTests.names(vault) == ["House"])
        #expect(try vault.items().map(\.view.folderId) == [nil])

        // Offline as well: nothing is sent, the server's name is listed again at once.
        #expect(try await vault.discardFolderChange(id: home) == .discarded(.rename))
        #expect(try vault.folders() == [VaultFolder(id: home, name: "Home", isPending: false)])
        #expect(try await vault.discardFolderChange(id: bills) == .discarded(.delete))
        #expect(vault.status().pendingFolderCount == 0)

        // The next sync lists the folder the delete left on the server, with its item back in it.
        h.goOnline()
        #expect(try await vault.sync(force: true).isCurrent)
        #expect(try FolderVaultTests.names(vault) == ["Bills", "Home"])
        #expect(h.emulator.folders(userId: userId).count == 2)
        #expect(try vault.items().first { $0.view.id == saved }?.view.folderId == bills)
        #expect(h.emulator.ciphers(userId: userId).map(\.folderId) == [bills])

        // An edit of the item in that folder is sent in it (the folder is no longer recorded as deleted).
        h.goOffline()
        var edited = try #require(try vault.items().first { $0.view.id == saved }?.view)
        edited.notes = "account 42"
        _ = try await vault.save(edited)
        h.goOnline()
        #expect(try await vault.sync(force: true).isCurrent)
        #expect(h.emulator.ciphers(userId: userId).map(\.folderId) == [bills])
    }

    /// Beside other callers: a discard run at once with two syncs (a timer and a
    /// pull-to-refresh) waits for their resolution or goes first; either way the folder is never
    /// created, the item ends in no folder once, and nothing is left waiting.
    @Test func aDiscardBesideTwoSyncs_endsTheSameWhicheverGoesFirst() async throws {
        for round in 1...4 {
            let made = try await Self.itemInAFolderMadeOffline(" \(round)")
            let (h, vault, userId, tempId) = (made.h, made.vault, made.userId, made.folderId)
            h.goOnline()
            h.failNext(100, "POST", "/api/folders", status: 400)
            let discarded = try await withThrowingTaskGroup(of: FolderDiscardResult?.self) { group in
                group.addTask { _ = try await vault.sync(force: true); return nil }
                group.addTask { try await vault.discardFolderChange(id: tempId) }
                group.addTask { _ = try await vault.sync(force: true); return nil }
                return try await group.reduce(into: [FolderDiscardResult]()) { if let result = $1 { $0.append(result) } }
            }
            #expect(discarded == [.discarded(.create)])
            #expect(try await vault.sync(force: true).isCurrent)
            #expect(vault.status().pendingFolderCount == 0)
            #expect(vault.status().pendingCount == 0)
            #expect(try vault.folders().isEmpty)
            #expect(h.emulator.folders(userId: userId).isEmpty)
            #expect(h.emulator.ciphers(userId: userId).map(\.folderId) == [nil])
            #expect(try vault.items().map(\.view.folderId) == [nil])
            vault.close()
        }
    }
}
