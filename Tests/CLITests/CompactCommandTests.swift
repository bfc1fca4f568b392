import EventLog
import Foundation
import OfflineSync
import Testing
import VaultCrypto
import VaultModel
import VaultLogTesting

/// A store with a long resolved history (and optionally pending items), for `compact`.
final class HistoryFixture: Sendable {
    let dir = TemporaryDirectory("vaultlog-compact")
    let userKey = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 51))
    static let userId = "user-h"
    var store: String { dir.file("store") }
    var keyFile: String { dir.file("user.key") }
    var keyArgs: [String] { ["--user-key-file", keyFile] }

    /// `items` items with `edits` resolved edits each (an update then `resolved`, a minute
    /// apart, starting 2026-01-01), and `pending` items edited offline and not resolved: after
    /// the edit round `pendingAfter` (default: after the last one).
    init(items: Int = 20, edits: Int = 10, pending: Int = 0, pendingAfter: Int? = nil) throws {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_767_225_600))
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
    /// Everything in the shared fixture is pending (or was, right before the next edit): no
    /// point where nothing was pending, so nothing is removed, and the report names the item.
    @Test func compact_ofALogThatIsAlwaysPending_removesNothing_andSaysWhy() throws {
        let fixture = StoreFixture.shared
        let dir = TemporaryDirectory("vaultlog-compact-pinned")
        try fixture.copyStore(to: dir.path)
        let result = try CLI.run(["compact", dir.path, "--user-key-file", fixture.userKeyFile, "--user", StoreFixture.userA, "--keep-days", "0", "--json"])
        #expect(result.status == 0, "\(result)")
        let report = try result.jsonDocument()
        #expect(report["horizon"] == nil)
        #expect(report["removedEvents"] as? Int == 0)
        #expect((report["limitedBy"] as? String)?.contains("server-bank") == true, "\(report)")
        #expect(try CLI.run(["verify", dir.path, "--user-key-file", fixture.userKeyFile, "--user", StoreFixture.userA]).status == 0)
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
        #expect(result.stderr.contains("open in another process"), "\(result.stderr)")
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
        #expect(plan["horizon"] as? Int == 400, "20 items × 10 resolved edits = 400 events before the pending ones: \(plan)")
        #expect(plan["removedEvents"] as? Int == 400)
        #expect(plan["retainedEvents"] as? Int == 3)
        #expect(plan["itemsWithKeptVersions"] as? Int == 20 && plan["keptVersions"] as? Int == 40)
        #expect(try Data(contentsOf: URL(fileURLWithPath: data)) == before, "a dry run changes nothing")

        let run = try CLI.run(["compact", fixture.store, "--keep-days", "0", "--keep-versions", "2"] + fixture.keyArgs)
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("removed 400") && run.stdout.contains("compacted before sequence 400"), "\(run.stdout)")
        #expect(run.stdout.contains("→"), "file size before and after: \(run.stdout)")
        let after = try Data(contentsOf: URL(fileURLWithPath: data))
        #expect(after.count < before.count, "the compacting copy shrank the file")

        let info = try CLI.run(["info", fixture.store, "--json"])
        let user = try #require((try info.jsonDocument()["users"] as? [[String: Any]])?.first)
        #expect(user["horizon"] as? Int == 400 && user["compactedEvents"] as? Int == 400 && user["eventCount"] as? Int == 3, "\(user)")
        #expect(try CLI.run(["info", fixture.store]).stdout.contains("compacted before seq 400"))

        let early = try CLI.run(["pending", fixture.store, "--at", "399"] + fixture.keyArgs)
        #expect(early.status == 2, "\(early)")
        #expect(early.stderr.contains("compacted before sequence 400"), "\(early.stderr)")
        let atHorizon = try CLI.run(["pending", fixture.store, "--at", "400", "--json"] + fixture.keyArgs)
        #expect(atHorizon.status == 0, "\(atHorizon)")
        let now = try CLI.run(["pending", fixture.store, "--json"] + fixture.keyArgs)
        let pendingNow = ((try now.jsonDocument()["users"] as? [[String: Any]])?.first?["pendingCount"] as? Int)
        #expect(pendingNow == 3, "the pending items are untouched")

        let history = try CLI.run(["history", fixture.store, "item-7"] + fixture.keyArgs)
        #expect(history.status == 0, "\(history)")
        #expect(history.stdout.components(separatedBy: "[kept in the snapshot]").count - 1 == 2, "\(history.stdout)")
        #expect(history.stdout.contains("compacted before sequence 400"))
        let locked = try CLI.run(["history", fixture.store, "item-7"])
        #expect(locked.status == 1 && locked.stderr.contains("need the key"), "no events left and the kept versions need the key: \(locked)")

        let events = try CLI.run(["events", fixture.store])
        #expect(events.stderr.contains("compacted before sequence 400"), "\(events.stderr)")
        #expect(events.stdout.split(separator: "\n").count == 3)

        let verify = try CLI.run(["verify", fixture.store] + fixture.keyArgs)
        #expect(verify.status == 0, "\(verify)")
        let again = try CLI.run(["compact", fixture.store, "--keep-days", "0", "--json"] + fixture.keyArgs)
        #expect(try again.jsonDocument()["removedEvents"] as? Int == 0, "nothing more: the rest is pending")
    }
}
