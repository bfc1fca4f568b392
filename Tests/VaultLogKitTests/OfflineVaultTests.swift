import BitwardenAPI
import Foundation
@_spi(Tools) import OfflineSync
import Testing
import VaultCrypto
import VaultLogKit
import VaultModel

@Suite struct OfflineVaultTests {
    typealias H = VaultHarness

    /// The main feature: after a sync, the app can say which side was kept and what the backup
    /// is called; the report is read from the log, so it is still there after a relaunch, and a
    /// review mark (an event) hides it for good.
    @Test func conflictReport_namesTheBackupAndTheSideKept_survivesARelaunch_andAReviewMark() async throws {
        let h = try await H.make()
        var vault: OfflineVault? = try h.openVault()
        try await vault!.logIn(email: h.email, masterPassword: h.password)
        let key = try vault!.store.userKey(userId: vault!.userId!)
        guard case .online(let created?) = try await vault!.save(H.login("Bank", password: "first")) else {
            Issue.record("the first save did not reach the server"); return
        }
        var bank = try created.decrypt(userKey: key)
        h.clock.advance(by: 10)
        h.goOffline()
        bank.login?.password = "mine"
        #expect(try await vault!.save(bank).isOffline)
        try h.anotherDeviceEdits(bank.id!, key: key) { $0.login?.password = "theirs" }
        h.goOnline()

        let statuses = Collected(vault!.statusUpdates())
        let result = try await vault!.sync()
        #expect(result.isCurrent)
        #expect(await statuses.wait { $0.last?.phase == .idle && $0.last?.pendingCount == 0 }, "\(statuses.values)")
        statuses.stop()
        let phases = statuses.values.map(\.phase)
        #expect(phases.contains(.syncing(.sendingChanges(count: 1))), "\(phases)")
        #expect(phases.contains(.syncing(.fetching)), "\(phases)")
        #expect(statuses.values.first?.pendingCount == 1)

        let reports = try vault!.conflictReports()
        let backup = try #require(reports.first { $0.record.kind == .localVersionBackedUp }, "\(reports)")
        #expect(backup.itemName == "Bank")
        #expect(backup.backupName?.hasPrefix("Bank - ") == true, "\(backup)")
        #expect(backup.record.sideKept == .server)
        #expect(backup.summary.contains("“Bank”") && backup.summary.contains(backup.backupName!))
        let items = try vault!.items()
        #expect(items.first { $0.view.name == "Bank" }?.view.login?.password == "theirs")
        #expect(items.first { $0.view.name == backup.backupName }?.view.login?.password == "mine")

        // A relaunch, offline: the reports come back from the log.
        vault!.close()
        vault = nil
        h.goOffline()
        let relaunched = try h.openVault(seed: 2)
        try await relaunched.unlock(email: h.email, masterPassword: h.password)
        #expect(try relaunched.conflictReports() == reports)
        let last = try #require(reports.last)
        try await relaunched.markReviewed(through: last)
        #expect(try relaunched.conflictReports().isEmpty)
        #expect(try relaunched.reports(after: 0) == reports)
        relaunched.close()
        let third = try h.openVault(seed: 3)
        try await third.unlock(email: h.email, masterPassword: h.password)
        #expect(try third.conflictReports().isEmpty)
        third.close()
    }

    /// A dead letter: the sync still brings the other items' changes; "discard" puts the
    /// server's version in place and keeps the discarded one in the item's history.
    @Test func deadLetter_doesNotBlockOtherItems_andDiscardKeepsTheServerVersion() async throws {
        let h = try await H.make()
        let vault = try h.openVault { $0.maxAttempts = 2 }
        defer { vault.close() }
        try await vault.logIn(email: h.email, masterPassword: h.password)
        let userId = try #require(vault.userId)
        let key = try vault.store.userKey(userId: userId)
        let mail = try #require(try await vault.save(H.login("Mail", password: "pw-0")).cipher?.decrypt(userKey: key))
        let bank = try await h.deadLetter("Bank", editedTo: "mine", in: vault, syncs: 3)
        let status = vault.status()
        #expect(status.phase == .blocked, "\(status)")
        #expect(status.deadLetters.map(\.cipherId) == [bank.id!])
        // Another device changes Mail: the next sync brings it although Bank is stuck.
        try h.anotherDeviceEdits(mail.id!, key: key) { $0.login?.password = "from the desktop" }
        let result = try await vault.sync(force: true)
        #expect(result.isApplied && result.stillPending.map(\.cipherId) == [bank.id!])
        #expect(try vault.items().first { $0.id == mail.id }?.view.login?.password == "from the desktop")
        #expect(try vault.items().first { $0.id == bank.id }?.view.login?.password == "mine")

        h.emulator.faults.clear()
        guard case .serverVersionRestored = try await vault.discardChange(of: bank.id!) else {
            Issue.record("the server's version was not restored"); return
        }
        let after = try vault.items().first { $0.id == bank.id }
        #expect(after?.view.login?.password == "pw-0")
        #expect(after?.pending == nil)
        #expect(vault.status().phase == .idle)
        #expect(vault.status().deadLetters.isEmpty)
        // The discarded version is still in the item's history.
        let history = try vault.store.events(userId: userId, cipherId: bank.id!)
        #expect(try history.compactMap { try $0.operation?.cipher.decrypt(userKey: key).login?.password }.contains("mine"))
        #expect(try vault.conflictReports().contains { $0.record.kind == .discarded && $0.itemName == "Bank" })
    }

    /// "Save as new item": the waiting version becomes an item of its own, the original gets
    /// the server's version; nothing is pending and nothing is lost.
    @Test func deadLetter_savedAsANewItem_keepsBothVersions() async throws {
        let h = try await H.make()
        let vault = try h.openVault { $0.maxAttempts = 1 }
        defer { vault.close() }
        try await vault.logIn(email: h.email, masterPassword: h.password)
        let bank = try await h.deadLetter("Bank", editedTo: "mine", in: vault, syncs: 1)
        #expect(vault.status().deadLetters.map(\.cipherId) == [bank.id!])
        h.emulator.faults.clear()
        #expect(try await vault.saveAsNewItem(bank.id!).isOffline == false)
        let items = try vault.items()
        #expect(items.first { $0.id == bank.id }?.view.login?.password == "pw-0")
        #expect(items.first { $0.view.name == "Bank (copy)" }?.view.login?.password == "mine", "\(items.map { ($0.view.name, $0.view.login?.password) })")
        #expect(items.allSatisfy { $0.pending == nil })
        await #expect(throws: VaultError.self) { try await vault.saveAsNewItem(bank.id!) }
    }

    /// Cancelling a sync's task ends it with `CancellationError`, not "server unavailable".
    @Test func cancelledSync_throwsCancellationError() async throws {
        let h = try await H.make()
        let vault = try h.openVault()
        defer { vault.close() }
        try await vault.logIn(email: h.email, masterPassword: h.password)
        h.emulator.faults.setLatency(5)
        let sync = Task { try await vault.sync(force: true) }
        try await Task.sleep(for: .milliseconds(300))
        sync.cancel()
        await #expect(throws: CancellationError.self) { try await sync.value }
    }

    /// Errors an app can switch on, with texts for its user (no command-line advice).
    @Test func errors_areTypedWithTextsForTheUser() async throws {
        let h = try await H.make()
        let vault = try h.openVault()
        defer { vault.close() }
        // Locked: nothing unlocked yet.
        let locked = await #expect(throws: VaultError.self) { try await vault.save(H.login("A", password: "p")) }
        #expect(locked?.kind == .locked)
        // Unknown account and wrong password, offline.
        let unknown = await #expect(throws: VaultError.self) { try await vault.unlock(email: "nobody@example.com", masterPassword: "x") }
        #expect(unknown?.kind == .unknownAccount)
        try await vault.logIn(email: h.email, masterPassword: h.password)
        vault.lock()
        #expect(vault.status().phase == .locked)
        let wrong = await #expect(throws: VaultError.self) { try await vault.unlock(email: h.email, masterPassword: "wrong") }
        #expect(wrong?.kind == .wrongPassword)
        try await vault.unlock(email: h.email, masterPassword: h.password)
        // Offline: the sync says so and the status waits for the network.
        h.goOffline()
        let offline = await #expect(throws: VaultError.self) { try await vault.sync(force: true) }
        #expect(offline?.kind == .offline)
        #expect(vault.status().phase == .waitingForNetwork)
        h.goOnline()
        // Rejected by the server, with its message.
        h.failNext(1, "POST", "/api/ciphers", status: 400)
        let rejected = await #expect(throws: VaultError.self) { try await vault.save(H.login("B", password: "p")) }
        #expect(rejected?.kind == .rejected)
        for error in [locked, unknown, wrong, offline].compactMap({ $0 }) {
            let text = error.localizedDescription
            #expect(!text.contains("vaultlog") && !text.contains("HTTP") && !text.contains("/api/") && !text.isEmpty, "\(text)")
        }
        #expect(rejected?.serverMessage != nil && rejected?.localizedDescription.hasPrefix("The server didn't accept the change") == true)
        #expect(offline?.localizedDescription.contains("saved on this device") == true)
        // The session ends: the next sync asks for a login, and the status says so.
        vault.client.setTokens(TokenSet(accessToken: "expired", refreshToken: "revoked", expiresAt: .distantPast))
        let login = await #expect(throws: VaultError.self) { try await vault.sync(force: true) }
        #expect(login?.kind == .needsLogin)
        #expect(vault.status().phase == .needsLogin)
    }

    /// The token store gets the session at login and every refreshed token, and a relaunch
    /// that unlocks offline syncs with the saved session (no online login).
    @Test func tokens_areSavedAtLoginAndRefresh_andRestoredAtUnlock() async throws {
        let h = try await H.make()
        let vault = try h.openVault()
        let userId = try await vault.logIn(email: h.email, masterPassword: h.password)
        let atLogin = try #require(try await h.tokens.tokens(userId: userId))
        #expect(atLogin == vault.client.tokens)
        // The access token expires: the next call refreshes it, and the store gets the new one.
        var expired = atLogin
        expired.expiresAt = .distantPast
        vault.client.setTokens(expired)
        _ = try await vault.sync(force: true)
        let refreshed = try #require(vault.client.tokens)
        #expect(refreshed.accessToken != atLogin.accessToken)
        let saved = await pollValue { try? await h.tokens.tokens(userId: userId) }
        #expect(saved == refreshed)
        vault.close()

        let relaunched = try h.openVault(seed: 2)
        defer { relaunched.close() }
        try await relaunched.unlock(email: h.email, masterPassword: h.password)
        #expect(relaunched.client.tokens == refreshed)
        #expect(try await relaunched.sync(force: true).isCurrent)
    }
}

/// Polls `read` until it gives a value (up to 5 s).
func pollValue<T: Sendable>(_ read: @Sendable () async -> T?) async -> T? {
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            if let value = await read() { return value }
            try? await Task.sleep(for: .milliseconds(10))
        }
    return await read()
}
