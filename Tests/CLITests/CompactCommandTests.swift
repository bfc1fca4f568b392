import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import Testing
import VaultCrypto
import VaultModel
import VaultLogTesting
import VaultLogTestSupport

/// A store with a long resolved history (and optionally pending items), for `compact`.
final class HistoryFixture: Sendable {
    let dir = TemporaryDirectory("vaultlog-compact", create: true)
    let userKey = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 51))
    static let userId = "user-h"
    var store: String { dir.file("store") }
    var keyFile: String { dir.file("user.key") }
    var keyArgs: [String] { ["--user-key-file", keyFile] }

    /// `items` items with `edits` resolved edits each (an update then `resolved`, a minute
    /// apart, starting 2026-01-01), and `pending` items edited offline and not resolved: after
    /// the edit round `pendingAfter` (default: after the last one). Each round starts
    /// `roundSeconds` after the previous one, the first at `start`.
    init(items: Int = 20, edits: Int = 10, pending: Int = 0, pendingAfter: Int? = nil,
         start: Date = Date(timeIntervalSince1970: 1_767_225_600), roundSeconds: TimeInterval = 0) throws {
        let clock = ManualClock(start)
        var options = VaultLogStoreOptions()
        options.dependencies = .deterministic(seed: 8, clock: clock)
        let store = try VaultLogStore(path: dir.file("store"), options: options)
        defer { store.close() }
        store.unlock(userId: Self.userId, userKey: userKey)
        let view = CipherView(type: .login, name: "Item", notes: nil, login: LoginView(username: "u", password: "pw"))
        let cipher = try view.encrypt(userKey: userKey, random: SeededRandomSource(seed: 2))
        for edit in 0..<edits {
            var batch: [VaultLogStore.PlannedEvent] = []
            for item in 0..<items {
                clock.advance(by: 60)
                let at = BitwardenDate(clock.now)
                batch.append(.init(cipherId: "item-\(item)", type: .updated,
                                   body: .operation(OperationBody(cipher: cipher, passwordChanged: edit % 3 == 0, baseRevisionDate: at, at: at))))
                batch.append(.init(cipherId: "item-\(item)", type: .resolved, body: .outcome(OutcomeBody(at: at))))
            }
            try store.append(userId: Self.userId, events: batch)
            clock.advance(by: roundSeconds)
            if edit + 1 == (pendingAfter ?? edits) {
                for item in 0..<pending {
                    clock.advance(by: 60)
                    let at = BitwardenDate(clock.now)
                    try store.append(userId: Self.userId, cipherId: "pending-\(item)", type: .updated,
                                     body: .operation(OperationBody(cipher: cipher, passwordChanged: true, baseRevisionDate: at, at: at)))
                }
            }
        }
        try userKey.exportBase64().write(toFile: keyFile, atomically: true, encoding: .utf8)
    }
}

@Suite struct CompactCommandTests {
    /// The shared fixture's user A has three items pending (one failing): compacting it with
    /// nothing kept as events carries their changes in the snapshot; `pending` lists the same
    /// items before and after, and `verify` is clean.
    @Test func compact_ofALogWithPendingItems_carriesThem() throws {
        let fixture = StoreFixture.shared
        let dir = TemporaryDirectory("vaultlog-compact-pending", create: true)
        try fixture.copyStore(to: dir.path)
        let key = ["--user-key-file", fixture.userKeyFile, "--user", StoreFixture.userA]
        let pending = { () throws -> [String] in
            let users = try CLI.run(["pending", dir.path, "--json"] + key).jsonDocument()["users"] as? [[String: Any]]
            return ((users?.first?["pending"] as? [[String: Any]]) ?? []).compactMap { $0["cipherId"] as? String }.sorted()
        }
        let before = try pending()
        #expect(before.count == 3, "\(before)")
        let result = try CLI.run(["compact", dir.path, "--keep-days", "0", "--json"] + key)
        #expect(result.status == 0, "\(result)")
        let report = try result.jsonDocument()
        #expect(report["horizon"] as? Int == 9, "user A's last event: \(report)")
        #expect(report["removedEvents"] as? Int == 9)
        #expect((report["carriedEvents"] as? Int ?? 0) >= 3, "\(report)")
        #expect(try pending() == before)
        #expect(try CLI.run(["verify", dir.path] + key).status == 0)
        let history = try CLI.run(["history", dir.path, "server-bank"] + key)
        #expect(history.stdout.contains("[kept in the snapshot]"), "\(history.stdout)")
    }

    @Test func compact_withoutAKey_exits3_andChangesNothing() throws {
        let fixture = try HistoryFixture(items: 2, edits: 2)
        let before = try Data(contentsOf: URL(fileURLWithPath: fixture.store + "/data.mdb"))
        let result = try CLI.run(["compact", fixture.store])
        #expect(result.status == 3, "\(result)")
        #expect(result.stderr.contains("needs") || result.stderr.contains("key"), "\(result)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: fixture.store + "/data.mdb")) == before)
    }

    /// Another process (here: this test) has the store open: the file rewrite could not run, so
    /// nothing is compacted at all.
    @Test func compact_ofAStoreOpenElsewhere_exits4_andChangesNothing() throws {
        let fixture = try HistoryFixture(items: 3, edits: 3)
        let before = try Data(contentsOf: URL(fileURLWithPath: fixture.store + "/data.mdb"))
        let holder = try VaultLogStore(path: fixture.store)
        let result = try CLI.run(["compact", fixture.store, "--keep-days", "0"] + fixture.keyArgs)
        holder.close()
        #expect(result.status == 4, "\(result)")
        #expect(result.stderr.contains("another process has the store at \(fixture.store) open")
                && result.stderr.contains("close the app and its extension (or that process) and run again; nothing was changed"), "\(result.stderr)")
        #if os(Linux)
        #expect(result.stderr.contains("(pid \(getpid())"), "the holder is named: \(result.stderr)")
        #endif
        #expect(try Data(contentsOf: URL(fileURLWithPath: fixture.store + "/data.mdb")) == before)
    }

    /// The whole user path: a dry run that changes nothing, the compaction, then `info`,
    /// `pending --at`, `history`, `events` and `verify` on the compacted store.
    @Test func compact_dryRunThenRun_andEveryReadingCommandKnowsTheHorizon() throws {
        let fixture = try HistoryFixture(items: 20, edits: 10, pending: 3)
        let data = fixture.store + "/data.mdb"
        let before = try Data(contentsOf: URL(fileURLWithPath: data))

        let dry = try CLI.run(["compact", fixture.store, "--keep-days", "0", "--keep-versions", "2", "--dry-run", "--json"] + fixture.keyArgs)
        #expect(dry.status == 0, "\(dry)")
        let plan = try dry.jsonDocument()
        #expect(plan["dryRun"] as? Bool == true)
        #expect(plan["horizon"] as? Int == 403, "20 items × 10 resolved edits, then 3 pending edits, all old: \(plan)")
        #expect(plan["removedEvents"] as? Int == 403)
        #expect(plan["retainedEvents"] as? Int == 0)
        #expect(plan["carriedEvents"] as? Int == 3, "the pending edits go into the snapshot as stored")
        #expect(plan["itemsWithKeptVersions"] as? Int == 23 && plan["keptVersions"] as? Int == 43)
        #expect(try Data(contentsOf: URL(fileURLWithPath: data)) == before, "a dry run changes nothing")

        let run = try CLI.run(["compact", fixture.store, "--keep-days", "0", "--keep-versions", "2"] + fixture.keyArgs)
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("removed 403") && run.stdout.contains("compacted before sequence 403"), "\(run.stdout)")
        #expect(run.stdout.contains("3 events of pending changes carried"), "\(run.stdout)")
        #expect(run.stdout.contains("→"), "file size before and after: \(run.stdout)")
        let after = try Data(contentsOf: URL(fileURLWithPath: data))
        #expect(after.count < before.count, "the compacting copy shrank the file")

        let info = try CLI.run(["info", fixture.store, "--json"])
        let user = try #require((try info.jsonDocument()["users"] as? [[String: Any]])?.first)
        #expect(user["horizon"] as? Int == 403 && user["compactedEvents"] as? Int == 403 && user["eventCount"] as? Int == 0, "\(user)")
        #expect(try CLI.run(["info", fixture.store]).stdout.contains("compacted before seq 403"))

        let early = try CLI.run(["pending", fixture.store, "--at", "399"] + fixture.keyArgs)
        #expect(early.status == 2, "\(early)")
        #expect(early.stderr.contains("compacted before sequence 403"), "\(early.stderr)")
        let atHorizon = try CLI.run(["pending", fixture.store, "--at", "403", "--json"] + fixture.keyArgs)
        #expect(atHorizon.status == 0, "\(atHorizon)")
        let now = try CLI.run(["pending", fixture.store, "--json"] + fixture.keyArgs)
        let pendingNow = ((try now.jsonDocument()["users"] as? [[String: Any]])?.first?["pendingCount"] as? Int)
        #expect(pendingNow == 3, "the pending items are untouched")

        let history = try CLI.run(["history", fixture.store, "item-7"] + fixture.keyArgs)
        #expect(history.status == 0, "\(history)")
        #expect(history.stdout.components(separatedBy: "[kept in the snapshot]").count - 1 == 2, "\(history.stdout)")
        #expect(history.stdout.contains("compacted before sequence 403"))
        let pendingHistory = try CLI.run(["history", fixture.store, "pending-1"] + fixture.keyArgs)
        #expect(pendingHistory.stdout.contains("password changed") && pendingHistory.stdout.contains("[kept in the snapshot]"), "\(pendingHistory)")
        let lockedCount = try CLI.run(["pending", fixture.store, "--json"])
        #expect(((try lockedCount.jsonDocument()["users"] as? [[String: Any]])?.first?["pendingCount"] as? Int) == 3,
                "without a key, from the snapshot's pending set: \(lockedCount)")
        let locked = try CLI.run(["history", fixture.store, "item-7"])
        #expect(locked.status == 1 && locked.stderr.contains("need the key"), "no events left and the kept versions need the key: \(locked)")

        let events = try CLI.run(["events", fixture.store])
        #expect(events.stderr.contains("compacted before sequence 403"), "\(events.stderr)")
        #expect(events.stdout.isEmpty)

        let verify = try CLI.run(["verify", fixture.store] + fixture.keyArgs)
        #expect(verify.status == 0, "\(verify)")
        let again = try CLI.run(["compact", fixture.store, "--keep-days", "0", "--json"] + fixture.keyArgs)
        #expect(try again.jsonDocument()["removedEvents"] as? Int == 0, "nothing more to remove")
    }
}
