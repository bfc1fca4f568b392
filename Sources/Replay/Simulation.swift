import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultLogTesting

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
    /// that already have a password history; some items live in folders and move between them;
    /// restores from the trash, offline and online onto pending state, meeting other devices'
    /// restores, permanent deletes and edits in the trash (``insertingRestores(into:seed:)``).
    ///
    /// With `concurrent`, 2 to 4 episodes where the library is called from several tasks at
    /// once are inserted at random points (``insertingEpisodes(into:seed:users:)``; the other
    /// steps stay what the sequential mode generates): syncs and resolution runs at once on one
    /// shared resolver, a save racing a sync, saves right after the n-th server effect of a
    /// resolution, another device's changes that keep the encrypted name meeting a pending
    /// delete, saves from a stale view, and a cold start offline without session tokens.
    public static func scenario(seed: UInt64, operations: Int = 40, concurrent: Bool = false) -> Scenario {
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
                steps.append(ScenarioStep(.createFolder, user: user.ref, ref: ref))
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
            steps.append(ScenarioStep(value ? .offline : .online))
        }
        func live() -> [(ref: String, user: String)] { refs.filter { !gone.contains($0.ref) } }
        func update(_ target: (ref: String, user: String), passwordChange: Bool) {
            counter += 1
            var change = ScenarioItem()
            if passwordChange { change.password = password() } else { change.notes = "note \(counter)" }
            if chance(30) { change.folder = maybeFolder(target.user) }
            steps.append(ScenarioStep(.update, user: target.user, ref: target.ref, item: change, optional: true))
        }
        func trash(_ target: (ref: String, user: String), permanent: Bool) {
            steps.append(ScenarioStep(permanent ? .delete : .softDelete, user: target.user, ref: target.ref, optional: true))
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
                steps.append(ScenarioStep(.advance, seconds: Double(1 + rng.next() % 900)))
            case 15..<25:
                let user = pick(users).ref
                let ref = "i\(refs.count)"
                refs.append((ref, user))
                var item = newContent(ref)
                item.folder = maybeFolder(user)
                steps.append(ScenarioStep(.create, user: user, ref: ref, item: item, optional: true))
            case 25..<43:
                guard let target else { continue }
                update(target, passwordChange: chance(70))
            case 43..<49:
                // A burst of password changes (a soft conflict at four or more), sometimes
                // followed by a trash move or a permanent delete.
                guard let target else { continue }
                for _ in 0..<(3 + Int(rng.next() % 6)) {
                    update(target, passwordChange: true)
                    if chance(30) { steps.append(ScenarioStep(.advance, seconds: Double(1 + rng.next() % 120))) }
                }
                if chance(40) {
                    // Sometimes the resolution stops after its first server effect (a backup)
                    // before the trash move: the half-done change must still be a trash move.
                    if chance(40) {
                        setOffline(false)
                        steps.append(ScenarioStep(.crash, afterEffect: 1))
                        steps.append(ScenarioStep(.sync, user: target.user, optional: true))
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
                steps.append(ScenarioStep(.anotherDevice, user: target.user, ref: target.ref,
                                          item: ScenarioItem(notes: "other device \(counter)"), optional: true))
            case 68..<70:
                guard let target else { continue }
                steps.append(ScenarioStep(.anotherDeviceDelete, user: target.user, ref: target.ref, optional: true))
            case 70..<73:
                let user = pick(users).ref
                if locked.contains(user) { locked.remove(user); steps.append(ScenarioStep(.unlock, user: user)) }
                else { locked.insert(user); steps.append(ScenarioStep(.lock, user: user)) }
            case 73..<80:
                // A lost response on any request type, or a few failing answers.
                let (method, path) = pick(routes)
                if method != "GET", chance(50) {
                    steps.append(ScenarioStep(.fault, fault: ScenarioFault(dropResponseAfterApply: 1, method: method, path: path)))
                } else if failingAnswers < 5 {
                    let n = min(5 - failingAnswers, Int(1 + rng.next() % 3))
                    failingAnswers += n
                    steps.append(ScenarioStep(.fault, fault: ScenarioFault(failNext: n, method: method, path: path,
                                                                            status: pick([500, 502, 503]))))
                }
            case 80..<83:
                steps.append(ScenarioStep(.crash, afterEffect: Int(1 + rng.next() % 3)))
                steps.append(ScenarioStep(.sync, user: pick(users).ref, optional: true))
            case 83..<85:
                // A long offline period: a sync attempt every 30 minutes, for up to a day.
                setOffline(true)
                if let target { update(target, passwordChange: true) }
                let user = pick(users).ref
                for _ in 0..<(10 + Int(rng.next() % 39)) {
                    steps.append(ScenarioStep(.advance, seconds: 1800))
                    steps.append(ScenarioStep(.sync, user: user, optional: true))
                }
            case 85..<87:
                // An item dead-lettered by its server's answers, then edited again by the user.
                guard let target, !target.ref.hasPrefix("c") else { continue }
                setOffline(true)
                update(target, passwordChange: true)
                setOffline(false)
                steps.append(ScenarioStep(.fault, fault: ScenarioFault(failNext: 6, method: "GET", path: "/api/ciphers/{\(target.ref)}",
                                                                        status: 500), optional: true))
                for _ in 0..<6 {
                    steps.append(ScenarioStep(.advance, seconds: 30_000))
                    steps.append(ScenarioStep(.sync, user: target.user, optional: true))
                }
                steps.append(ScenarioStep(.fault, fault: ScenarioFault(clear: true)))
                failingAnswers = 0
                if chance(50) { setOffline(true) }
                update(target, passwordChange: true)
            default:
                steps.append(ScenarioStep(.sync, user: pick(users).ref, optional: true))
            }
        }
        steps = insertingRestores(into: steps, seed: seed)
        // Compactions at random points, from a generator of their own so the other steps of a
        // seed stay what they were: the projection after each must be what it was before.
        var compaction = SplitMix64(seed: seed ^ 0xC0_4AC7)
        for _ in 0..<(1 + Int(compaction.next() % 3)) {
            let at = Int(compaction.next() % UInt64(steps.count + 1))
            let user = users[Int(compaction.next() % UInt64(users.count))].ref
            let keepDays = [0, 0, 1, 30][Int(compaction.next() % 4)]
            let keepVersions = [0, 1, 2, 5][Int(compaction.next() % 4)]
            steps.insert(ScenarioStep(.compact, user: user, keepDays: keepDays, keepVersions: keepVersions), at: at)
        }
        steps = insertingAttachments(into: steps, seed: seed, refs: refs)
        steps = insertingFolders(into: steps, seed: seed, refs: refs, users: users)
        if concurrent { steps = insertingEpisodes(into: steps, seed: seed, users: users) }
        // Convergence: the server healthy, every vault unlocked, the backoff horizon passed.
        steps.append(ScenarioStep(.fault, fault: ScenarioFault(clear: true)))
        steps.append(ScenarioStep(.online))
        if concurrent { steps.append(ScenarioStep(.login)) }
        for user in users {
            steps.append(ScenarioStep(.unlock, user: user.ref))
        }
        for _ in 0..<2 {
            steps.append(ScenarioStep(.advance, seconds: 864_000))
            for user in users {
                steps.append(ScenarioStep(.sync, user: user.ref, optional: true))
            }
        }
        // Everything resolved and old enough: a last compaction removes most of each log, and the
        // store checks (verify with every key) run on the compacted store.
        for user in users {
            steps.append(ScenarioStep(.compact, user: user.ref, keepDays: 0, keepVersions: Int(compaction.next() % 3)))
        }
        // Odd seeds meet the Vaultwarden flavour of the emulator, even seeds Bitwarden's.
        return Scenario(name: concurrent ? "simulation-concurrent-\(seed)" : "simulation-\(seed)",
                        description: "generated by Simulation.scenario(seed: \(seed), operations: \(operations)\(concurrent ? ", concurrent: true" : ""))",
                        flavor: seed % 2 == 1 ? .vaultwarden : nil, seed: seed, users: users, server: server, steps: steps, expect: ScenarioExpectation())
    }

}
