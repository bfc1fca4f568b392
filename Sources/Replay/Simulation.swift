import EventLog
import Foundation
import OfflineSync
import VaultCrypto

/// Deterministic simulation (FoundationDB's and TigerBeetle's way): a seed generates a random
/// scenario — users, items, offline periods, edits, lock/unlock, another device's edits and
/// deletes, server faults (5xx, lost responses), crashes — that runs against the in-process
/// emulator with the scenario's clock; then the invariants of DESIGN §9 are checked against
/// what the user did (the run's journal). A failure names its seed; the same seed replays it
/// exactly, and `Simulation.scenario(seed:operations:)` can be saved as a fixture.
public enum Simulation {
    /// The scenario of `seed`: `operations` random steps, then convergence (faults cleared,
    /// online, unlocked, backoff elapsed, dead letters retried, synced).
    public static func scenario(seed: UInt64, operations: Int = 40) -> Scenario {
        var rng = SplitMix64(seed: seed)
        func pick<T>(_ values: [T]) -> T { values[Int(rng.next() % UInt64(values.count))] }
        func chance(_ percent: UInt64) -> Bool { rng.next() % 100 < percent }

        let users = chance(25)
            ? [ScenarioUser(ref: "u1", email: "u1-\(seed)@example.com", password: "master one \(seed)"),
               ScenarioUser(ref: "u2", email: "u2-\(seed)@example.com", password: "master two \(seed)")]
            : [ScenarioUser(ref: "u1", email: "u1-\(seed)@example.com", password: "master one \(seed)")]
        var refs: [(ref: String, user: String)] = []
        var counter = 0
        func newContent(_ ref: String) -> ScenarioItem {
            counter += 1
            return ScenarioItem(name: "sim \(seed) \(ref)", notes: "note \(counter)", username: "user",
                                password: "sentinel-pw-\(seed)-\(counter)")
        }
        var server: [ScenarioServerItem] = []
        for n in 0..<(2 + Int(rng.next() % 3)) {
            let user = pick(users).ref
            let ref = "i\(n)"
            refs.append((ref, user))
            server.append(ScenarioServerItem(ref: ref, user: user, item: newContent(ref)))
        }

        var steps: [ScenarioStep] = []
        var offline = false
        var locked: Set<String> = []
        let routes: [(String, String)] = [("GET", "/api/ciphers/*"), ("PUT", "/api/ciphers/*"), ("POST", "/api/ciphers"),
                                          ("PUT", "/api/ciphers/*/delete"), ("DELETE", "/api/ciphers/*")]
        for _ in 0..<operations {
            let roll = rng.next() % 100
            let target = refs.isEmpty ? nil : pick(refs)
            switch roll {
            case 0..<10:
                offline.toggle()
                steps.append(ScenarioStep(offline ? "offline" : "online"))
            case 10..<20:
                steps.append(ScenarioStep("advance", seconds: Double(1 + rng.next() % 900)))
            case 20..<33:
                let user = pick(users).ref
                let ref = "i\(refs.count)"
                refs.append((ref, user))
                steps.append(ScenarioStep("create", user: user, ref: ref, item: newContent(ref), optional: true))
            case 33..<58:
                guard let target else { continue }
                counter += 1
                var change = ScenarioItem()
                if chance(70) { change.password = "sentinel-pw-\(seed)-\(counter)" } else { change.notes = "note \(counter)" }
                steps.append(ScenarioStep("update", user: target.user, ref: target.ref, item: change, optional: true))
            case 58..<63:
                guard let target else { continue }
                steps.append(ScenarioStep("softDelete", user: target.user, ref: target.ref, optional: true))
            case 63..<66:
                guard let target else { continue }
                steps.append(ScenarioStep("delete", user: target.user, ref: target.ref, optional: true))
            case 66..<74:
                guard let target else { continue }
                counter += 1
                steps.append(ScenarioStep("anotherDevice", user: target.user, ref: target.ref,
                                          item: ScenarioItem(notes: "other device \(counter)"), optional: true))
            case 74..<76:
                guard let target else { continue }
                steps.append(ScenarioStep("anotherDeviceDelete", user: target.user, ref: target.ref, optional: true))
            case 76..<80:
                let user = pick(users).ref
                if locked.contains(user) { locked.remove(user); steps.append(ScenarioStep("unlock", user: user)) }
                else { locked.insert(user); steps.append(ScenarioStep("lock", user: user)) }
            case 80..<86:
                let (method, path) = pick(routes)
                if chance(30), method == "POST" || method == "PUT" {
                    steps.append(ScenarioStep("fault", fault: ScenarioFault(dropResponseAfterApply: 1, method: method, path: path)))
                } else {
                    steps.append(ScenarioStep("fault", fault: ScenarioFault(failNext: Int(1 + rng.next() % 3), method: method, path: path,
                                                                            status: pick([500, 502, 503]))))
                }
            case 86..<89:
                steps.append(ScenarioStep("crash", afterEffect: Int(1 + rng.next() % 3)))
                steps.append(ScenarioStep("sync", user: pick(users).ref, optional: true))
            default:
                steps.append(ScenarioStep("sync", user: pick(users).ref, optional: true))
            }
        }
        // Convergence: the server healthy, every vault unlocked, backoff elapsed, dead letters retried.
        steps.append(ScenarioStep("fault", fault: ScenarioFault(clear: true)))
        steps.append(ScenarioStep("online"))
        for user in users {
            steps.append(ScenarioStep("unlock", user: user.ref))
        }
        for _ in 0..<2 {
            steps.append(ScenarioStep("advance", seconds: 864_000))
            for user in users {
                steps.append(ScenarioStep("retryDeadLetters", user: user.ref))
                steps.append(ScenarioStep("sync", user: user.ref, optional: true))
            }
        }
        // Odd seeds meet the Vaultwarden flavour of the emulator, even seeds Bitwarden's.
        return Scenario(name: "simulation-\(seed)", description: "generated by Simulation.scenario(seed: \(seed), operations: \(operations))",
                        flavor: seed % 2 == 1 ? "vaultwarden" : nil, seed: seed, users: users, server: server, steps: steps, expect: ScenarioExpectation())
    }

    /// The invariants of DESIGN §9 that the outcome must satisfy; one line per violation.
    ///
    /// 1. nothing pending for any user (invariant 4);
    /// 2. every item whose last action was the user's save (and that no other device touched
    ///    afterwards) is on the server with exactly that content, active or as a backup (2);
    /// 3. every password typed in an offline batch of an item that no other device touched and
    ///    the user did not delete is recoverable from the server (active, history or backup) (2);
    /// 4. no two server items with the same content: no duplicate create or backup (3).
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
            violations.append("invariant 4: user \(user) still has \(count) pending items")
        }
        let serverItems = server.values.flatMap { $0 }
        func holds(_ content: ScenarioItem) -> Bool {
            serverItems.contains { item in
                guard let name = content.name, let itemName = item.name,
                      itemName == name || itemName.hasPrefix(name + " - ") else { return false }
                return item.password == content.password && item.notes == content.notes
            }
        }
        var recoverable = Set<String>()
        for item in serverItems {
            if let password = item.password { recoverable.insert(password) }
            recoverable.formUnion(item.passwordHistory ?? [])
        }
        let byRef = Dictionary(grouping: journal, by: \.ref)
        for (ref, entries) in byRef.sorted(by: { $0.key < $1.key }) {
            guard let lastUser = entries.last(where: { !$0.action.hasPrefix("anotherDevice") }) else { continue }
            let touchedAfter = entries.contains { $0.action.hasPrefix("anotherDevice") && $0.step > lastUser.step }
            if let content = lastUser.content, !touchedAfter, !holds(content) {
                violations.append("invariant 2: \(ref): the last saved version (\(content.password ?? "-"), \(content.notes ?? "-")) is not on the server")
            }
            let touched = entries.contains { $0.action.hasPrefix("anotherDevice") }
            let deleted = entries.contains { $0.action == "delete" || $0.action == "softDelete" }
            guard !touched, !deleted else { continue }
            // The passwords of the last offline batch (saves after the last online one).
            let lastOnline = entries.lastIndex { !$0.offline } ?? -1
            for entry in entries[(lastOnline + 1)...] {
                if let password = entry.content?.password, !recoverable.contains(password) {
                    violations.append("invariant 2: \(ref): password \(password) typed offline is not recoverable from the server")
                }
            }
        }
        var seen: [String: Int] = [:]
        for item in serverItems {
            let key = "\(item.name ?? "")|\(item.password ?? "")|\(item.notes ?? "")|\(item.deleted ?? false)"
            seen[key, default: 0] += 1
        }
        for (key, count) in seen.sorted(by: { $0.key < $1.key }) where count > 1 {
            violations.append("invariant 3: \(count) identical server items \(key)")
        }
        return violations
    }

    /// Runs one seed: the scenario, the invariant checks, and the store's integrity (verify
    /// with the key) and plaintext scan (no typed password in any file of the store).
    public static func run(seed: UInt64, operations: Int = 40) async throws -> [String] {
        let scenario = Self.scenario(seed: seed, operations: operations)
        var runner = ScenarioRunner()
        runner.keepStore = true
        // Injected faults make the resolver warn by design; only errors are worth showing.
        runner.logger.logLevel = .error
        let outcome = try await runner.run(scenario)
        var violations = check(outcome)
        if let path = outcome.storePath {
            defer { try? FileManager.default.removeItem(atPath: path) }
            violations += try storeViolations(path: path, scenario: scenario, outcome: outcome)
        }
        return violations
    }

    /// Invariants 5 and 6 on the store the run left.
    static func storeViolations(path: String, scenario: Scenario, outcome: ScenarioOutcome) throws -> [String] {
        try storeViolations(path: path, users: scenario.users ?? [],
                            typedPasswords: Set(outcome.journal.compactMap { $0.content?.password }))
    }

    /// Invariants 5 and 6 on a store no other handle holds: `verify` with every user's key
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
                violations.append("invariant 5: plaintext password \(sentinel) found in \(file)")
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
