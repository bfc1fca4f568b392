import Testing
import Foundation
import VaultCrypto
import VaultModel
@_spi(Tools) @testable import OfflineSync

/// The repository's behaviour table (the original iOS design's VaultRepositoryTests), one test per row.
@Suite struct VaultRepositoryTests {
    static let disabledChanges = OfflineSyncFlags(offlineChanges: false, resolution: true)
    static let disabledResolution = OfflineSyncFlags(offlineChanges: true, resolution: false)

    // MARK: helpers

    /// addCipher with the server failing with `error`: returns the harness and the result or thrown error.
    func add(failing error: any Error, flags: OfflineSyncFlags = OfflineSyncFlags(), organizationId: String? = nil)
        async throws -> (Harness, Result<SaveResult, any Error>) {
        let h = try Harness()
        h.server.fail(with: error)
        let view = Harness.login("New", password: "secret", organizationId: organizationId)
        let result = await capture { try await h.repository(flags: flags).addCipher(view) }
        return (h, result)
    }

    func update(failing error: any Error, flags: OfflineSyncFlags = OfflineSyncFlags(), organizationId: String? = nil,
                newPassword: String = "pw-1") async throws -> (Harness, CipherView, Result<SaveResult, any Error>) {
        let h = try Harness()
        var view = try await h.seedSynced("Bank", organizationId: organizationId)
        view.login?.password = newPassword
        h.server.fail(with: error)
        let result = await capture { try await h.repository(flags: flags).updateCipher(view) }
        return (h, view, result)
    }

    func softDelete(failing error: any Error, flags: OfflineSyncFlags = OfflineSyncFlags(), organizationId: String? = nil)
        async throws -> (Harness, CipherView, Result<SaveResult, any Error>) {
        let h = try Harness()
        let view = try await h.seedSynced("Bank", organizationId: organizationId)
        h.server.fail(with: error)
        let result = await capture { try await h.repository(flags: flags).softDeleteCipher(view) }
        return (h, view, result)
    }

    func delete(failing error: any Error, flags: OfflineSyncFlags = OfflineSyncFlags(), organizationId: String? = nil)
        async throws -> (Harness, CipherView, Result<SaveResult, any Error>) {
        let h = try Harness()
        let view = try await h.seedSynced("Bank", organizationId: organizationId)
        h.server.fail(with: error)
        let result = await capture { try await h.repository(flags: flags).deleteCipher(id: view.id!) }
        return (h, view, result)
    }

    func expectThrows<E: Error & Equatable>(_ result: Result<SaveResult, any Error>, _ expected: E) {
        switch result {
        case .success(let value): Issue.record("expected \(expected) to be rethrown, got \(value)")
        case .failure(let error): #expect(error as? E == expected)
        }
    }

    func savedSequence(_ result: Result<SaveResult, any Error>) throws -> UInt64 {
        guard case .success(.savedOffline(_, let sequence)) = result else {
            Issue.record("expected an offline save, got \(result)")
            throw UnknownError()
        }
        return sequence
    }

    /// After an offline add: exactly one pending create, its local copy, and the event.
    func expectOfflineCreate(_ h: Harness, _ result: Result<SaveResult, any Error>) throws {
        _ = try savedSequence(result)
        let pending = try h.store.projection(userId: h.userId).pending
        #expect(pending.count == 1)
        let change = try #require(pending.values.first)
        #expect(change.changeType == .create)
        #expect(change.offlinePasswordChangeCount == 0)
        #expect(change.originalRevisionDate == nil)
        #expect(try h.local(change.cipherId) == change.latest)
        #expect(try change.latest.decrypt(userKey: h.userKey).name == "New")
    }

    func expectNothingSaved(_ h: Harness, localCiphers: Int = 0) throws {
        #expect(try h.eventCount() == 0)
        #expect(try h.store.localCiphers(userId: h.userId).count == localCiphers)
    }

    // MARK: addCipher

    @Test func addCipher_offlineFallback() async throws {
        let (h, result) = try await add(failing: NotConnectedError())
        try expectOfflineCreate(h, result)
    }

    @Test func addCipher_offlineFallback_newCipherGetsTempId() async throws {
        let (h, result) = try await add(failing: NotConnectedError())
        guard case .success(.savedOffline(let cipher?, _)) = result else { Issue.record("\(result)"); return }
        let tempId = try #require(cipher.id)
        #expect(UUID(uuidString: tempId) != nil, "temporary id is a UUID")
        // The id is inside the encrypted snapshot: it survives the decrypt round trip.
        #expect(try cipher.decrypt(userKey: h.userKey).id == tempId)
        #expect(try h.pending(tempId)?.changeType == .create)
    }

    @Test func addCipher_offlineFallback_orgCipher_throws() async throws {
        let (h, result) = try await add(failing: NotConnectedError(), organizationId: "org-1")
        expectThrows(result, NotConnectedError())
        try expectNothingSaved(h)
    }

    @Test func addCipher_offlineFallback_unknownError() async throws {
        let (h, result) = try await add(failing: UnknownError())
        try expectOfflineCreate(h, result)
    }

    @Test func addCipher_offlineFallback_responseValidationError5xx() async throws {
        let (h, result) = try await add(failing: HTTPStatusError(status: 503))
        try expectOfflineCreate(h, result)
    }

    @Test func addCipher_serverError_rethrows() async throws {
        let (h, result) = try await add(failing: TestServerError())
        expectThrows(result, TestServerError())
        try expectNothingSaved(h)
    }

    @Test func addCipher_responseValidationError4xx_rethrows() async throws {
        let (h, result) = try await add(failing: HTTPStatusError(status: 400))
        expectThrows(result, HTTPStatusError(status: 400))
        try expectNothingSaved(h)
    }

    @Test func addCipher_offlineFallback_disabledByFeatureFlag() async throws {
        let (h, result) = try await add(failing: NotConnectedError(), flags: Self.disabledChanges)
        expectThrows(result, NotConnectedError())
        try expectNothingSaved(h)
    }

    @Test func addCipher_offlineFallback_disabledByResolutionFlag() async throws {
        let (h, result) = try await add(failing: NotConnectedError(), flags: Self.disabledResolution)
        expectThrows(result, NotConnectedError())
        try expectNothingSaved(h)
    }

    // MARK: deleteCipher (permanent)

    @Test func deleteCipher_offlineFallback() async throws {
        let (h, view, result) = try await delete(failing: NotConnectedError())
        _ = try savedSequence(result)
        let change = try #require(try h.pending(view.id!))
        #expect(change.changeType == .hardDelete)
        #expect(change.originalRevisionDate == view.revisionDate)
        #expect(try h.local(view.id!) == nil, "local copy removed")
        #expect(try change.latest.decrypt(userKey: h.userKey).name == "Bank", "last version kept in the event")
    }

    @Test func deleteCipher_offlineFallback_cleansUpOfflineCreatedCipher() async throws {
        let h = try Harness()
        h.server.fail(with: NotConnectedError())
        guard case .savedOffline(let created?, _) = try await h.repository().addCipher(Harness.login("Temp", password: "x")) else {
            Issue.record("add was not saved offline"); return
        }
        let result = try await h.repository().deleteCipher(id: created.id!)
        guard case .discardedLocally = result else { Issue.record("\(result)"); return }
        #expect(try h.store.projection(userId: h.userId).pending.isEmpty)
        #expect(try h.local(created.id!) == nil)
        #expect(!h.server.calls.contains("delete"), "no server request for an item the server never saw")
    }

    @Test func deleteCipher_offlineFallback_unknownError() async throws {
        let (h, view, result) = try await delete(failing: UnknownError())
        _ = try savedSequence(result)
        #expect(try h.pending(view.id!)?.changeType == .hardDelete)
    }

    @Test func deleteCipher_offlineFallback_responseValidationError5xx() async throws {
        let (h, view, result) = try await delete(failing: HTTPStatusError(status: 500))
        _ = try savedSequence(result)
        #expect(try h.pending(view.id!)?.changeType == .hardDelete)
    }

    @Test func deleteCipher_offlineFallback_cipherNotFound_noOp() async throws {
        let h = try Harness()
        h.server.fail(with: NotConnectedError())
        let result = try await h.repository().deleteCipher(id: "not-in-the-local-store")
        #expect(result == .noOp)
        try expectNothingSaved(h)
    }

    @Test func deleteCipher_offlineFallback_orgCipher_throws() async throws {
        let (h, view, result) = try await delete(failing: NotConnectedError(), organizationId: "org-1")
        expectThrows(result, NotConnectedError())
        #expect(try h.eventCount() == 0)
        #expect(try h.local(view.id!) != nil, "org item kept locally")
    }

    @Test func deleteCipher_offlineFallback_disabledByFeatureFlag() async throws {
        let (h, view, result) = try await delete(failing: NotConnectedError(), flags: Self.disabledChanges)
        expectThrows(result, NotConnectedError())
        #expect(try h.eventCount() == 0)
        #expect(try h.local(view.id!) != nil)
    }

    @Test func deleteCipher_offlineFallback_disabledByResolutionFlag() async throws {
        let (h, view, result) = try await delete(failing: NotConnectedError(), flags: Self.disabledResolution)
        expectThrows(result, NotConnectedError())
        #expect(try h.eventCount() == 0)
        #expect(try h.local(view.id!) != nil)
    }

    @Test func deleteCipher_serverError_rethrows() async throws {
        let (h, view, result) = try await delete(failing: TestServerError())
        expectThrows(result, TestServerError())
        #expect(try h.eventCount() == 0)
        #expect(try h.local(view.id!) != nil)
    }

    @Test func deleteCipher_responseValidationError4xx_rethrows() async throws {
        let (h, view, result) = try await delete(failing: HTTPStatusError(status: 403))
        expectThrows(result, HTTPStatusError(status: 403))
        #expect(try h.eventCount() == 0)
        #expect(try h.local(view.id!) != nil)
    }

    // MARK: updateCipher

    @Test func updateCipher_offlineFallback() async throws {
        let (h, view, result) = try await update(failing: NotConnectedError())
        _ = try savedSequence(result)
        let change = try #require(try h.pending(view.id!))
        #expect(change.changeType == .update)
        #expect(change.originalRevisionDate == view.revisionDate)
        #expect(try h.local(view.id!) == change.latest)
        #expect(try change.latest.decrypt(userKey: h.userKey).login?.password == "pw-1")
    }

    @Test func updateCipher_offlineFallback_preservesCreateType() async throws {
        let h = try Harness()
        h.server.fail(with: NotConnectedError(), times: 2)
        guard case .savedOffline(let created?, _) = try await h.repository().addCipher(Harness.login("Temp", password: "a")) else {
            Issue.record("add was not saved offline"); return
        }
        var view = try created.decrypt(userKey: h.userKey)
        view.name = "Temp renamed"
        _ = try await h.repository().updateCipher(view)
        let change = try #require(try h.pending(created.id!))
        #expect(change.changeType == .create)
        #expect(try change.latest.decrypt(userKey: h.userKey).name == "Temp renamed")
        #expect(!h.server.calls.contains("update"), "a temporary id is never PUT")
    }

    @Test func updateCipher_offlineFallback_passwordChanged_incrementsCount() async throws {
        let (h, view, _) = try await update(failing: NotConnectedError(), newPassword: "pw-1")
        #expect(try h.pending(view.id!)?.offlinePasswordChangeCount == 1)
    }

    @Test func updateCipher_offlineFallback_passwordUnchanged_zeroCount() async throws {
        let (h, view, _) = try await update(failing: NotConnectedError(), newPassword: "pw-0")
        #expect(try h.pending(view.id!)?.offlinePasswordChangeCount == 0)
    }

    @Test func updateCipher_offlineFallback_subsequentEdit_passwordChanged_incrementsCount() async throws {
        let (h, _, result) = try await update(failing: NotConnectedError(), newPassword: "pw-1")
        guard case .success(.savedOffline(let saved?, _)) = result else { Issue.record("\(result)"); return }
        var next = try saved.decrypt(userKey: h.userKey)
        next.login?.password = "pw-2"
        h.server.fail(with: NotConnectedError())
        _ = try await h.repository().updateCipher(next)
        let change = try #require(try h.pending(saved.id!))
        #expect(change.offlinePasswordChangeCount == 2)
        #expect(change.versionSequences.count == 2)
        let history = try change.latest.decrypt(userKey: h.userKey).passwordHistory?.map(\.password)
        #expect(history == ["pw-1", "pw-0"], "Bitwarden's rule: old passwords newest first")
    }

    @Test func updateCipher_offlineFallback_subsequentEdit_passwordUnchanged_preservesCount() async throws {
        let (h, _, result) = try await update(failing: NotConnectedError(), newPassword: "pw-1")
        guard case .success(.savedOffline(let saved?, _)) = result else { Issue.record("\(result)"); return }
        var next = try saved.decrypt(userKey: h.userKey)
        next.notes = "only the notes changed"
        h.server.fail(with: NotConnectedError())
        _ = try await h.repository().updateCipher(next)
        let change = try #require(try h.pending(saved.id!))
        #expect(change.offlinePasswordChangeCount == 1)
        #expect(change.versionSequences.count == 2)
    }

    @Test func updateCipher_offlineFallback_orgCipher_throws() async throws {
        let (h, view, result) = try await update(failing: NotConnectedError(), organizationId: "org-1")
        expectThrows(result, NotConnectedError())
        #expect(try h.eventCount() == 0)
        #expect(try h.local(view.id!)?.decrypt(userKey: h.userKey).login?.password == "pw-0", "local copy unchanged")
    }

    @Test func updateCipher_offlineFallback_unknownError() async throws {
        let (h, view, result) = try await update(failing: UnknownError())
        _ = try savedSequence(result)
        #expect(try h.pending(view.id!)?.changeType == .update)
    }

    @Test func updateCipher_offlineFallback_responseValidationError5xx() async throws {
        let (h, view, result) = try await update(failing: HTTPStatusError(status: 502))
        _ = try savedSequence(result)
        #expect(try h.pending(view.id!)?.changeType == .update)
    }

    @Test func updateCipher_offlineFallback_disabledByFeatureFlag() async throws {
        let (h, view, result) = try await update(failing: NotConnectedError(), flags: Self.disabledChanges)
        expectThrows(result, NotConnectedError())
        #expect(try h.eventCount() == 0)
        #expect(try h.local(view.id!)?.decrypt(userKey: h.userKey).login?.password == "pw-0")
    }

    @Test func updateCipher_offlineFallback_disabledByResolutionFlag() async throws {
        let (h, view, result) = try await update(failing: NotConnectedError(), flags: Self.disabledResolution)
        expectThrows(result, NotConnectedError())
        #expect(try h.eventCount() == 0)
        #expect(try h.local(view.id!)?.decrypt(userKey: h.userKey).login?.password == "pw-0")
    }

    @Test func updateCipher_serverError_rethrows() async throws {
        let (h, _, result) = try await update(failing: TestServerError())
        expectThrows(result, TestServerError())
        #expect(try h.eventCount() == 0)
    }

    @Test func updateCipher_responseValidationError4xx_rethrows() async throws {
        let (h, _, result) = try await update(failing: HTTPStatusError(status: 400))
        expectThrows(result, HTTPStatusError(status: 400))
        #expect(try h.eventCount() == 0)
    }

    // MARK: softDeleteCipher

    @Test func softDeleteCipher_offlineFallback() async throws {
        let (h, view, result) = try await softDelete(failing: NotConnectedError())
        _ = try savedSequence(result)
        let change = try #require(try h.pending(view.id!))
        #expect(change.changeType == .softDelete)
        let local = try #require(try h.local(view.id!))
        #expect(local.deletedDate == h.clock.now.bitwardenDate, "in the trash locally")
    }

    @Test func softDeleteCipher_offlineFallback_cleansUpOfflineCreatedCipher() async throws {
        let h = try Harness()
        h.server.fail(with: NotConnectedError())
        guard case .savedOffline(let created?, _) = try await h.repository().addCipher(Harness.login("Temp", password: "x")) else {
            Issue.record("add was not saved offline"); return
        }
        let result = try await h.repository().softDeleteCipher(try created.decrypt(userKey: h.userKey))
        guard case .discardedLocally = result else { Issue.record("\(result)"); return }
        #expect(try h.store.projection(userId: h.userId).pending.isEmpty)
        #expect(try h.local(created.id!) == nil)
        #expect(!h.server.calls.contains("softDelete"))
    }

    @Test func softDeleteCipher_offlineFallback_orgCipher_throws() async throws {
        let (h, view, result) = try await softDelete(failing: NotConnectedError(), organizationId: "org-1")
        expectThrows(result, NotConnectedError())
        #expect(try h.eventCount() == 0)
        #expect(try h.local(view.id!)?.deletedDate == nil)
    }

    @Test func softDeleteCipher_offlineFallback_unknownError() async throws {
        let (h, view, result) = try await softDelete(failing: UnknownError())
        _ = try savedSequence(result)
        #expect(try h.pending(view.id!)?.changeType == .softDelete)
    }

    @Test func softDeleteCipher_offlineFallback_responseValidationError5xx() async throws {
        let (h, view, result) = try await softDelete(failing: HTTPStatusError(status: 504))
        _ = try savedSequence(result)
        #expect(try h.pending(view.id!)?.changeType == .softDelete)
    }

    @Test func softDeleteCipher_offlineFallback_disabledByFeatureFlag() async throws {
        let (h, view, result) = try await softDelete(failing: NotConnectedError(), flags: Self.disabledChanges)
        expectThrows(result, NotConnectedError())
        #expect(try h.eventCount() == 0)
        #expect(try h.local(view.id!)?.deletedDate == nil)
    }

    @Test func softDeleteCipher_offlineFallback_disabledByResolutionFlag() async throws {
        let (h, view, result) = try await softDelete(failing: NotConnectedError(), flags: Self.disabledResolution)
        expectThrows(result, NotConnectedError())
        #expect(try h.eventCount() == 0)
        #expect(try h.local(view.id!)?.deletedDate == nil)
    }

    @Test func softDeleteCipher_serverError_rethrows() async throws {
        let (h, _, result) = try await softDelete(failing: TestServerError())
        expectThrows(result, TestServerError())
        #expect(try h.eventCount() == 0)
    }

    @Test func softDeleteCipher_responseValidationError4xx_rethrows() async throws {
        let (h, _, result) = try await softDelete(failing: HTTPStatusError(status: 409))
        expectThrows(result, HTTPStatusError(status: 409))
        #expect(try h.eventCount() == 0)
    }

    // MARK: beyond the seed tables

    /// An online edit of an item with pending offline state never goes straight to the server
    /// (that used to clear the pending edit and skip the resolver's rules): it joins the
    /// pending change, which is resolved at once.
    @Test func onlineEdit_afterOfflineEdit_joinsPendingChangeAndIsResolvedAtOnce() async throws {
        let (h, view, _) = try await update(failing: NotConnectedError(), newPassword: "pw-1")
        var again = try #require(try h.local(view.id!)).decrypt(userKey: h.userKey)
        again.login?.password = "pw-2"
        let result = try await h.repository().updateCipher(again)
        guard case .resolved(_, let report) = result else { Issue.record("\(result)"); return }
        #expect(report.outcome == .pushed)
        #expect(try h.pending(view.id!) == nil)
        let events = try h.store.events(userId: h.userId, cipherId: view.id!)
        #expect(events.map(\.type) == [.updated, .updated, .pushed, .resolved])
        #expect(events.filter { $0.operation?.passwordChanged == true }.count == 2)
    }

    @Test func lockedVault_operationsThrowVaultLocked() async throws {
        let h = try Harness()
        let view = try await h.seedSynced("Bank")
        h.store.lock(userId: h.userId)
        await #expect(throws: OfflineSyncError.vaultLocked(userId: h.userId)) { try await h.repository().updateCipher(view) }
        await #expect(throws: OfflineSyncError.vaultLocked(userId: h.userId)) { try await h.repository().addCipher(view) }
        await #expect(throws: OfflineSyncError.vaultLocked(userId: h.userId)) { try await h.repository().deleteCipher(id: view.id!) }
        #expect(h.server.calls.isEmpty)
        #expect(OfflineSyncError.vaultLocked(userId: "u").description.contains("unlock"))
    }
}

extension Date {
    var bitwardenDate: BitwardenDate { BitwardenDate(self) }
}
