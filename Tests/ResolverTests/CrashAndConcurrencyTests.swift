import Foundation
import Synchronization
import Testing
import VaultCrypto
import VaultModel
@_spi(Tools) @testable import OfflineSync
import VaultLogTesting

/// Beyond the original design: crash at every step, lost responses, another device writing between our
/// read and our write, password overflow, dead letters, concurrency.
@Suite struct CrashAndConcurrencyTests {
    typealias H = ResolverHarness

    /// A decision-matrix row set up on a fresh harness; `check` asserts the final state.
    struct Row: Sendable, CustomTestStringConvertible {
        let name: String
        let setUp: @Sendable (H) async throws -> String
        let check: @Sendable (H, String) throws -> Void
        var testDescription: String { name }
    }

    static func offlineCreate(_ h: H, name: String) async throws -> String {
        h.clock.advance(by: 60)
        h.goOffline()
        defer { h.goOnline() }
        guard case .savedOffline(let saved?, _) = try await h.repository().addCipher(H.login(name, password: "pw-new")) else {
            throw HarnessError("expected an offline create")
        }
        return saved.id!
    }

    static let rows: [Row] = [
        Row(name: "create", setUp: { h in try await offlineCreate(h, name: "Fresh") }, check: { h, _ throws in
            #expect(try h.serverItems(named: "Fresh").count == 1)
        }),
        Row(name: "update, no conflict", setUp: { h in
            let v = try await h.seedSynced("Bank"); try await h.editOffline(v, password: "mine"); return v.id!
        }, check: { h, id throws in
            #expect(try h.serverItems(named: "Bank").map { $0.login?.password } == ["mine"])
        }),
        Row(name: "update, soft conflict", setUp: { h in
            var v = try await h.seedSynced("Bank")
            for n in 1...4 { v = try await h.editOffline(v, password: "pw-\(n)") }
            return v.id!
        }, check: { h, id throws in
            let items = try h.serverItems(named: "Bank")
            #expect(items.count == 2)
            #expect(items.first { $0.id == id }?.login?.password == "pw-4")
        }),
        Row(name: "update, local newer", setUp: { h in
            let v = try await h.seedSynced("Bank")
            try h.anotherDeviceEdits(v.id!) { $0.login?.password = "other" }
            try await h.editOffline(v, password: "mine")
            return v.id!
        }, check: { h, id throws in
            let items = try h.serverItems(named: "Bank")
            #expect(items.count == 2)
            #expect(items.first { $0.id == id }?.login?.password == "mine")
            #expect(items.first { $0.id != id }?.login?.password == "other")
        }),
        Row(name: "update, server newer", setUp: { h in
            let v = try await h.seedSynced("Bank")
            try await h.editOffline(v, password: "mine")
            try h.anotherDeviceEdits(v.id!) { $0.login?.password = "other" }
            return v.id!
        }, check: { h, id throws in
            let items = try h.serverItems(named: "Bank")
            #expect(items.count == 2)
            #expect(items.first { $0.id == id }?.login?.password == "other")
            #expect(items.first { $0.id != id }?.login?.password == "mine")
        }),
        Row(name: "update, 404 re-create", setUp: { h in
            let v = try await h.seedSynced("Bank")
            try await h.editOffline(v, password: "mine")
            try await h.client.deleteCipher(id: v.id!)
            return v.id!
        }, check: { h, _ throws in
            #expect(try h.serverItems(named: "Bank").map { $0.login?.password } == ["mine"])
        }),
        Row(name: "soft delete with edits", setUp: { h in
            let v = try await h.seedSynced("Bank")
            let edited = try await h.editOffline(v, password: "mine")
            h.clock.advance(by: 60)
            h.goOffline()
            _ = try await h.repository().softDeleteCipher(edited)
            h.goOnline()
            return v.id!
        }, check: { h, id throws in
            let item = try #require(h.emulator.cipher(id: id))
            #expect(item.deletedDate != nil)
            #expect(try item.decrypt(userKey: h.userKey).login?.password == "mine")
        }),
        Row(name: "hard delete", setUp: { h in
            let v = try await h.seedSynced("Bank")
            h.clock.advance(by: 60)
            h.goOffline()
            _ = try await h.repository().deleteCipher(id: v.id!)
            h.goOnline()
            return v.id!
        }, check: { h, id throws in
            #expect(h.emulator.cipher(id: id) == nil)
        }),
    ]

    /// For each row and each server side effect k: crash right after effect k (before its
    /// outcome event), drop all in-memory state, reopen the store, resolve again. Every crash
    /// point ends with the right server state, one backup at most, nothing pending.
    @Test(arguments: rows + restoreRows)
    func crashAfterEveryServerEffect_resolvesExactlyOnce(row: Row) async throws {
        var crashPoint = 0
        while true {
            let h = try await H.make(seed: UInt64(crashPoint + 1))
            let id = try await row.setUp(h)
            let before = try h.serverItems().count
            let effects = Mutex(0)
            let target = crashPoint
            let crashed: Bool
            do {
                try await h.resolver(server: EffectObservingServer(h.client) { _ in
                    let n = effects.withLock { $0 += 1; return $0 }
                    if n == target + 1 { throw SimulatedCrash() }
                }).processPendingChanges(userId: h.userId)
                crashed = false
            } catch is SimulatedCrash {
                crashed = true
            }
            try h.reopen()
            let report = try await h.resolver().processPendingChanges(userId: h.userId)
            #expect(report.remainingCount == 0, "crash point \(crashPoint): \(report.items)")
            #expect(try h.pendingCount() == 0, "crash point \(crashPoint)")
            try row.check(h, id)
            // Never more than one new item per role: at most one backup plus the item itself.
            #expect(try h.serverItems().count <= before + 2, "crash point \(crashPoint)")
            await h.stop()
            if !crashed { break }
            crashPoint += 1
            if crashPoint > 10 { Issue.record("more than 10 server effects for \(row.name)"); break }
        }
    }

    @Test func applyThenDropResponse_onCreate_makesNoDuplicate() async throws {
        let h = try await H.make()
        let tempId = try await Self.offlineCreate(h, name: "Fresh")
        h.dropResponseAfterApply(1, "POST", "/api/ciphers")
        #expect(try await h.resolver().processPendingChanges(userId: h.userId).items.map(\.outcome) == [.failed])
        #expect(try h.serverItems(named: "Fresh").count == 1)   // the server did apply it
        h.clock.advance(by: 3600)
        #expect(try await h.resolver().processPendingChanges(userId: h.userId).items.map(\.outcome) == [.created])
        #expect(try h.serverItems(named: "Fresh").count == 1)
        #expect(try h.pending(tempId) == nil)
    }

    @Test func applyThenDropResponse_onRepositoryCreate_isFoundByTheResolver() async throws {
        let h = try await H.make()
        h.dropResponseAfterApply(1, "POST", "/api/ciphers")
        let result = try await h.repository().addCipher(H.login("Fresh", password: "pw"))
        #expect(result.isOffline)
        #expect(try await h.resolver().processPendingChanges(userId: h.userId).items.map(\.outcome) == [.created])
        #expect(try h.serverItems(named: "Fresh").count == 1)
    }

    @Test func applyThenDropResponse_onBackup_makesNoSecondBackup() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await h.editOffline(view, password: "mine")
        try h.anotherDeviceEdits(view.id!) { $0.login?.password = "other" }
        h.dropResponseAfterApply(1, "POST", "/api/ciphers")
        #expect(try await h.resolver().processPendingChanges(userId: h.userId).items.map(\.outcome) == [.failed])
        h.clock.advance(by: 3600)
        #expect(try await h.resolver().processPendingChanges(userId: h.userId).items.map(\.outcome) == [.serverKept])
        let items = try h.serverItems(named: "Bank")
        #expect(items.count == 2)
        #expect(items.filter { $0.login?.password == "mine" }.count == 1)
    }

    @Test func anotherDeviceWritesBetweenReadAndWrite_staleAnswerIsDecidedAgain() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        try await h.editOffline(view, password: "mine")
        let server = InterceptingServer(h.client, on: "afterGet") {
            try h.anotherDeviceEdits(view.id!, advance: 3600) { $0.login?.password = "other" }
        }
        let report = try await h.resolver(server: server).processPendingChanges(userId: h.userId)
        // First read: no conflict → PUT → 400 out of date → read again: server newer → keep it.
        #expect(report.items.map(\.outcome) == [.serverKept])
        let items = try h.serverItems(named: "Bank")
        #expect(items.first { $0.id == view.id }?.login?.password == "other")
        #expect(items.first { $0.id != view.id }?.login?.password == "mine")
        #expect(try h.pendingCount() == 0)
    }

    @Test func eightOfflinePasswordChanges_everyPasswordRecoverable() async throws {
        let h = try await H.make()
        var view = try await h.seedSynced("Bank", password: "original")
        let typed = (1...8).map { "offline-\($0)" }
        for password in typed { view = try await h.editOffline(view, password: password) }
        #expect(try await h.resolver().processPendingChanges(userId: h.userId).items.map(\.outcome) == [.localKept])
        var recoverable = Set<String>()
        for item in try h.serverItems() {
            if let password = item.login?.password { recoverable.insert(password) }
            for entry in item.passwordHistory ?? [] { if let password = entry.password { recoverable.insert(password) } }
        }
        for password in ["original"] + typed { #expect(recoverable.contains(password), "\(password) was lost") }
        #expect(try h.serverItems(named: "Bank - offline passwords").count == 1)
    }

    @Test func deadLetter_afterMaxAttempts_othersResolve_syncListsIt() async throws {
        let h = try await H.make()
        let stuck = try await h.seedSynced("Stuck")
        let fine = try await h.seedSynced("Fine")
        try await h.editOffline(stuck, password: "s-1")
        try await h.editOffline(fine, password: "f-1")
        h.failNext(1000, "GET", "/api/ciphers/\(stuck.id!)")
        let resolver = h.resolver { $0.maxAttempts = 3 }
        var outcomes: [[ItemReport.Outcome]] = []
        for _ in 0..<4 {
            outcomes.append(try await resolver.processPendingChanges(userId: h.userId).items.map(\.outcome))
            h.clock.advance(by: 3600)
        }
        #expect(outcomes == [[.failed, .pushed], [.failed], [.deadLetter], [.skipped]])
        let pending = try #require(try h.pending(stuck.id!))
        #expect(pending.isDeadLetter)
        #expect(try resolver.status(userId: h.userId).map(\.cipherId) == [stuck.id!])
        let result = try await h.syncService { $0.maxAttempts = 3 }.fetchSync(userId: h.userId)
        // Applied around the dead letter, which keeps its local copy and is listed for a decision.
        #expect(result.isApplied)
        #expect(result.stillPending.map(\.cipherId) == [stuck.id!])
        #expect(result.stillPending.first?.state == .deadLetter(attempts: 3))
        #expect(result.stillPending.first?.needsDecision == true)
        #expect(result.stillPending.first?.lastError?.contains("HTTP 500") == true, "\(result.stillPending)")
        #expect(try h.local(stuck.id!)?.login?.password == "s-1")
        #expect(try h.allEventTypes().last == .syncApplied)
        // Retried on demand, it resolves once the server answers.
        h.clearFaults()
        try await resolver.retryDeadLetters(userId: h.userId)
        #expect(try await resolver.processPendingChanges(userId: h.userId).items.map(\.outcome) == [.pushed])
    }

    @Test func concurrentResolution_resolvesEverything_keepingPerItemOrder() async throws {
        let h = try await H.make()
        var ids: [String] = []
        for n in 0..<12 {
            var view = try await h.seedSynced("Item \(n)")
            view = try await h.editOffline(view, password: "p-\(n)-1", advance: 1)
            try await h.editOffline(view, password: "p-\(n)-2", advance: 1)
            ids.append(view.id!)
        }
        let report = try await h.resolver { $0.concurrency = 6 }.processPendingChanges(userId: h.userId)
        #expect(report.items.count == 12)
        #expect(report.items.allSatisfy { $0.outcome == .pushed })
        for (n, id) in ids.enumerated() {
            #expect(h.emulator.cipher(id: id).flatMap { try? $0.decrypt(userKey: h.userKey).login?.password } == "p-\(n)-2")
            let types = try h.events(id)
            #expect(types.suffix(2) == [.pushed, .resolved])
        }
    }

    @Test func laterEditWithTheTemporaryId_followsTheIdMap() async throws {
        let h = try await H.make()
        let tempId = try await Self.offlineCreate(h, name: "Fresh")
        _ = try await h.resolver().processPendingChanges(userId: h.userId)
        let serverId = try #require(try h.store.projection(userId: h.userId).idMap[tempId])
        // The UI still holds the temporary id.
        var view = H.login("Fresh", password: "changed")
        view.id = tempId
        h.clock.advance(by: 60)
        let result = try await h.repository().updateCipher(view)
        #expect(!result.isOffline)
        #expect(h.emulator.cipher(id: serverId).flatMap { try? $0.decrypt(userKey: h.userKey).login?.password } == "changed")
        #expect(try h.serverItems(named: "Fresh").count == 1)
    }
}
