import Foundation
@_spi(Tools) import OfflineSync
import Testing
import VaultLogKit
import VaultModel

/// A store file put back to an older copy of itself is consistent and sealed: nothing in the
/// store can tell. The position the vault keeps in the app's anchor store (the keychain) can:
/// the unlock fails instead of syncing as if the edits saved since had never been made.
@Suite struct LogAnchorTests {
    typealias H = VaultHarness

    func dataFile(_ h: H) -> URL { URL(fileURLWithPath: h.dir.path).appendingPathComponent("data.mdb") }

    @Test func aStorePutBackToAnOlderCopy_failsTheUnlock_andTheNewestCopyUnlocks() async throws {
        let h = try await H.make()
        let anchors = InMemoryLogAnchorStore()
        var vault = try h.openVault(anchors: anchors)
        try await vault.logIn(email: h.email, masterPassword: h.password)
        h.goOffline()
        #expect(try await vault.save(H.login("Bank", password: "first")).isOffline)
        vault.close()
        let older = try Data(contentsOf: dataFile(h))

        vault = try h.openVault(seed: 2, anchors: anchors)  // another seed: another new item id
        try await vault.unlock(email: h.email, masterPassword: h.password)
        #expect(try await vault.save(H.login("Mail", password: "second")).isOffline)
        try await vault.saveLogAnchor()
        let userId = try #require(vault.userId)
        let saved = try #require(try await anchors.anchor(userId: userId))
        #expect(try vault.store.logPosition(userId: userId) == saved)
        let pendingNewer = try vault.store.pendingCount(userId: userId)
        #expect(pendingNewer == 2, "\(pendingNewer) pending before the close")
        vault.close()
        let newer = try Data(contentsOf: dataFile(h))

        try older.write(to: dataFile(h))
        vault = try h.openVault(anchors: anchors)
        do {
            try await vault.unlock(email: h.email, masterPassword: h.password)
            Issue.record("the older copy unlocked")
        } catch let error as VaultError {
            #expect(error.kind == .corruptStore, "\(error)")
            #expect(error.detail.contains("older than the app last saw it"), "\(error.detail)")
        }
        #expect(vault.userId == nil)
        #expect(!vault.store.isUnlocked(userId: userId), "the keys of a rolled-back store are not kept")
        vault.close()

        try newer.write(to: dataFile(h))
        vault = try h.openVault(anchors: anchors)
        defer { vault.close() }
        try await vault.unlock(email: h.email, masterPassword: h.password)
        let pending = try vault.store.pendingCount(userId: userId)
        #expect(pending == 2, "\(pending) pending")
    }

    /// The vault keeps the anchor up to date by itself after the commits it sees (its own and
    /// other processes'), only ever moving it forward.
    @Test func theAnchor_followsTheStoresCommits() async throws {
        let h = try await H.make()
        let anchors = InMemoryLogAnchorStore()
        let vault = try h.openVault(anchors: anchors)
        defer { vault.close() }
        try await vault.logIn(email: h.email, masterPassword: h.password)
        let userId = try #require(vault.userId)
        h.goOffline()
        for n in 0..<3 { #expect(try await vault.save(H.login("Item \(n)", password: "pw-\(n)")).isOffline) }
        let position = try #require(try vault.store.logPosition(userId: userId))
        var followed = false
        for _ in 0..<500 where !followed {
            followed = try await anchors.anchor(userId: userId) == position
            if !followed { try await Task.sleep(for: .milliseconds(20)) }
        }
        let anchor = try await anchors.anchor(userId: userId)
        #expect(followed, "the anchor is \(String(describing: anchor)), the store at \(position)")
        // A position behind the saved one (another process's, written late) does not replace it.
        let ahead = LogPosition(lastSequence: position.lastSequence + 5, chain: position.chain)
        try await anchors.setAnchor(ahead, userId: userId)
        try await vault.saveLogAnchor()
        #expect(try await anchors.anchor(userId: userId) == ahead)
    }
}
