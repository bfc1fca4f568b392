import EventLog
import Foundation
import OfflineSync
import VaultCrypto

/// Deterministic simulation (FoundationDB's and TigerBeetle's way): a seed generates a random
/// scenario — users, items, offline periods, edits, lock/unlock, another device's edits and
/// deletes, server faults (5xx, lost responses), crashes — that runs against the in-process
/// emulator with the scenario's clock; then the invariants of ``check(_:)`` are checked against
/// what the user did (the run's journal). A failure names its seed; the same seed replays it
/// exactly, and `Simulation.scenario(seed:operations:)` can be saved as a fixture.
public enum Simulation {
    /// The scenario of `seed`: `operations` random steps, then convergence (faults cleared,
    /// online, unlocked, twice: ten days pass and every user syncs). Dead letters are **not**
    /// retried by hand at the end: only the server's answers about an item count towards its
    /// limit, and the generator injects fewer failing answers than the limit, so an item left
    /// dead-lettered is a fault of the engine.
    ///
    /// Besides single edits, creates, trash moves, permanent deletes, another device's edits
    /// and deletes, lock/unlock, 5xx answers and crashes, it generates the sequences that lose
    /// data when a rule is missed: online operations on an item with pending offline state,
    /// bursts of password changes followed by a trash move or a permanent delete, lost
    /// responses on every request type (creates and trash moves included), long offline
    /// periods with a failed sync every 30 minutes, dead-lettered items edited again, and items
    /// that already have a password history; some items live in folders and move between them.
    public static func scenario(seed: UInt64, operations: Int = 40) -> Scenario {
        var rng = SplitMix64(seed: seed)
        func pick<T>(_ values: [T]) -> T { values[Int(rng.next() % UInt64(values.count))] }
        func chance(_ percent: UInt64) -> Bool { rng.next() % 100 < percent }

        let users = chance(25)
            ? [ScenarioUser(ref: "u1", email: "u1-\(seed)@example.com", password: "master one \(seed)"),
               ScenarioUser(ref: "u2", email: "u2-\(seed)@example.com", password: "master two \(seed)")]
            : [ScenarioUser(ref: "u1", email: "u1-\(seed)@example.com", password: "master one \(seed)")]
        var refs: [(ref: String, user: String)] = []
        // What the user believes: trashed or deleted items are not edited (a client cannot).
        var gone = Set<String>()
        var counter = 0
        func password() -> String {
            counter += 1
            return "sentinel-pw-\(seed)-\(counter)"
        }
        func newContent(_ ref: String) -> ScenarioItem {
            counter += 1
            return ScenarioItem(name: "sim \(seed) \(ref)", notes: "note \(counter)", username: "user", password: password())
        }
        var server: [ScenarioServerItem] = []
        for n in 0..<(2 + Int(rng.next() % 3)) {
            let user = pick(users).ref
            let ref = "i\(n)"
            refs.append((ref, user))
            var item = newContent(ref)
            // Half the items already have a password history (1–5 entries, not typed here).
            if chance(50) { item.passwordHistory = (0..<(1 + Int(rng.next() % 5))).map { "old-pw-\(seed)-\(n)-\($0)" } }
            server.append(ScenarioServerItem(ref: ref, user: user, item: item))
        }

        var steps: [ScenarioStep] = []
        // Some users keep items in folders (backups must stay in the item's folder).
        var folders: [String: [String]] = [:]
        for user in users where chance(40) {
            for n in 0..<(1 + Int(rng.next() % 2)) {
                let ref = "f-\(user.ref)-\(n)"
                folders[user.ref, default: []].append(ref)
                steps.append(ScenarioStep("createFolder", user: user.ref, ref: ref))
            }
        }
        func maybeFolder(_ user: String) -> String? {
            guard let mine = folders[user], chance(40) else { return nil }
            return pick(mine)
        }
        var offline = false
        var locked: Set<String> = []
        // Failing answers injected at random, kept below the dead-letter limit (6) so that no
        // item can be dead-lettered by them alone.
        var failingAnswers = 0
        let routes: [(String, String)] = [("GET", "/api/ciphers/*"), ("PUT", "/api/ciphers/*"), ("POST", "/api/ciphers"),
                                          ("PUT", "/api/ciphers/*/delete"), ("DELETE", "/api/ciphers/*")]
        func setOffline(_ value: Bool) {
            guard offline != value else { return }
            offline = value
            steps.append(ScenarioStep(value ? "offline" : "online"))
        }
        func live() -> [(ref: String, user: String)] { refs.filter { !gone.contains($0.ref) } }
        func update(_ target: (ref: String, user: String), passwordChange: Bool) {
            counter += 1
            var change = ScenarioItem()
            if passwordChange { change.password = password() } else { change.notes = "note \(counter)" }
            if chance(30) { change.folder = maybeFolder(target.user) }
            steps.append(ScenarioStep("update", user: target.user, ref: target.ref, item: change, optional: true))
        }
        func trash(_ target: (ref: String, user: String), permanent: Bool) {
            steps.append(ScenarioStep(permanent ? "delete" : "softDelete", user: target.user, ref: target.ref, optional: true))
            gone.insert(target.ref)
        }
        for _ in 0..<operations {
            let roll = rng.next() % 100
            let candidates = live()
            let target = candidates.isEmpty ? nil : pick(candidates)
            switch roll {
            case 0..<8:
                setOffline(!offline)
            case 8..<15:
                steps.append(ScenarioStep("advance", seconds: Double(1 + rng.next() % 900)))
            case 15..<25:
                let user = pick(users).ref
                let ref = "i\(refs.count)"
                refs.append((ref, user))
                var item = newContent(ref)
                item.folder = maybeFolder(user)
                steps.append(ScenarioStep("create", user: user, ref: ref, item: item, optional: true))
            case 25..<43:
                guard let target else { continue }
                update(target, passwordChange: chance(70))
            case 43..<49:
                // A burst of password changes (a soft conflict at four or more), sometimes
                // followed by a trash move or a permanent delete.
                guard let target else { continue }
                for _ in 0..<(3 + Int(rng.next() % 6)) {
                    update(target, passwordChange: true)
                    if chance(30) { steps.append(ScenarioStep("advance", seconds: Double(1 + rng.next() % 120))) }
                }
                if chance(40) {
                    // Sometimes the resolution stops after its first server effect (a backup)
                    // before the trash move: the half-done change must still be a trash move.
                    if chance(40) {
                        setOffline(false)
                        steps.append(ScenarioStep("crash", afterEffect: 1))
                        steps.append(ScenarioStep("sync", user: target.user, optional: true))
                        setOffline(true)
                    }
                    trash(target, permanent: chance(30))
                }
            case 49..<55:
                // An online operation on an item with pending offline state.
                guard let target else { continue }
                setOffline(true)
                for _ in 0..<(1 + Int(rng.next() % 5)) { update(target, passwordChange: chance(80)) }
                setOffline(false)
                switch rng.next() % 4 {
                case 0: trash(target, permanent: false)
                case 1: trash(target, permanent: true)
                default: update(target, passwordChange: chance(70))
                }
            case 55..<59:
                guard let target else { continue }
                trash(target, permanent: false)
            case 59..<61:
                guard let target else { continue }
                trash(target, permanent: true)
            case 61..<68:
                guard let target else { continue }
                counter += 1
                steps.append(ScenarioStep("anotherDevice", user: target.user, ref: target.ref,
                                          item: ScenarioItem(notes: "other device \(counter)"), optional: true))
            case 68..<70:
                guard let target else { continue }
                steps.append(ScenarioStep("anotherDeviceDelete", user: target.user, ref: target.ref, optional: true))
            case 70..<73:
                let user = pick(users).ref
                if locked.contains(user) { locked.remove(user); steps.append(ScenarioStep("unlock", user: user)) }
                else { locked.insert(user); steps.append(ScenarioStep("lock", user: user)) }
            case 73..<80:
                // A lost response on any request type, or a few failing answers.
                let (method, path) = pick(routes)
                if method != "GET", chance(50) {
                    steps.append(ScenarioStep("fault", fault: ScenarioFault(dropResponseAfterApply: 1, method: method, path: path)))
                } else if failingAnswers < 5 {
                    let n = min(5 - failingAnswers, Int(1 + rng.next() % 3))
                    failingAnswers += n
                    steps.append(ScenarioStep("fault", fault: ScenarioFault(failNext: n, method: method, path: path,
                                                                            status: pick([500, 502, 503]))))
                }
            case 80..<83:
                steps.append(ScenarioStep("crash", afterEffect: Int(1 + rng.next() % 3)))
                steps.append(ScenarioStep("sync", user: pick(users).ref, optional: true))
            case 83..<85:
                // A long offline period: a sync attempt every 30 minutes, for up to a day.
                setOffline(true)
                if let target { update(target, passwordChange: true) }
                let user = pick(users).ref
                for _ in 0..<(10 + Int(rng.next() % 39)) {
                    steps.append(ScenarioStep("advance", seconds: 1800))
                    steps.append(ScenarioStep("sync", user: user, optional: true))
                }
            case 85..<87:
                // An item dead-lettered by its server's answers, then edited again by the user.
                guard let target, !target.ref.hasPrefix("c") else { continue }
                setOffline(true)
                update(target, passwordChange: true)
                setOffline(false)
                steps.append(ScenarioStep("fault", fault: ScenarioFault(failNext: 6, method: "GET", path: "/api/ciphers/{\(target.ref)}",
                                                                        status: 500), optional: true))
                for _ in 0..<6 {
                    steps.append(ScenarioStep("advance", seconds: 30_000))
                    steps.append(ScenarioStep("sync", user: target.user, optional: true))
                }
                steps.append(ScenarioStep("fault", fault: ScenarioFault(clear: true)))
                failingAnswers = 0
                if chance(50) { setOffline(true) }
                update(target, passwordChange: true)
            default:
                steps.append(ScenarioStep("sync", user: pick(users).ref, optional: true))
            }
        }
        // Convergence: the server healthy, every vault unlocked, the backoff horizon passed.
        steps.append(ScenarioStep("fault", fault: ScenarioFault(clear: true)))
        steps.append(ScenarioStep("online"))
        for user in users {
            steps.append(ScenarioStep("unlock", user: user.ref))
        }
        for _ in 0..<2 {
            steps.append(ScenarioStep("advance", seconds: 864_000))
            for user in users {
                steps.append(ScenarioStep("sync", user: user.ref, optional: true))
            }
        }
        // Odd seeds meet the Vaultwarden flavour of the emulator, even seeds Bitwarden's.
        return Scenario(name: "simulation-\(seed)", description: "generated by Simulation.scenario(seed: \(seed), operations: \(operations))",
                        flavor: seed % 2 == 1 ? "vaultwarden" : nil, seed: seed, users: users, server: server, steps: steps, expect: ScenarioExpectation())
    }

    /// The invariants the outcome must satisfy over the **whole** run; one line per violation
    /// (`Docs/Reliability.md` lists them):
    ///
    /// 1. every password typed while the item had pending offline state (offline edits, and
    ///    online edits made onto a pending item) is recoverable from the server (active,
    ///    history, a backup or an overflow copy), unless the item was later permanently deleted
    ///    by the user (or by another device after it was resolved), or a later password change
    ///    outside its pending batch (with nothing pending, or in a later batch) pushed it out
    ///    of Bitwarden's 5-entry history;
    /// 2. the last version the user saved of an item that no other device touched is on the
    ///    server (active, in the trash or as a backup); an item the user trashed is in the
    ///    server's trash with that version;
    /// 3. an item the user permanently deleted is gone from the server, unless another device
    ///    edited it after the device last saw it;
    /// 4. backups only where the matrix asks for them (another device touched the item, or a
    ///    pending batch of four or more password changes to an item the server had before);
    ///    password-overflow copies only after six or more; never for a create chain; no two
    ///    identical server items;
    /// 5. nothing pending and nothing dead-lettered at the end.
    public static func check(_ outcome: ScenarioOutcome) -> [String] {
        check(journal: outcome.journal, pending: outcome.actual.pending ?? [:], server: outcome.actual.server ?? [:])
    }

    /// The same checks on parts observed separately: what the user and other devices did
    /// (`journal`), pending counts per user, and every server item per user, decrypted (the
    /// resolver kill test observes them in another process than the one that made the edits).
    public static func check(journal: [ScenarioJournalEntry], pending: [String: Int],
                             server: [String: [ScenarioItemExpectation]]) -> [String] {
        var violations: [String] = []
        for (user, count) in pending.sorted(by: { $0.key < $1.key }) where count > 0 {
            violations.append("invariant 5: user \(user) still has \(count) pending items (dead letters included)")
        }
        let serverItems = server.values.flatMap { $0 }
        func isCopy(_ item: ScenarioItemExpectation, of name: String) -> Bool {
            (item.name ?? "").hasPrefix(name + " - ")
        }
        func holds(_ content: ScenarioItem, trashed: Bool? = nil) -> Bool {
            serverItems.contains { item in
                guard let name = content.name, let itemName = item.name,
                      itemName == name || (trashed == nil && isCopy(item, of: name)) else { return false }
                if let trashed, (item.deleted ?? false) != trashed { return false }
                // In its folder: backups and overflow copies keep the version's folder too.
                return item.password == content.password && item.notes == content.notes && item.folder == content.folder
            }
        }
        var recoverable = Set<String>()
        for item in serverItems {
            if let password = item.password { recoverable.insert(password) }
            recoverable.formUnion(item.passwordHistory ?? [])
        }
        let syncs = journal.filter { $0.action == "syncApplied" }
        /// The last step at which the device replaced its copy of `ref` with the server's, before
        /// `step` (a sync keeps the copy of an item still pending after it).
        func lastRefresh(user: String?, ref: String, before step: Int) -> Int {
            syncs.filter { ($0.user == nil || $0.user == user) && $0.step < step && !($0.kept ?? []).contains(ref) }
                .map(\.step).max() ?? -1
        }
        let byRef = Dictionary(grouping: journal.filter { !$0.ref.isEmpty }, by: \.ref)
        for (ref, entries) in byRef.sorted(by: { $0.key < $1.key }) {
            let own = entries.filter { !$0.action.hasPrefix("anotherDevice") }
            let other = entries.filter { $0.action.hasPrefix("anotherDevice") }
            guard let last = own.last else { continue }
            let name = entries.compactMap { $0.content?.name }.first
            /// Another device touched the item after the device last saw it, before `step` or later.
            func otherDeviceSince(refreshBefore step: Int, user: String?) -> Bool {
                let since = lastRefresh(user: user, ref: ref, before: step)
                return other.contains { $0.step > since }
            }

            // Trash moves of a create that was still pending: as the engine's rule has it, a create
            // that never reached the server is removed locally when trashed (one that may have
            // reached it is trashed there), so these steps destroy the item as far as the
            // server is concerned.
            var discardingSteps = Set<Int>()
            var inCreateBatch = false
            for entry in own where entry.action != "initial" {
                let pendingBefore = entry.pendingBefore ?? false
                if !pendingBefore { inCreateBatch = entry.action == "create" && entry.offline }
                if entry.action == "softDelete", pendingBefore, inCreateBatch { discardingSteps.insert(entry.step) }
            }

            // 2 and 3: the fate of the last thing the user did.
            let touchedAfter = other.contains { $0.step > last.step }
            switch last.action {
            case "softDelete" where discardingSteps.contains(last.step):
                if let name, serverItems.contains(where: { $0.name == name && $0.deleted != true }) {
                    violations.append("invariant 2: \(ref): a pending create trashed by the user is active on the server")
                }
            case "softDelete":
                // The version trashed: the user's last one or, when a conflict kept another
                // device's version, that one (the user's then lives on as a backup).
                let mine = own.last(where: { $0.content != nil && $0.step < last.step })?.content
                let theirs = other.filter { $0.step < last.step }.compactMap(\.content)
                if let mine, !otherDeviceSince(refreshBefore: last.step, user: last.user),
                   !([mine] + theirs).contains(where: { holds($0, trashed: true) }) {
                    violations.append("invariant 2: \(ref): trashed by the user, but its last version (\(mine.password ?? "-"), \(mine.notes ?? "-")) is not in the server's trash")
                }
            case "delete":
                if let name, !otherDeviceSince(refreshBefore: last.step, user: last.user),
                   serverItems.contains(where: { $0.name == name }) {
                    violations.append("invariant 3: \(ref): permanently deleted by the user, but the server still has it")
                }
            default:
                if let content = last.content, !touchedAfter, !holds(content) {
                    violations.append("invariant 2: \(ref): the last saved version (\(content.password ?? "-"), \(content.notes ?? "-")) is not on the server")
                }
            }

            // Pending batches: runs of the user's saves from one that found the item clean
            // until resolution (the next save that finds it clean starts a new batch).
            var batches: [(isCreate: Bool, passwordChanges: Int, first: Int)] = []
            var previousPassword: String?
            var typedWhilePending: [(password: String, step: Int, batch: Int)] = []
            var plainPasswordChanges: [Int] = []   // steps of password changes with nothing pending
            for entry in entries {
                let changed = entry.content.map { $0.password != previousPassword } ?? false
                if let content = entry.content { previousPassword = content.password }
                guard entry.action != "initial" else { continue }
                if entry.action.hasPrefix("anotherDevice") {
                    if changed { plainPasswordChanges.append(entry.step) }
                    continue
                }
                let pendingBefore = entry.pendingBefore ?? false
                let pendingAfter = entry.offline || pendingBefore
                if !pendingBefore && pendingAfter {
                    batches.append((entry.action == "create", 0, entry.step))
                }
                if pendingAfter, changed, ["create", "update"].contains(entry.action) {
                    if !batches.isEmpty, entry.action == "update" { batches[batches.count - 1].passwordChanges += 1 }
                    if let password = entry.content?.password { typedWhilePending.append((password, entry.step, batches.count - 1)) }
                } else if changed, entry.action == "update" {
                    plainPasswordChanges.append(entry.step)
                }
            }

            // 1: passwords typed while pending.
            for (password, step, batch) in typedWhilePending where !recoverable.contains(password) {
                let deletedLater = own.contains { ($0.action == "delete" || discardingSteps.contains($0.step)) && $0.step > step }
                    || other.contains { $0.action == "anotherDeviceDelete" && $0.step > step && $0.pendingBefore == false }
                // Once its batch is resolved a password is ordinary history: later changes (with
                // nothing pending, or in a later batch) follow Bitwarden's 5-entry rule.
                let pushedOut = plainPasswordChanges.contains { $0 > step }
                    || typedWhilePending.contains { $0.step > step && $0.batch != batch }
                if !deletedLater && !pushedOut {
                    violations.append("invariant 1: \(ref): password \(password) typed while the item had pending changes is not recoverable from the server")
                }
            }

            // 4: backups only where the matrix asks for one.
            guard let name else { continue }
            let copies = serverItems.filter { isCopy($0, of: name) }
            let overflows = copies.filter { ($0.name ?? "").contains(" - offline passwords ") }
            let backups = copies.count - overflows.count
            let touched = !other.isEmpty
            let softConflict = batches.contains { !$0.isCreate && $0.passwordChanges >= 4 }
            if backups > 0, !touched, !softConflict {
                violations.append("invariant 4: \(ref): \(backups) backup(s) on the server, but no other device touched it and no batch had 4 password changes \(batches.map { ($0.isCreate ? "create " : "") + "\($0.passwordChanges)" })")
            }
            if !overflows.isEmpty, !touched, !batches.contains(where: { $0.passwordChanges >= 6 }) {
                violations.append("invariant 4: \(ref): \(overflows.count) password-overflow copies, but no batch had 6 password changes \(batches.map { "\($0.passwordChanges)" })")
            }
        }
        var seen: [String: Int] = [:]
        for item in serverItems {
            let key = "\(item.name ?? "")|\(item.password ?? "")|\(item.notes ?? "")|\(item.deleted ?? false)"
            seen[key, default: 0] += 1
        }
        for (key, count) in seen.sorted(by: { $0.key < $1.key }) where count > 1 {
            violations.append("invariant 4: \(count) identical server items \(key)")
        }
        return violations
    }

    /// Runs one seed: the scenario, the invariant checks, and the store's integrity (verify
    /// with the key) and plaintext scan (no typed password in any file of the store).
    public static func run(seed: UInt64, operations: Int = 40) async throws -> [String] {
        try await run(Self.scenario(seed: seed, operations: operations))
    }

    /// Runs `scenario` (a generated one, saved with `--save` and perhaps cut down) and checks
    /// the invariants. With `keepStoreAt`, the device's store is left in that directory (for
    /// `vaultlog events`, `history`, `verify`); otherwise it is removed.
    public static func run(_ scenario: Scenario, keepStoreAt: String? = nil) async throws -> [String] {
        var runner = ScenarioRunner()
        runner.keepStore = true
        runner.storePath = keepStoreAt
        // Injected faults make the resolver warn by design; only errors are worth showing.
        runner.logger.logLevel = .error
        let outcome = try await runner.run(scenario)
        var violations = check(outcome)
        if let path = outcome.storePath {
            defer { if keepStoreAt == nil { try? FileManager.default.removeItem(atPath: path) } }
            violations += try storeViolations(path: path, scenario: scenario, outcome: outcome)
        }
        return violations
    }

    /// Invariant 6 on the store the run left.
    static func storeViolations(path: String, scenario: Scenario, outcome: ScenarioOutcome) throws -> [String] {
        try storeViolations(path: path, users: scenario.users ?? [],
                            typedPasswords: Set(outcome.journal.compactMap { $0.content?.password }))
    }

    /// Invariant 6 on a store no other handle holds: `verify` with every user's key
    /// (unlocked with the master password) is clean, and none of `typedPasswords` appears in
    /// any file of the store.
    public static func storeViolations(path: String, users: [ScenarioUser], typedPasswords sentinels: Set<String>) throws -> [String] {
        var violations: [String] = []
        let store = try VaultLogStore(path: path)
        var keys: [String: SealingKey] = [:]
        for user in users {
            let userId = try store.unlock(email: user.email, masterPassword: user.password)
            keys[userId] = SealingKey(userKey: try store.userKey(userId: userId))
        }
        let report = try store.log.verify(keys: keys)
        store.close()
        if !report.isClean { violations.append("invariant 6: verify reports \(report.problems.prefix(3))") }
        for file in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
            guard let bytes = FileManager.default.contents(atPath: (path as NSString).appendingPathComponent(file)) else { continue }
            for sentinel in sentinels where bytes.range(of: Data(sentinel.utf8)) != nil {
                violations.append("invariant 6: plaintext password \(sentinel) found in \(file)")
            }
        }
        return violations
    }
}

/// SplitMix64: a small, fast, seedable generator for reproducible simulations and stress runs.
public struct SplitMix64: Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
