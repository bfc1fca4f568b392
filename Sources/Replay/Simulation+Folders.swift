import Foundation
@_spi(Tools) import OfflineSync
import VaultLogTesting

extension Simulation {
    // MARK: Folders

    /// `steps` with up to three folder episodes at random points, from a generator of their own
    /// (the other steps of a seed stay what they were). In each, a user creates a folder (often
    /// offline, under a temporary id) and moves one or two items into it; then, after a sync,
    /// another device may rename or delete the folder, and the user may rename or delete it too
    /// (again often offline). The network and the vault's lock are put back as they were before
    /// the episode. Invariant 15 checks the folders and the items in them.
    static func insertingFolders(into steps: [ScenarioStep], seed: UInt64, refs: [(ref: String, user: String)],
                                 users: [ScenarioUser]) -> [ScenarioStep] {
        var rng = SplitMix64(seed: seed ^ 0xF01D_E125)
        guard !users.isEmpty, rng.next() % 100 < 70 else { return steps }
        func chance(_ percent: UInt64) -> Bool { rng.next() % 100 < percent }
        var steps = steps
        for n in 0..<(1 + Int(rng.next() % 3)) {
            var at = Int(rng.next() % UInt64(steps.count + 1))
            // Never between a crash and the sync it belongs to.
            while at > 0, at < steps.count, steps[at - 1].do == .crash { at += 1 }
            let user = users[Int(rng.next() % UInt64(users.count))].ref
            let (wasOffline, wasLocked) = state(before: at, in: steps, user: user)
            let folder = "n-\(user)-\(n)"
            var episode: [ScenarioStep] = []
            if wasLocked { episode.append(ScenarioStep(.unlock, user: user)) }
            let offlineCreate = chance(70)
            episode.append(ScenarioStep(offlineCreate ? .offline : .online))
            var create = ScenarioStep(.folderCreate, user: user, ref: folder)
            create.item = ScenarioItem(name: "folder \(folder)")
            episode.append(create)
            let mine = refs.filter { $0.user == user }
            var moved: [String] = []
            for _ in 0..<(mine.isEmpty ? 0 : 1 + Int(rng.next() % 2)) {
                let item = mine[Int(rng.next() % UInt64(mine.count))]
                moved.append(item.ref)
                episode.append(ScenarioStep(.update, user: user, ref: item.ref, item: ScenarioItem(folder: folder), optional: true))
            }
            // Online and synced: the folder is on the server (mapped) before another device acts on it.
            episode.append(ScenarioStep(.online))
            episode.append(ScenarioStep(.sync, user: user, optional: true))
            switch rng.next() % 4 {
            case 0:
                var rename = ScenarioStep(.anotherDeviceFolderRename, user: user, ref: folder, optional: true)
                rename.item = ScenarioItem(name: "folder \(folder) theirs")
                episode.append(rename)
            case 1:
                episode.append(ScenarioStep(.anotherDeviceFolderDelete, user: user, ref: folder, optional: true))
                if let item = moved.last, chance(50) {
                    // Not heard of yet (no sync): an online save from the local copy, which
                    // still names the folder, sends an id the server no longer has (Bitwarden
                    // stores it, Vaultwarden refuses the save; invariants 15 and 17).
                    episode.append(ScenarioStep(.update, user: user, ref: item, item: ScenarioItem(notes: "saved after \(folder) was deleted elsewhere"),
                                                optional: true))
                }
            default:
                break
            }
            // Then the device hears of it (the servers push a folder change to online clients).
            episode.append(ScenarioStep(.sync, user: user, optional: true))
            let offlineLater = chance(50)
            if offlineLater { episode.append(ScenarioStep(.offline)) }
            episode.append(ScenarioStep(.advance, seconds: 60))
            switch rng.next() % 4 {
            case 0:
                // Online, a rename of a folder another device deleted fails (the folder is gone).
                var rename = ScenarioStep(.folderRename, user: user, ref: folder, optional: true)
                rename.item = ScenarioItem(name: "folder \(folder) mine")
                episode.append(rename)
            case 1:
                episode.append(ScenarioStep(.folderDelete, user: user, ref: folder))
            default:
                if let item = mine.first {
                    // A later move into the folder, made offline, which another device may have
                    // deleted meanwhile. (Online, an app offers only the folders it knows.)
                    if !offlineLater { episode.append(ScenarioStep(.offline)) }
                    episode.append(ScenarioStep(.update, user: user, ref: item.ref, item: ScenarioItem(folder: folder), optional: true))
                }
            }
            episode.append(ScenarioStep(wasOffline ? .offline : .online))
            if wasLocked { episode.append(ScenarioStep(.lock, user: user)) }
            steps.insert(contentsOf: episode, at: at)
        }
        return steps
    }

    /// Whether the device is offline, and `user`'s vault locked, just before `steps[index]`.
    static func state(before index: Int, in steps: [ScenarioStep], user: String) -> (offline: Bool, locked: Bool) {
        var offline = false, locked = false
        for step in steps.prefix(index) {
            switch step.do {
            case .offline: offline = true
            case .online: offline = false
            case .lock where step.user == user: locked = true
            case .unlock where step.user == user: locked = false
            case .advance, .create, .update, .softDelete, .delete, .anotherDevice, .anotherDeviceDelete,
                 .anotherDeviceCreate, .createFolder, .lock, .unlock, .sync, .resolve, .retryDeadLetters, .fault, .crash, .compact,
                 .concurrently, .atEffect, .openView, .anotherDeviceFavorite, .anotherDeviceMove, .anotherDeviceRestore,
                 .anotherDeviceReencrypt, .coldStart, .login, .restore, .anotherDeviceAttach, .folderCreate, .folderRename,
                 .folderDelete, .anotherDeviceFolderRename, .anotherDeviceFolderDelete, .folderDiscard:
                break
            }
        }
        return (offline, locked)
    }

    /// The ref a folder name of a run stands for (`folder {ref}`, perhaps with a suffix a rename
    /// added); nil for any other name.
    static func folderRef(named name: String) -> String? {
        let words = name.split(separator: " ")
        guard words.count >= 2, words[0] == "folder" else { return nil }
        return String(words[1])
    }

    /// Invariant 15: no server item is in a folder the server does not have (an unknown id, or
    /// a folder deleted); and every folder the user created is on the server exactly once,
    /// unless the user or another device deleted it later (then not at all).
    /// After convergence, each device lists the server's folders, by name, once each (its kept
    /// folders follow every sync, folder call and resolution).
    static func folderViolations(scenario: Scenario, outcome: ScenarioOutcome) -> [String] {
        var violations: [String] = []
        let folders = outcome.actual.folders ?? [:]
        for (user, listed) in (outcome.actual.deviceFolders ?? [:]).sorted(by: { $0.key < $1.key })
        where outcome.actual.pending?[user] ?? 0 == 0 && listed != (folders[user] ?? []).sorted() {
            violations.append("invariant 15: \(user): the device lists the folders \(listed), the server has \((folders[user] ?? []).sorted())")
        }
        for (user, items) in (outcome.actual.server ?? [:]).sorted(by: { $0.key < $1.key }) {
            let existing = Set((folders[user] ?? []).compactMap(folderRef(named:)))
            for item in items {
                guard let folder = item.folder, !folder.isEmpty else { continue }
                if !existing.contains(folder) {
                    violations.append("invariant 15: \(user): server item \(item.name ?? "?") is in folder \(folder), which the server does not have")
                }
            }
        }
        let defaultUser = scenario.users?.first?.ref ?? "alice"
        for (index, step) in scenario.steps.enumerated() where step.do == .folderCreate {
            guard let ref = step.ref else { continue }
            let user = step.user ?? defaultUser
            // A delete among the sub-steps of a `concurrently` step counts too.
            let later: [ScenarioStep] = scenario.steps[(index + 1)...].flatMap { step -> [ScenarioStep] in [step] + (step.steps ?? []) }
            let deleted = later.contains { step in
                (step.do == .folderDelete || step.do == .anotherDeviceFolderDelete) && step.ref == ref
            }
            let count = (folders[user] ?? []).filter { folderRef(named: $0) == ref }.count
            if count != (deleted ? 0 : 1) {
                violations.append("invariant 15: \(user): folder \(ref) is on the server \(count) times (expected \(deleted ? 0 : 1)\(deleted ? ": deleted later" : ""))")
            }
        }
        return violations
    }
}
