import Foundation
import Testing
@_spi(Tools) import OfflineSync
import VaultLogKit
import VaultModel

/// `OfflineVault.restore(id:)`: offline it is saved on the device and the next sync takes the
/// item out of the server's trash; an item not in the trash is refused with a typed error.
@Suite struct RestoreVaultTests {
    typealias H = VaultHarness

    @Test func restoreOffline_thenSync_itemActiveOnTheServer() async throws {
        let h = try await H.make()
        let vault = try h.openVault()
        try await vault.logIn(email: h.email, masterPassword: h.password)
        guard case .online(let created?) = try await vault.save(H.login("Bank", password: "first")) else {
            Issue.record("the first save did not reach the server"); return
        }
        let key = try vault.store.userKey(userId: vault.userId!)
        let id = try #require(created.id)
        h.clock.advance(by: 10)
        #expect(try await vault.trash(created.decrypt(userKey: key)).isOffline == false)
        #expect(h.emulator.cipher(id: id)?.deletedDate != nil)
        h.clock.advance(by: 10)
        h.goOffline()
        let result = try await vault.restore(id: id)
        #expect(result.isOffline)
        #expect(try vault.items().first { $0.id == id }?.view.deletedDate == nil)
        #expect(try vault.items().first { $0.id == id }?.pending != nil)
        h.goOnline()
        #expect(try await vault.sync().isCurrent)
        #expect(h.emulator.cipher(id: id)?.deletedDate == nil)
        #expect(try vault.items().first { $0.id == id }?.pending == nil)

        await #expect { try await vault.restore(id: id) } throws: { error in
            guard let error = error as? VaultError else { return false }
            return error.kind == .notPossible && "\(error)".contains("not in the trash")
        }
    }
}
