import Foundation
import Synchronization
import Testing
import VaultLogTesting
import VaultModel
@_spi(Tools) @testable import OfflineSync

/// `appendOutcomes` covers only what it saw: when the item (or folder) was changed after the
/// versions the outcomes were decided on, the finishing events and the local effects that hold
/// only for those versions (`localChanges`, `ifCurrent`) are left out.
@Suite struct OutcomeAppendTests {
    private func discard(_ h: Harness, _ folderId: String, decidedThrough sequence: UInt64) async throws -> (VaultLogStore.OutcomeAppend, Bool) {
        let ran = Mutex(false)
        let at = BitwardenDate(h.clock.now)
        let written = try await h.store.appendOutcomes(
            userId: h.userId, cipherId: folderId, coveredThrough: sequence,
            events: [.init(cipherId: folderId, type: .folderChangeDiscarded, body: .outcome(OutcomeBody(at: at))),
                     .init(cipherId: folderId, type: .folderResolved, body: .outcome(OutcomeBody(at: at)))],
            localChanges: [], ifCurrent: { _ in ran.withLock { $0 = true } })
        return (written, ran.withLock { $0 })
    }

    @Test func aFolderRenamedAfterTheDecision_keepsItsPendingChange_andTheLocalEffectsDoNotRun() async throws {
        let h = try Harness()
        let repository = h.repository()
        let id = try await repository.createFolder(name: "Trips")
        let decided = try #require(try h.store.projection(userId: h.userId).folders?[id]?.versionSequences.last)
        try await repository.renameFolder(id: id, name: "Travel")
        let events = try h.eventCount()

        let (stale, ranStale) = try await discard(h, id, decidedThrough: decided)
        #expect(stale.superseded)
        #expect(!ranStale)
        #expect(try h.eventCount() == events)
        #expect(try h.store.projection(userId: h.userId).folders?[id]?.versionSequences.count == 2)

        let latest = try #require(try h.store.projection(userId: h.userId).folders?[id]?.versionSequences.last)
        let (current, ranCurrent) = try await discard(h, id, decidedThrough: latest)
        #expect(!current.superseded)
        #expect(ranCurrent)
        #expect(try h.store.projection(userId: h.userId).folders == nil)
    }
}
