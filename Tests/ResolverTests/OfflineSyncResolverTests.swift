import EventLog
import Foundation
import Testing
import VaultCrypto
import VaultModel
@_spi(Tools) @testable import OfflineSync

/// The resolver's behaviour table (the original iOS design's OfflineSyncResolverTests), one test per row, against the
/// emulator over loopback HTTP. Names follow those behaviours.
@Suite struct OfflineSyncResolverTests {
    typealias H = ResolverHarness

    func process(_ h: H) async throws -> ResolutionReport {
        try await h.resolver().processPendingChanges(userId: h.userId)
    }

    /// Creates an item offline; returns its temporary id.
    func createOffline(_ h: H, _ name: String = "Offline item", password: String = "pw-new") async throws -> String {
        h.clock.advance(by: 60)
        h.goOffline()
        defer { h.goOnline() }
        guard case .savedOffline(let saved?, _) = try await h.repository().addCipher(H.login(name, password: password)) else {
            throw HarnessError("expected an offline create")
        }
        return saved.id!
    }

    func softDeleteOffline(_ h: H, _ view: CipherView) async throws {
        h.clock.advance(by: 60)
        h.goOffline()
        defer { h.goOnline() }
        _ = try await h.repository().softDeleteCipher(view)
    }

    func deleteOffline(_ h: H, _ view: CipherView) async throws {
        h.clock.advance(by: 60)
        h.goOffline()
        defer { h.goOnline() }
        _ = try await h.repository().deleteCipher(id: view.id!)
    }

    // MARK: Basic rows

    @Test func processPendingChanges_noPendingChanges() async throws {
        let h = try await H.make()
        _ = try await h.seedSynced("Bank")
        let before = try h.store.log.lastSequence()
        let report = try await process(h)
        #expect(report.items.isEmpty)
        #expect(try h.store.log.lastSequence() == before)
    }

    @Test func processPendingChanges_create() async throws {
        let h = try await H.make()
        let tempId = try await createOffline(h, "New login")
        let report = try await process(h)
        #expect(report.items.map(\.outcome) == [.created])
        let created = try h.serverItems(named: "New login")
        #expect(created.count == 1)
        #expect(created.first?.login?.password == "pw-new")
        #expect(created.first?.id != tempId)
        #expect(try h.pending(tempId) == nil)
        #expect(try h.local(tempId) == nil)
        #expect(try h.local(created[0].id!) != nil)
        #expect(try h.store.projection(userId: h.userId).idMap[tempId] == created[0].id)
    }

    @Test func processPendingChanges_update_noConflict() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await h.editOffline(view, password: "pw-1")
        let report = try await process(h)
        #expect(report.items.map(\.outcome) == [.pushed])
        #expect(try h.serverItems(named: "Bank").map { $0.login?.password } == ["pw-1"])
        #expect(try h.pendingCount() == 0)
    }

    @Test func processPendingChanges_softDelete_noConflict() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await softDeleteOffline(h, view)
        #expect(try await process(h).items.map(\.outcome) == [.deleted])
        #expect(h.emulator.cipher(id: view.id!)?.deletedDate != nil)
        #expect(try h.pendingCount() == 0)
    }

    // MARK: Conflicts

    @Test func processPendingChanges_update_conflict_localNewer() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try h.anotherDeviceEdits(view.id!) { $0.login?.password = "other-device" }
        try await h.editOffline(view, password: "mine")
        #expect(try await process(h).items.map(\.outcome) == [.localKept])
        let items = try h.serverItems(named: "Bank")
        #expect(items.count == 2)
        #expect(items.first(where: { $0.id == view.id })?.login?.password == "mine")
        #expect(items.first(where: { $0.id != view.id })?.login?.password == "other-device")
    }

    @Test func processPendingChanges_update_conflict_serverNewer() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await h.editOffline(view, password: "mine")
        try h.anotherDeviceEdits(view.id!) { $0.login?.password = "other-device" }
        #expect(try await process(h).items.map(\.outcome) == [.serverKept])
        let items = try h.serverItems(named: "Bank")
        #expect(items.count == 2)
        #expect(items.first(where: { $0.id == view.id })?.login?.password == "other-device")
        #expect(items.first(where: { $0.id != view.id })?.login?.password == "mine")
        #expect(try h.local(view.id!)?.login?.password == "other-device")
    }

    /// Another device renamed the item, this device changed its password offline: different
    /// parts, so the server gets one item with both (no backup), the report and the record say
    /// it was merged and which parts came from each side; with merging off, the matrix.
    @Test(arguments: [true, false])
    func processPendingChanges_update_otherDeviceChangedOtherParts(merging: Bool) async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        _ = try h.anotherDeviceEdits(view.id!) { $0.name = "Bank (joint)" }
        try await h.editOffline(view, password: "mine")
        let report = try await h.resolver { $0.mergesDisjointChanges = merging }.processPendingChanges(userId: h.userId)
        let records = try h.store.resolutionRecords(userId: h.userId, after: 0)
        if merging {
            #expect(report.items.map(\.outcome) == [.merged])
            #expect(report.items.first?.backupIds == [])
            let items = try h.serverItems()
            #expect(items.map(\.name) == ["Bank (joint)"])
            #expect(items.map { $0.login?.password } == ["mine"])
            #expect(items.first?.passwordHistory?.compactMap(\.password) == ["pw-0"])
            #expect(try h.local(view.id!)?.name == "Bank (joint)")
            #expect(records.map(\.kind) == [.merged(MergedParts(local: ["credential"], server: ["name"]))])
            #expect(records.first?.isConflict == true && records.first?.sideKept == nil)
        } else {
            #expect(report.items.map(\.outcome) == [.localKept])
            let items = try h.serverItems()
            #expect(items.filter { $0.name == "Bank" }.map { $0.login?.password } == ["mine"])
            #expect(items.filter { ($0.name ?? "").hasPrefix("Bank (joint) - ") }.map { $0.login?.password } == ["pw-0"])
            #expect(items.count == 2)
            #expect(records.map(\.kind) == [.serverVersionBackedUp, .pushed])
        }
        #expect(try h.pendingCount() == 0)
    }

    @Test func processPendingChanges_update_softConflict() async throws {
        let h = try await H.make()
        var view = try await h.seedSynced("Bank")
        for n in 1...4 { view = try await h.editOffline(view, password: "pw-\(n)") }
        #expect(try h.pending(view.id!)?.offlinePasswordChangeCount == 4)
        #expect(try await process(h).items.map(\.outcome) == [.localKept])
        let items = try h.serverItems(named: "Bank")
        #expect(items.count == 2)
        #expect(items.first(where: { $0.id == view.id })?.login?.password == "pw-4")
        #expect(items.first(where: { $0.id != view.id })?.login?.password == "pw-0")
    }

    /// Three conflict paths: the backup keeps the losing side's full password history.
    enum ConflictPath: String, CaseIterable, Sendable { case localNewer, serverNewer, softConflict }

    @Test(arguments: ConflictPath.allCases)
    func processPendingChanges_update_conflict_preservesPasswordHistory(path: ConflictPath) async throws {
        let h = try await H.make()
        var view = try await h.seedSynced("Bank", password: "a")
        // Some history on the server first.
        view = try h.anotherDeviceEdits(view.id!) { $0 = $0.applyingPasswordHistory(original: $0, now: BitwardenDate(h.clock.now)) }
        switch path {
        case .localNewer:
            let server = try h.anotherDeviceEdits(view.id!) { v in
                var changed = v
                changed.login?.password = "server-b"
                v = changed.applyingPasswordHistory(original: v, now: BitwardenDate(h.clock.now))
            }
            try await h.editOffline(view, password: "local-b")
            _ = try await process(h)
            let backup = try #require(try h.serverItems(named: "Bank").first { $0.id != view.id })
            #expect(backup.login?.password == "server-b")
            #expect(backup.passwordHistory?.map(\.password) == server.passwordHistory?.map(\.password))
            #expect(backup.passwordHistory?.first?.password == "a")
        case .serverNewer:
            let local = try await h.editOffline(view, password: "local-b")
            try h.anotherDeviceEdits(view.id!) { $0.login?.password = "server-b" }
            _ = try await process(h)
            let backup = try #require(try h.serverItems(named: "Bank").first { $0.id != view.id })
            #expect(backup.login?.password == "local-b")
            #expect(backup.passwordHistory?.map(\.password) == local.passwordHistory?.map(\.password))
            #expect(backup.passwordHistory?.first?.password == "a")
        case .softConflict:
            let server = try #require(try h.serverItems(named: "Bank").first)
            for n in 1...4 { view = try await h.editOffline(view, password: "pw-\(n)") }
            _ = try await process(h)
            let backup = try #require(try h.serverItems(named: "Bank").first { $0.id != view.id })
            #expect(backup.login?.password == "a")
            #expect(backup.passwordHistory?.map(\.password) == server.passwordHistory?.map(\.password))
        }
    }

    @Test func processPendingChanges_softDelete_conflict() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await softDeleteOffline(h, view)
        try h.anotherDeviceEdits(view.id!) { $0.notes = "changed elsewhere" }
        #expect(try await process(h).items.map(\.outcome) == [.deleteDropped])
        #expect(h.emulator.cipher(id: view.id!)?.deletedDate == nil)
        let local = try #require(try h.local(view.id!))
        #expect(local.notes == "changed elsewhere")
        #expect(local.deletedDate == nil)
        #expect(try h.pendingCount() == 0)
    }

    @Test func processPendingChanges_hardDelete_noConflict() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await deleteOffline(h, view)
        #expect(try await process(h).items.map(\.outcome) == [.deleted])
        #expect(h.emulator.cipher(id: view.id!) == nil)
        #expect(try h.local(view.id!) == nil)
    }

    @Test func processPendingChanges_hardDelete_conflict() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await deleteOffline(h, view)
        try h.anotherDeviceEdits(view.id!) { $0.notes = "changed elsewhere" }
        #expect(try await process(h).items.map(\.outcome) == [.deleteDropped])
        #expect(h.emulator.cipher(id: view.id!) != nil)
        #expect(try h.local(view.id!)?.notes == "changed elsewhere")
    }

    @Test func processPendingChanges_hardDelete_cipherNotFound_cleansUp() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await deleteOffline(h, view)
        try await h.client.deleteCipher(id: view.id!)   // gone on the server meanwhile
        #expect(try await process(h).items.map(\.outcome) == [.cleanedUp])
        #expect(try h.pendingCount() == 0)
        #expect(try h.events(view.id!).suffix(2) == [.cleanedUp, .resolved])
    }

    @Test func processPendingChanges_hardDelete_apiFailure_pendingRecordRetained() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await deleteOffline(h, view)
        h.failNext(1, "DELETE", "/api/ciphers/*")
        #expect(try await process(h).items.map(\.outcome) == [.failed])
        #expect(try h.pending(view.id!)?.changeType == .hardDelete)
        #expect(try h.pending(view.id!)?.attempts == 1)
        #expect(h.emulator.cipher(id: view.id!) != nil)
    }

    @Test func processPendingChanges_update_cipherNotFound_recreates() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await h.editOffline(view, password: "mine")
        try await h.client.deleteCipher(id: view.id!)
        let report = try await process(h)
        #expect(report.items.map(\.outcome) == [.recreated])
        let items = try h.serverItems(named: "Bank")
        #expect(items.count == 1)
        #expect(items.first?.login?.password == "mine")
        #expect(items.first?.id != view.id)
        #expect(try h.store.projection(userId: h.userId).idMap[view.id!] == items.first?.id)
        #expect(try h.local(view.id!) == nil)
        #expect(try h.local(items[0].id!)?.login?.password == "mine")
    }

    @Test func processPendingChanges_softDelete_cipherNotFound_cleansUp() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await softDeleteOffline(h, view)
        try await h.client.deleteCipher(id: view.id!)
        #expect(try await process(h).items.map(\.outcome) == [.cleanedUp])
        #expect(try h.local(view.id!) == nil)
        #expect(try h.pendingCount() == 0)
    }

    @Test func offlineSyncError_vaultLocked_localizedDescription() async throws {
        let h = try await H.make()
        h.store.lock(userId: h.userId)
        await #expect(throws: OfflineSyncError.vaultLocked(userId: h.userId)) { try await process(h) }
        #expect(OfflineSyncError.vaultLocked(userId: "u1").description.contains("locked: unlock it"))
    }

    // MARK: Failures keep the item pending

    @Test func processPendingChanges_create_apiFailure_pendingRecordRetained() async throws {
        let h = try await H.make()
        let tempId = try await createOffline(h)
        h.failNext(1, "POST", "/api/ciphers")
        #expect(try await process(h).items.map(\.outcome) == [.failed])
        #expect(try h.pending(tempId)?.changeType == .create)
        #expect(try h.serverItems(named: "Offline item").isEmpty)
    }

    @Test func processPendingChanges_update_serverFetchFailure_pendingRecordRetained() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await h.editOffline(view, password: "mine")
        h.failNext(1, "GET", "/api/ciphers/\(view.id!)")
        #expect(try await process(h).items.map(\.outcome) == [.failed])
        #expect(try h.pending(view.id!)?.changeType == .update)
        #expect(try h.serverItems(named: "Bank").map { $0.login?.password } == ["pw-0"])
    }

    @Test func processPendingChanges_softDelete_apiFailure_pendingRecordRetained() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await softDeleteOffline(h, view)
        h.failNext(1, "PUT", "/api/ciphers/*/delete")
        #expect(try await process(h).items.map(\.outcome) == [.failed])
        #expect(try h.pending(view.id!)?.changeType == .softDelete)
        #expect(h.emulator.cipher(id: view.id!)?.deletedDate == nil)
    }

    @Test func processPendingChanges_update_backupFailure_pendingRecordRetained() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try h.anotherDeviceEdits(view.id!) { $0.login?.password = "other-device" }
        try await h.editOffline(view, password: "mine")
        h.failNext(1, "POST", "/api/ciphers")
        #expect(try await process(h).items.map(\.outcome) == [.failed])
        // The backup comes first: the server copy was not overwritten.
        #expect(try h.serverItems(named: "Bank").map { $0.login?.password } == ["other-device"])
        #expect(try h.pending(view.id!) != nil)
    }

    // MARK: Batches

    @Test func processPendingChanges_batch_allSucceed() async throws {
        let h = try await H.make()
        let a = try await h.seedSynced("A")
        let b = try await h.seedSynced("B")
        try await h.editOffline(a, password: "a-1")
        try await softDeleteOffline(h, b)
        _ = try await createOffline(h, "C")
        #expect(try await process(h).items.map(\.outcome) == [.pushed, .deleted, .created])
        #expect(try h.pendingCount() == 0)
    }

    @Test func processPendingChanges_batch_mixedFailure_successfulItemResolved() async throws {
        let h = try await H.make()
        let a = try await h.seedSynced("A")
        let b = try await h.seedSynced("B")
        try await h.editOffline(a, password: "a-1")
        try await h.editOffline(b, password: "b-1")
        h.failNext(1, "GET", "/api/ciphers/\(a.id!)")
        #expect(try await process(h).items.map(\.outcome) == [.failed, .pushed])
        #expect(try h.pending(a.id!) != nil)
        #expect(try h.pending(b.id!) == nil)
    }

    @Test func processPendingChanges_batch_allFail() async throws {
        let h = try await H.make()
        let a = try await h.seedSynced("A")
        let b = try await h.seedSynced("B")
        try await h.editOffline(a, password: "a-1")
        try await h.editOffline(b, password: "b-1")
        h.goOffline()
        #expect(try await process(h).items.map(\.outcome) == [.failed, .failed])
        #expect(try h.pendingCount() == 2)
    }

    // MARK: Bad data: the server refuses it, the item stays pending, others resolve

    /// A name too long for the server's limits ("corrupt cipher data": a payload
    /// that cannot be sent as it is).
    static let overlongName = String(repeating: "x", count: 3000)

    @Test func processPendingChanges_create_corruptCipherData_skipsAndRetains() async throws {
        let h = try await H.make()
        let tempId = try await createOffline(h, Self.overlongName)
        let report = try await process(h)
        #expect(report.items.map(\.outcome) == [.failed])
        #expect(report.items.first?.error?.isEmpty == false)
        #expect(try h.pending(tempId)?.changeType == .create)
    }

    @Test func processPendingChanges_update_corruptCipherData_skipsAndRetains() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await h.editOffline(view, name: Self.overlongName)
        #expect(try await process(h).items.map(\.outcome) == [.failed])
        #expect(try h.pending(view.id!)?.changeType == .update)
        #expect(try h.serverItems(named: "Bank").count == 1)
    }

    @Test func processPendingChanges_batch_corruptAndValid_validItemResolves() async throws {
        let h = try await H.make()
        let bad = try await createOffline(h, Self.overlongName)
        let good = try await createOffline(h, "Good")
        #expect(try await process(h).items.map(\.outcome) == [.failed, .created])
        #expect(try h.pending(bad) != nil)
        #expect(try h.pending(good) == nil)
    }

    /// "Nil cipher data": an operation body without its snapshot cannot exist in a
    /// sealed log written by VaultLog; one that does (a foreign writer) is refused with an
    /// error naming the sequence, and nothing is sent.
    @Test(arguments: [VaultEventType.created, .updated])
    func processPendingChanges_nilCipherData_isRefusedNamingTheEvent(type: VaultEventType) throws {
        let header = EventHeaderFixture.make(sequence: 42, type: type)
        #expect(throws: OfflineSyncError.self) {
            try VaultEvent(header: header, plaintext: Array(#"{"v":1,"passwordChanged":false,"at":"2026-01-01T00:00:00Z"}"#.utf8))
        }
        do {
            _ = try VaultEvent(header: header, plaintext: Array("{}".utf8))
        } catch {
            #expect("\(error)".contains("event 42"))
        }
    }

    @Test func processPendingChanges_update_nilOriginalRevisionDate_noConflict() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try h.anotherDeviceEdits(view.id!) { $0.notes = "changed elsewhere" }
        // An update event without a base revision (as an old client version could write).
        h.clock.advance(by: 60)
        var edited = view
        edited.login?.password = "mine"
        let encrypted = try edited.encrypt(userKey: h.userKey)
        try await h.store.append(userId: h.userId, cipherId: view.id!, type: .updated,
                           body: .operation(OperationBody(cipher: encrypted, passwordChanged: true, baseRevisionDate: nil,
                                                          at: BitwardenDate(h.clock.now))), localChanges: [.upsert(encrypted)])
        #expect(try await process(h).items.map(\.outcome) == [.pushed])
        #expect(try h.serverItems(named: "Bank").map { $0.login?.password } == ["mine"])
    }

    @Test func processPendingChanges_update_conflict_backupNameFormat() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        let local = try await h.editOffline(view, password: "mine")
        try h.anotherDeviceEdits(view.id!) { $0.login?.password = "other-device" }
        _ = try await process(h)
        let backup = try #require(try h.serverItems(named: "Bank").first { $0.id != view.id })
        let updatedAt = try #require(try h.store.events(userId: h.userId, cipherId: view.id!).first?.operation?.at)
        #expect(backup.name == "Bank - \(BackupName.timestamp(updatedAt))")
        #expect(backup.name?.range(of: #"^Bank - \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$"#, options: .regularExpression) != nil)
        #expect(local.name == "Bank")
    }

    @Test func processPendingChanges_update_conflict_emptyNameBackup() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("")
        try await h.editOffline(view, password: "mine")
        try h.anotherDeviceEdits(view.id!) { $0.login?.password = "other-device" }
        #expect(try await process(h).items.map(\.outcome) == [.serverKept])
        let backup = try #require(try h.serverItems().first { $0.id != view.id })
        #expect(backup.name?.range(of: #"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$"#, options: .regularExpression) != nil)
        #expect(backup.login?.password == "mine")
    }

    // MARK: Backup shape

    @Test func backup_hasNewIdFreshKeySameFolderNoAttachments() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await h.editOffline(view, password: "mine")
        try h.anotherDeviceEdits(view.id!) { $0.login?.password = "other-device" }
        _ = try await process(h)
        let backup = try #require(h.emulator.ciphers(userId: h.userId).first { $0.id != view.id })
        let original = try #require(h.emulator.cipher(id: view.id!))
        #expect(backup.key != nil)
        #expect(backup.key != original.key)
        #expect(backup.folderId == original.folderId)
        #expect((backup.attachments ?? []).isEmpty)
    }
}

/// Headers for decoding tests.
enum EventHeaderFixture {
    static func make(sequence: UInt64, type: VaultEventType) -> EventHeader {
        EventHeader(formatVersion: 1, sequence: sequence, userId: "u", cipherId: "c", eventType: type.rawValue, recordedAtMillis: 0)
    }
}
