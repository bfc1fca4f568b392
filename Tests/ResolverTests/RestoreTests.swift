import Foundation
import Testing
import VaultCrypto
import VaultModel
@_spi(Tools) @testable import OfflineSync
import VaultLogTesting

/// Restore from the trash: offline, online with nothing pending, online onto a pending item
/// (through the resolver), and the resolver's rows for a pending restore, against the emulator
/// over loopback HTTP.
@Suite struct RestoreTests {
    typealias H = ResolverHarness

    /// An item on the server and the device, moved to the trash online.
    static func seedTrashed(_ h: H, _ name: String = "Bank") async throws -> CipherView {
        let view = try await h.seedSynced(name)
        h.clock.advance(by: 60)
        guard case .online(let trashed?) = try await h.repository().softDeleteCipher(view), trashed.deletedDate != nil else {
            throw HarnessError("expected an online trash move")
        }
        return try trashed.decrypt(userKey: h.userKey)
    }

    static func restoreOffline(_ h: H, _ id: String, advance: TimeInterval = 60) async throws {
        h.clock.advance(by: advance)
        h.goOffline()
        defer { h.goOnline() }
        let result = try await h.repository().restoreCipher(id: id)
        guard case .savedOffline(let saved?, _) = result, saved.deletedDate == nil else {
            throw HarnessError("expected an offline restore, got \(result)")
        }
    }

    func process(_ h: H) async throws -> ResolutionReport {
        try await h.resolver().processPendingChanges(userId: h.userId)
    }

    func outcomes(_ h: H, _ id: String) throws -> [VaultEventType] {
        try h.events(id).filter { !$0.isOperation && $0 != .createPlanned }
    }

    // MARK: The repository

    @Test func restoreOffline_itemActiveOnDevice_pendingAsUpdate_serverStillTrashed() async throws {
        let h = try await H.make()
        let trashed = try await Self.seedTrashed(h)
        try await Self.restoreOffline(h, trashed.id!)
        #expect(try h.local(trashed.id!)?.deletedDate == nil)
        #expect(try h.pending(trashed.id!)?.changeType == .update)
        #expect(try h.pending(trashed.id!)?.restoresFromTrash == true)
        #expect(try h.store.pendingFromHeaders(userId: h.userId).pending[trashed.id!] == .update)
        #expect(try h.events(trashed.id!) == [.restored])
        #expect(h.emulator.cipher(id: trashed.id!)?.deletedDate != nil)
    }

    @Test func restoreOnline_nothingPending_serverRestoresIt_nothingLogged() async throws {
        let h = try await H.make()
        let trashed = try await Self.seedTrashed(h)
        h.clock.advance(by: 60)
        guard case .online(let restored?) = try await h.repository().restoreCipher(id: trashed.id!) else {
            throw HarnessError("expected an online restore")
        }
        #expect(restored.deletedDate == nil)
        #expect(h.emulator.cipher(id: trashed.id!)?.deletedDate == nil)
        #expect(try h.local(trashed.id!)?.deletedDate == nil)
        #expect(try h.local(trashed.id!)?.revisionDate == h.emulator.cipher(id: trashed.id!)?.revisionDate)
        #expect(try h.events(trashed.id!).isEmpty)
    }

    @Test func restoreOnline_pendingEditInTheTrash_goesThroughTheResolver() async throws {
        let h = try await H.make()
        let trashed = try await Self.seedTrashed(h)
        try await h.editOffline(trashed, password: "edited in the trash")
        h.clock.advance(by: 60)
        let result = try await h.repository().restoreCipher(id: trashed.id!)
        guard case .resolved(let local?, let report) = result else { throw HarnessError("expected a resolution, got \(result)") }
        #expect(report.outcome == .pushed)
        #expect(local.deletedDate == nil)
        let server = try #require(h.emulator.cipher(id: trashed.id!))
        #expect(server.deletedDate == nil)
        #expect(try server.decrypt(userKey: h.userKey).login?.password == "edited in the trash")
        #expect(try outcomes(h, trashed.id!) == [.pushed, .restoreApplied, .resolved])
        #expect(try h.pendingCount() == 0)
    }

    @Test func restore_ofAnItemNotInTheTrash_isRefused_nothingWritten() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        let before = try h.store.log.lastSequence()
        await #expect(throws: OfflineSyncError.cannotRestore(cipherId: view.id!, reason: "it is not in the trash")) {
            try await h.repository().restoreCipher(id: view.id!)
        }
        #expect(try h.store.log.lastSequence() == before)
        let error = OfflineSyncError.cannotRestore(cipherId: view.id!, reason: "it is not in the trash")
        #expect(error.description.contains(view.id!) && error.description.contains("not in the trash"))
    }

    // MARK: The resolver

    @Test func pendingRestore_serverUnchanged_restoresTheServerCopy() async throws {
        let h = try await H.make()
        let trashed = try await Self.seedTrashed(h)
        try await Self.restoreOffline(h, trashed.id!)
        #expect(try await process(h).items.map(\.outcome) == [.pushed])
        let items = try h.serverItems()
        #expect(items.count == 1)
        #expect(items.first?.deletedDate == nil)
        #expect(items.first?.login?.password == "pw-0")
        #expect(try outcomes(h, trashed.id!) == [.restoreApplied, .resolved])
        #expect(try h.local(trashed.id!)?.revisionDate == h.emulator.cipher(id: trashed.id!)?.revisionDate)
        #expect(try h.store.resolutionRecords(userId: h.userId, after: 0).map(\.kind) == [.restored])
        #expect(try h.pendingCount() == 0)
    }

    @Test func pendingRestore_anotherDevicePermanentlyDeleted_recreatesActive() async throws {
        let h = try await H.make()
        let trashed = try await Self.seedTrashed(h)
        try await Self.restoreOffline(h, trashed.id!)
        try await h.client.deleteCipher(id: trashed.id!)
        #expect(try await process(h).items.map(\.outcome) == [.recreated])
        let items = try h.serverItems()
        #expect(items.map(\.name) == ["Bank"])
        #expect(items.first?.deletedDate == nil)
        #expect(items.first?.id != trashed.id)
        #expect(try h.pendingCount() == 0)
    }

    @Test func pendingRestore_anotherDeviceEditedInTheTrashLater_serverKept_localVersionBackedUpActive() async throws {
        let h = try await H.make()
        let trashed = try await Self.seedTrashed(h)
        try await Self.restoreOffline(h, trashed.id!)
        try h.anotherDeviceEdits(trashed.id!) { $0.login?.password = "other" }
        #expect(try await process(h).items.map(\.outcome) == [.serverKept])
        let item = try #require(try h.serverItems().first { $0.id == trashed.id })
        #expect(item.deletedDate != nil)
        #expect(item.login?.password == "other")
        let backups = try h.serverItems(named: "Bank - ")
        #expect(backups.count == 1)
        #expect(backups.first?.deletedDate == nil)
        #expect(backups.first?.login?.password == "pw-0")
    }

    @Test func pendingRestore_anotherDeviceEditedInTheTrashEarlier_localWins_restoredWithServerBackup() async throws {
        let h = try await H.make()
        let trashed = try await Self.seedTrashed(h)
        try h.anotherDeviceEdits(trashed.id!) { $0.login?.password = "other" }
        try await Self.restoreOffline(h, trashed.id!)
        #expect(try await process(h).items.map(\.outcome) == [.localKept])
        let item = try #require(try h.serverItems().first { $0.id == trashed.id })
        #expect(item.deletedDate == nil)
        #expect(item.login?.password == "pw-0")
        let backups = try h.serverItems(named: "Bank - ")
        #expect(backups.map { $0.login?.password } == ["other"])
        #expect(try outcomes(h, trashed.id!) == [.backupCreated, .pushed, .restoreApplied, .resolved])
    }

    @Test func trashThenRestoreOffline_serverNeverSawTheTrash_nothingToSend() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        h.clock.advance(by: 60)
        h.goOffline()
        _ = try await h.repository().softDeleteCipher(view)
        h.goOnline()
        try await Self.restoreOffline(h, view.id!)
        let revision = h.emulator.cipher(id: view.id!)?.revisionDate
        #expect(try await process(h).items.map(\.outcome) == [.pushed])
        #expect(h.emulator.cipher(id: view.id!)?.deletedDate == nil)
        #expect(h.emulator.cipher(id: view.id!)?.revisionDate == revision)
        #expect(try h.local(view.id!)?.deletedDate == nil)
        #expect(try h.pendingCount() == 0)
    }

    /// The trash move reached the server but its answer was lost (saved offline, pending), then
    /// the user restored the item: undoing the pending trash move locally is not enough, the
    /// server has the item in its trash and must take it out.
    @Test func lostTrashAnswer_thenRestoreOffline_serverTakesItOutOfTheTrash() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        h.clock.advance(by: 60)
        h.dropResponseAfterApply(1, "PUT", "/api/ciphers/*/delete")
        guard case .savedOffline = try await h.repository().softDeleteCipher(view) else { throw HarnessError("expected the trash move saved offline") }
        h.clearFaults()
        #expect(h.emulator.cipher(id: view.id!)?.deletedDate != nil)
        try await Self.restoreOffline(h, view.id!)
        _ = try await process(h)
        #expect(h.emulator.cipher(id: view.id!)?.deletedDate == nil)
        #expect(try h.serverItems().count == 1)
        #expect(try outcomes(h, view.id!) == [.restoreApplied, .resolved])
        #expect(try h.pendingCount() == 0)
    }

    /// A pending trash move resolved, then an edit in the trash and a restore offline: the edit's
    /// base is the revision this device's own trash move got on the server, so there is no
    /// conflict and no backup (the local copy after the trash move took the server's revision).
    @Test func resolvedTrashMove_thenEditInTheTrashAndRestore_noConflictNoBackup() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        h.clock.advance(by: 60)
        h.goOffline()
        _ = try await h.repository().softDeleteCipher(view)
        h.goOnline()
        _ = try await process(h)
        #expect(try h.local(view.id!)?.revisionDate == h.emulator.cipher(id: view.id!)?.revisionDate)
        try await h.editOffline(try #require(try h.local(view.id!)), password: "in the trash")
        try await Self.restoreOffline(h, view.id!)
        #expect(try await process(h).items.map(\.outcome) == [.pushed])
        let items = try h.serverItems()
        #expect(items.map { $0.login?.password } == ["in the trash"])
        #expect(items.first?.deletedDate == nil)
    }

    @Test func restoreThenTrashAgainOffline_endsInTheTrash() async throws {
        let h = try await H.make()
        let trashed = try await Self.seedTrashed(h)
        try await Self.restoreOffline(h, trashed.id!)
        h.clock.advance(by: 60)
        h.goOffline()
        _ = try await h.repository().softDeleteCipher(try #require(try h.local(trashed.id!)))
        h.goOnline()
        #expect(try h.pending(trashed.id!)?.changeType == .softDelete)
        _ = try await process(h)
        #expect(h.emulator.cipher(id: trashed.id!)?.deletedDate != nil)
        #expect(try outcomes(h, trashed.id!) == [.deleteApplied, .resolved])
    }
}

extension CrashAndConcurrencyTests {
    /// Pending restores for the crash-at-every-effect test: no second copy, the item active.
    static let restoreRows: [Row] = [
        Row(name: "restore, server unchanged", setUp: { h in
            let trashed = try await RestoreTests.seedTrashed(h)
            try await RestoreTests.restoreOffline(h, trashed.id!)
            return trashed.id!
        }, check: { h, id throws in
            #expect(h.emulator.cipher(id: id)?.deletedDate == nil)
            #expect(try h.serverItems().count == 1)
        }),
        Row(name: "restore with an edit, other device edited in the trash earlier", setUp: { h in
            let trashed = try await RestoreTests.seedTrashed(h)
            try h.anotherDeviceEdits(trashed.id!) { $0.login?.password = "other" }
            try await RestoreTests.restoreOffline(h, trashed.id!)
            try await h.editOffline(try #require(try h.local(trashed.id!)), password: "mine")
            return trashed.id!
        }, check: { h, id throws in
            let item = try #require(h.emulator.cipher(id: id))
            #expect(item.deletedDate == nil)
            #expect(try item.decrypt(userKey: h.userKey).login?.password == "mine")
            #expect(try h.serverItems(named: "Bank - ").map { $0.login?.password } == ["other"])
        }),
        Row(name: "restore, 404 re-create", setUp: { h in
            let trashed = try await RestoreTests.seedTrashed(h)
            try await RestoreTests.restoreOffline(h, trashed.id!)
            try await h.client.deleteCipher(id: trashed.id!)
            return trashed.id!
        }, check: { h, _ throws in
            #expect(try h.serverItems().map { $0.deletedDate == nil } == [true])
        }),
    ]
}
