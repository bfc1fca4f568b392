import Foundation
import VaultCrypto
import VaultLogTesting

extension Simulation {
    /// The workload of the resolver kill test (`Docs/Reliability.md`): `items` items on the
    /// server, then the device goes offline and a seeded mix follows: creates (some edited or
    /// trashed before they ever reach the server), edits with and without password changes,
    /// bursts of 4–6 password changes on one item (soft conflicts: the server copy is backed
    /// up), trash moves, edits of items in the trash, permanent deletes, and another device's
    /// edits and permanent deletes on the server (conflicts both ways: which side is newer
    /// depends on the order, the device and the server sharing the real clock).
    ///
    /// There is no sync or resolve step: resolving is the caller's job. Every step is optional,
    /// so one that no longer applies (an edit of an item deleted for good) is skipped as in
    /// ``scenario(seed:operations:)``. Run it against a server whose account is `user`:
    ///
    /// ```swift
    /// var runner = ScenarioRunner()
    /// runner.server = .remote(url)
    /// runner.keepStore = true
    /// let outcome = try await runner.run(Simulation.offlineWorkload(seed: 7, user: user))
    /// // resolve outcome.storePath, then Simulation.check(journal: outcome.journal, ...)
    /// ```
    public static func offlineWorkload(seed: UInt64, user: ScenarioUser, items: Int = 10, operations: Int = 40) -> Scenario {
        var rng = SplitMix64(seed: seed)
        func chance(_ percent: UInt64) -> Bool { rng.next() % 100 < percent }
        func pick(_ refs: [String]) -> String? { refs.isEmpty ? nil : refs[Int(rng.next() % UInt64(refs.count))] }

        var counter = 0
        func password() -> String {
            counter += 1
            return "kill-pw-\(seed)-\(counter)"
        }
        func notes() -> String {
            counter += 1
            return "note \(counter)"
        }
        // What the generator knows, to make steps that mostly apply.
        var local: [String] = []                 // items the device holds (trash included)
        var trashed = Set<String>()              // moved to the trash by the user
        var onServer: [String] = []              // items another device can edit
        var createdOffline = Set<String>()       // never reached the server

        var server: [ScenarioServerItem] = []
        for n in 0..<items {
            let ref = "i\(n)"
            server.append(ScenarioServerItem(ref: ref, user: user.ref, item: ScenarioItem(
                name: "kill \(seed) \(ref)", notes: notes(), username: "user", password: password())))
            local.append(ref)
            onServer.append(ref)
        }
        var steps = [ScenarioStep(.offline)]
        func update(_ ref: String, _ change: ScenarioItem) {
            steps.append(ScenarioStep(.update, user: user.ref, ref: ref, item: change, optional: true))
        }
        for _ in 0..<operations {
            let roll = rng.next() % 100
            let active = local.filter { !trashed.contains($0) }
            switch roll {
            case 0..<14:
                let ref = "c\(createdOffline.count)"
                steps.append(ScenarioStep(.create, user: user.ref, ref: ref, item: ScenarioItem(
                    name: "kill \(seed) \(ref)", notes: notes(), username: "user", password: password()), optional: true))
                local.append(ref)
                createdOffline.insert(ref)
            case 14..<40, 90..<100:
                guard let ref = pick(active) else { continue }
                update(ref, chance(70) ? ScenarioItem(password: password()) : ScenarioItem(notes: notes()))
            case 40..<46:
                // A burst of password changes: with no other device, a soft conflict.
                guard let ref = pick(active) else { continue }
                for _ in 0..<(4 + Int(rng.next() % 3)) { update(ref, ScenarioItem(password: password())) }
            case 46..<54:
                guard let ref = pick(active) else { continue }
                steps.append(ScenarioStep(.softDelete, user: user.ref, ref: ref, optional: true))
                if createdOffline.contains(ref) {
                    local.removeAll { $0 == ref }   // never sent: removed locally
                } else {
                    trashed.insert(ref)
                }
            case 54..<60:
                guard let ref = pick(Array(trashed).sorted()) else { continue }
                update(ref, chance(50) ? ScenarioItem(password: password()) : ScenarioItem(notes: notes()))
            case 60..<65:
                guard let ref = pick(local) else { continue }
                steps.append(ScenarioStep(.delete, user: user.ref, ref: ref, optional: true))
                local.removeAll { $0 == ref }
                trashed.remove(ref)
            case 65..<85:
                guard let ref = pick(onServer) else { continue }
                let change = chance(60) ? ScenarioItem(notes: "other device \(notes())") : ScenarioItem(password: password())
                steps.append(ScenarioStep(.anotherDevice, user: user.ref, ref: ref, item: change, optional: true))
            default:
                guard let ref = pick(onServer) else { continue }
                steps.append(ScenarioStep(.anotherDeviceDelete, user: user.ref, ref: ref, optional: true))
                onServer.removeAll { $0 == ref }
            }
        }
        return Scenario(name: "offline-workload-\(seed)",
                        description: "generated by Simulation.offlineWorkload(seed: \(seed), items: \(items), operations: \(operations))",
                        seed: seed, users: [user], server: server, steps: steps, expect: ScenarioExpectation())
    }
}
