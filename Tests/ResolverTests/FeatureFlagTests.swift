import BitwardenEmulator
import Foundation
@_spi(Tools) import OfflineSync
import Testing
import VaultModel

/// The feature flags apply to items with pending state (pending creates included): with
/// offline saving turned off nothing new is saved offline; an item's pending state is resolved
/// first, then the operation goes online like for any item.
@Suite(.serialized) struct FeatureFlagTests {
    typealias H = ResolverHarness
    static let offlineOff = OfflineSyncFlags(offlineChanges: false, resolution: true)

    @Test func offlineSavingOff_pendingItemIsResolvedFirst_thenTheEditGoesOnline() async throws {
        let h = try await H.make()
        defer { Task { await h.stop() } }
        let view = try await h.seedSynced("Bank")
        let saved = try await h.editOffline(view, password: "pw-1")
        var edited = saved
        edited.login?.password = "pw-2"
        h.clock.advance(by: 60)
        let result = try await h.repository(flags: Self.offlineOff).updateCipher(edited)
        guard case .online = result else { Issue.record("\(result)"); return }
        #expect(try h.pendingCount() == 0)
        let server = try #require(try h.serverItems(named: "Bank").first)
        #expect(server.login?.password == "pw-2")
        #expect(server.passwordHistory?.compactMap(\.password).prefix(2) == ["pw-1", "pw-0"])
        #expect(try h.events(view.id!) == [.updated, .pushed, .resolved], "no new offline save")
    }

    @Test func offlineSavingOff_serverUnreachable_throwsAndSavesNothing() async throws {
        let h = try await H.make()
        defer { Task { await h.stop() } }
        let view = try await h.seedSynced("Bank")
        let saved = try await h.editOffline(view, password: "pw-1")
        let before = try h.allEventTypes()
        var edited = saved
        edited.login?.password = "pw-2"
        h.goOffline()
        await #expect(throws: OfflineSyncError.self) { try await h.repository(flags: Self.offlineOff).updateCipher(edited) }
        h.goOnline()
        #expect(try h.allEventTypes() == before)
        #expect(try h.local(view.id!)?.login?.password == "pw-1", "the earlier offline edit is still the local copy")
    }

    @Test func offlineSavingOff_pendingCreateIsSentThenDeletedOnline() async throws {
        let h = try await H.make()
        defer { Task { await h.stop() } }
        h.goOffline()
        guard case .savedOffline(let created?, _) = try await h.repository().addCipher(H.login("Note", password: "p")) else {
            Issue.record("expected an offline create"); return
        }
        h.goOnline()
        let result = try await h.repository(flags: Self.offlineOff).deleteCipher(id: created.id!)
        guard case .online = result else { Issue.record("\(result)"); return }
        #expect(try h.pendingCount() == 0)
        #expect(try h.serverItems(named: "Note").isEmpty)
    }
}
