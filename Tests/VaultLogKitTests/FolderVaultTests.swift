import BitwardenAPI
import Foundation
import Testing
@_spi(Tools) import OfflineSync
import VaultLogKit
import VaultLogTestSupport
import VaultModel

/// `OfflineVault`'s folder calls over loopback HTTP: the folder list is there offline (kept on
/// the device by every sync and every folder call), folders made offline are listed at once and
/// reach the server once, and another device's folders show after a sync.
@Suite struct FolderVaultTests {
    typealias H = VaultHarness

    /// Another device: a vault of its own on the same account.
    static func anotherDevice(_ h: H) async throws -> (OfflineVault, TemporaryDirectory) {
        let dir = TemporaryDirectory("vaultkit-phone", create: true)
        var storeOptions = VaultLogStoreOptions()
        storeOptions.dependencies = .deterministic(seed: 77, clock: h.clock)
        let phone = try OfflineVault(directory: URL(fileURLWithPath: dir.path), server: .selfHosted(h.url),
                                     tokenStore: InMemoryTokenStore(), storeOptions: storeOptions)
        try await phone.logIn(email: h.email, masterPassword: h.password)
        return (phone, dir)
    }

    static func names(_ vault: OfflineVault) throws -> [String] { try vault.folders().map(\.name) }

    @Test func folderMadeOffline_listedAtOnceAndAfterARelaunch_thenOnTheServerOnce_underItsServerId() async throws {
        let h = try await H.make()
        var vault = try h.openVault()
        try await vault.logIn(email: h.email, masterPassword: h.password)
        let userId = try #require(vault.userId)
        h.goOffline()
        let tempId = try await vault.createFolder(name: "Work")
        #expect(try vault.folders() == [VaultFolder(id: tempId, name: "Work", isPending: true)])
        var item = H.login("Bank", password: "pw-1")
        item.folderId = tempId
        let saved = try await vault.save(item)
        #expect(saved.isOffline)
        h.clock.advance(by: 5)
        try await vault.renameFolder(id: tempId, name: "Work stuff")
        #expect(try vault.folders() == [VaultFolder(id: tempId, name: "Work stuff", isPending: true)])

        // A relaunch, still offline: the folder made here is still listed.
        vault.close()
        vault = try h.openVault()
        try await vault.unlock(email: h.email, masterPassword: h.password)
        #expect(try vault.folders() == [VaultFolder(id: tempId, name: "Work stuff", isPending: true)])

        // The resolver alone (a save's resolution, no sync yet) lists it under the server's id.
        h.goOnline()
        _ = try await vault.resolver.processPendingChanges(userId: userId)
        let onServer = h.emulator.folders(userId: userId)
        #expect(onServer.count == 1)
        let serverId = try #require(onServer.first?.id)
        #expect(serverId != tempId)
        #expect(try vault.currentFolderId(of: tempId) == serverId)
        #expect(try vault.folders() == [VaultFolder(id: serverId, name: "Work stuff", isPending: false)])
        #expect(try vault.items().map(\.view.folderId) == [serverId])

        // A sync keeps it as the server has it, and creates nothing twice.
        #expect(try await vault.sync(force: true).isCurrent)
        #expect(try vault.folders() == [VaultFolder(id: serverId, name: "Work stuff", isPending: false)])
        #expect(h.emulator.folders(userId: userId).count == 1)
        #expect(h.emulator.ciphers(userId: userId).map(\.folderId) == [serverId])
    }

    @Test func anotherDevicesFolders_listedOfflineAfterASync_onlineCallsKeepTheListCurrent() async throws {
        let h = try await H.make()
        let vault = try h.openVault()
        try await vault.logIn(email: h.email, masterPassword: h.password)
        let userId = try #require(vault.userId)
        let (phone, phoneDir) = try await Self.anotherDevice(h)
        defer { phone.close(); _ = phoneDir }
        let family = try await phone.createFolder(name: "Family")
        #expect(try Self.names(vault).isEmpty)
        #expect(try await vault.sync(force: true).isCurrent)
        #expect(try vault.folders() == [VaultFolder(id: family, name: "Family", isPending: false)])

        // Online calls: the list follows at once, with the server's ids.
        let bills = try await vault.createFolder(name: "Bills")
        #expect(h.emulator.folders(userId: userId).map(\.id).contains(bills))
        try await vault.renameFolder(id: family, name: "Home")
        #expect(try vault.folders() == [VaultFolder(id: bills, name: "Bills", isPending: false),
                                        VaultFolder(id: family, name: "Home", isPending: false)])

        // Offline: the list is still there; a delete leaves it at once and reaches the server later.
        h.goOffline()
        #expect(try Self.names(vault) == ["Bills", "Home"])
        try await vault.deleteFolder(id: bills)
        #expect(try Self.names(vault) == ["Home"])
        h.goOnline()
        #expect(try await vault.sync(force: true).isCurrent)
        #expect(try Self.names(vault) == ["Home"])
        #expect(h.emulator.folders(userId: userId).map(\.id) == [family])

        // Another device deletes the last one: gone after the next sync.
        h.clock.advance(by: 60)
        try await phone.deleteFolder(id: family)
        #expect(try await vault.sync(force: true).isCurrent)
        #expect(try vault.folders().isEmpty)

        // A logout removes the kept folders with the rest of the account.
        _ = try await phone.createFolder(name: "Later")
        #expect(try await vault.sync(force: true).isCurrent)
        #expect(try vault.store.localFolders(userId: userId).count == 1)
        try await vault.logOut()
        #expect(try vault.store.localFolders(userId: userId).isEmpty)
    }

    @Test func foldersCreatedBesideSyncs_eachListedOnceAndOnTheServerOnce() async throws {
        let h = try await H.make()
        let vault = try h.openVault()
        try await vault.logIn(email: h.email, masterPassword: h.password)
        let userId = try #require(vault.userId)
        let names = (1...6).map { "Folder \($0)" }
        // Half made offline, half online, beside two syncs (a timer and a pull-to-refresh).
        h.goOffline()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for name in names.prefix(3) { group.addTask { _ = try await vault.createFolder(name: name) } }
            try await group.waitForAll()
        }
        h.goOnline()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for name in names.suffix(3) { group.addTask { _ = try await vault.createFolder(name: name) } }
            group.addTask { _ = try await vault.sync(force: true) }
            group.addTask { _ = try await vault.sync(force: true) }
            try await group.waitForAll()
        }
        // No folder is listed twice, even before the last sync.
        let listed = try vault.folders()
        #expect(Set(listed.map(\.id)).count == listed.count)
        #expect(try await vault.sync(force: true).isCurrent)
        #expect(try Self.names(vault) == names)
        #expect(try vault.folders().allSatisfy { !$0.isPending })
        #expect(h.emulator.folders(userId: userId).count == names.count)
    }

    @Test func folderChangesWaiting_inTheStatus_inTheRunsReport_andALogoutIsRefusedUntilSent() async throws {
        let h = try await H.make()
        let vault = try h.openVault()
        try await vault.logIn(email: h.email, masterPassword: h.password)
        let userId = try #require(vault.userId)
        h.goOffline()
        let tempId = try await vault.createFolder(name: "Trips")
        #expect(vault.status().pendingFolderCount == 1)
        #expect(vault.status().pendingCount == 0)
        await #expect { try await vault.logOut() } throws: { error in
            (error as? VaultError)?.kind == .notPossible && "\(error)".contains("1 folder change is still waiting")
        }
        #expect(try Self.names(vault) == ["Trips"])

        h.goOnline()
        let created = try await vault.sync(force: true)
        let serverId = try #require(h.emulator.folders(userId: userId).first?.id)
        #expect(created.resolution?.folders.map { [$0.folderId, $0.outcome.rawValue, $0.serverId ?? ""] } == [[tempId, "created", serverId]])
        #expect(vault.status().pendingFolderCount == 0)

        // A rename the server fails once: reported, still pending and listed, sent by the next sync.
        h.goOffline()
        try await vault.renameFolder(id: serverId, name: "Travel")
        h.goOnline()
        h.failNext(1, "PUT", "/api/folders/\(serverId)")
        let failed = try await vault.sync(force: true)
        #expect(failed.resolution?.folders.map(\.outcome) == [.failed])
        #expect(failed.resolution?.folders.first?.isSettled == false)
        #expect(vault.status().pendingFolderCount == 1)
        #expect(try vault.folders() == [VaultFolder(id: serverId, name: "Travel", isPending: true)])
        let retried = try await vault.sync(force: true)
        #expect(retried.resolution?.folders.map(\.outcome) == [.renamed])
        #expect(try vault.folders() == [VaultFolder(id: serverId, name: "Travel", isPending: false)])
        #expect(vault.status().pendingFolderCount == 0)
        try await vault.logOut()
    }
}
