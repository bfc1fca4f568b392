import Foundation
import VaultLogTesting

extension Simulation {
    // MARK: The concurrent mode

    /// The kinds of episode the concurrent mode adds (each names the class of bug it is
    /// there to find).
    enum Episode: CaseIterable {
        /// Two or three syncs and resolution runs at once on one shared resolver, over
        /// offline creates and edits (duplicate creates and backups).
        case concurrentSyncs
        /// A save of an item with pending state (the repository resolves it at once) racing a
        /// full sync.
        case saveRacingSync
        /// A save (edit, trash move, permanent delete, create) right after the n-th server
        /// effect of a resolution (a save lost to the resolution in flight).
        case saveAtEffect
        /// A pending trash move or permanent delete meets another device's change that keeps
        /// the encrypted name (favourite, folder move, restore) or the fields (a new encryption).
        case deleteMeetsAnotherDevice
        /// Two screens: one saves other fields while the other holds a stale view, then saves a
        /// new password from it.
        case staleView
        /// The app starts offline without session tokens and the user edits.
        case coldOfflineStart
        /// A folder deleted while an item in it is saved, at once (offline): the
        /// move of the folder's local items must neither undo the save nor leave the item in
        /// the deleted folder.
        case folderDeleteRacingSave

        /// The letter after `k` in the refs of the episode's items.
        var letter: String {
            switch self {
            case .concurrentSyncs: "c"
            case .saveRacingSync: "r"
            case .saveAtEffect: "e"
            case .deleteMeetsAnotherDevice: "d"
            case .staleView: "v"
            case .coldOfflineStart: "s"
            case .folderDeleteRacingSave: "f"
            }
        }
    }

    /// `steps` with 2 to 4 self-contained episodes inserted at random points of the sequential
    /// steps (never between a `crash` and the sync it belongs to, nor inside another episode),
    /// from a generator of their own: every other step of
    /// the seed is what the sequential mode generates. Each episode works on items it creates
    /// (refs `kc0`, `ke1`, …: the letter names the episode), sets the network and the user's lock as it needs them and puts them
    /// back as they were.
    static func insertingEpisodes(into base: [ScenarioStep], seed: UInt64, users: [ScenarioUser]) -> [ScenarioStep] {
        var rng = SplitMix64(seed: seed ^ 0x5EED_C0DE)
        func chance(_ percent: UInt64) -> Bool { rng.next() % 100 < percent }
        var episodes: [(at: Int, steps: [ScenarioStep])] = []
        var serial = 0
        var counter = 0
        func password() -> String {
            counter += 1
            return "sentinel-pw-\(seed)-k\(counter)"
        }
        for _ in 0..<(2 + Int(rng.next() % 3)) {
            // A point of the sequential steps (never inside another episode: each one sets the
            // network, the lock and the session as it needs and puts them back).
            var at = Int(rng.next() % UInt64(base.count + 1))
            while at > 0, base[at - 1].do == .crash { at -= 1 }
            let user = users[Int(rng.next() % UInt64(users.count))].ref
            // The state at that point: the network and the user's lock.
            var wasOffline = false
            var wasLocked = false
            for step in base[..<at] {
                if step.do == .offline || step.do == .online { wasOffline = step.do == .offline }
                if step.do == .lock || step.do == .unlock, (step.user ?? users[0].ref) == user { wasLocked = step.do == .lock }
            }
            var episode: [ScenarioStep] = wasLocked ? [ScenarioStep(.unlock, user: user)] : []
            var offline = wasOffline
            func setOffline(_ value: Bool) {
                guard offline != value else { return }
                offline = value
                episode.append(ScenarioStep(value ? .offline : .online))
            }
            let kind = Episode.allCases[Int(rng.next() % UInt64(Episode.allCases.count))]
            /// Refs name their episode (`kc3`: the fourth item, made by a `concurrentSyncs`
            /// episode), so a violation names the class of bug it belongs to.
            func newRef() -> String {
                defer { serial += 1 }
                return "k\(kind.letter)\(serial)"
            }
            func create(_ ref: String) {
                counter += 1
                episode.append(ScenarioStep(.create, user: user, ref: ref, item: ScenarioItem(
                    name: "sim \(seed) \(ref)", notes: "note \(seed)-\(counter)", username: "user", password: password()), optional: true))
            }
            func update(_ ref: String, password change: Bool, view: String? = nil) -> ScenarioStep {
                counter += 1
                return ScenarioStep(.update, user: user, ref: ref, item: change ? ScenarioItem(password: password())
                                    : ScenarioItem(notes: "note \(seed)-\(counter)"), optional: true, view: view)
            }
            /// An item on the server and in the local store (created online, then synced).
            func synced() -> String {
                let ref = newRef()
                setOffline(false)
                create(ref)
                episode.append(ScenarioStep(.sync, user: user, optional: true))
                return ref
            }
            let sync = ScenarioStep(.sync, user: user, optional: true)
            switch kind {
            case .concurrentSyncs:
                setOffline(true)
                let created = (0..<(1 + Int(rng.next() % 3))).map { _ in newRef() }
                for ref in created { create(ref) }
                if chance(50) { episode.append(update(created[0], password: chance(70))) }
                setOffline(false)
                var runs = [sync, chance(50) ? sync : ScenarioStep(.resolve, user: user, optional: true)]
                if chance(40) { runs.append(sync) }
                episode.append(ScenarioStep(.concurrently, user: user, optional: true, steps: runs))
            case .saveRacingSync:
                let ref = synced()
                setOffline(true)
                for _ in 0..<(1 + Int(rng.next() % 5)) { episode.append(update(ref, password: true)) }
                setOffline(false)
                let save = update(ref, password: chance(60))
                episode.append(ScenarioStep(.concurrently, user: user, optional: true, steps: chance(50) ? [save, sync] : [sync, save]))
            case .saveAtEffect:
                let ref = synced()
                setOffline(true)
                for _ in 0..<(1 + Int(rng.next() % 6)) { episode.append(update(ref, password: true)) }
                if chance(30) {
                    counter += 1
                    episode.append(ScenarioStep(.anotherDevice, user: user, ref: ref, item: ScenarioItem(notes: "other device \(seed)-\(counter)"),
                                                optional: true))
                }
                setOffline(false)
                let save: ScenarioStep
                switch rng.next() % 5 {
                case 0: save = update(ref, password: true)
                case 1: save = update(ref, password: false)
                case 2: save = ScenarioStep(.softDelete, user: user, ref: ref, optional: true)
                case 3: save = ScenarioStep(.delete, user: user, ref: ref, optional: true)
                default:
                    let other = newRef()
                    counter += 1
                    save = ScenarioStep(.create, user: user, ref: other, item: ScenarioItem(
                        name: "sim \(seed) \(other)", notes: "note \(seed)-\(counter)", username: "user", password: password()), optional: true)
                }
                // Half the time the network blips around the save: it is saved offline while
                // the resolution is in flight.
                let saves = chance(50) ? [ScenarioStep(.offline), save, ScenarioStep(.online)] : [save]
                episode.append(ScenarioStep(.atEffect, afterEffect: 1 + Int(rng.next() % 4), steps: saves))
                episode.append(sync)
            case .deleteMeetsAnotherDevice:
                let ref = synced()
                if chance(25) {
                    // Trashed online first; then deleted for good offline, and another device
                    // restores it meanwhile.
                    episode.append(ScenarioStep(.softDelete, user: user, ref: ref, optional: true))
                    episode.append(sync)
                    setOffline(true)
                    episode.append(ScenarioStep(.delete, user: user, ref: ref, optional: true))
                    episode.append(ScenarioStep(.anotherDeviceRestore, user: user, ref: ref, optional: true))
                } else {
                    let folder = "fk\(serial)-\(user)"
                    let change = rng.next() % 4
                    if change == 1 { episode.append(ScenarioStep(.createFolder, user: user, ref: folder)) }
                    setOffline(true)
                    episode.append(ScenarioStep(chance(50) ? .delete : .softDelete, user: user, ref: ref, optional: true))
                    switch change {
                    case 0: episode.append(ScenarioStep(.anotherDeviceFavorite, user: user, ref: ref, optional: true))
                    case 1: episode.append(ScenarioStep(.anotherDeviceMove, user: user, ref: ref, item: ScenarioItem(folder: folder), optional: true))
                    case 2: episode.append(ScenarioStep(.anotherDeviceReencrypt, user: user, ref: ref, optional: true))
                    default:
                        counter += 1
                        episode.append(ScenarioStep(.anotherDevice, user: user, ref: ref, item: ScenarioItem(notes: "other device \(seed)-\(counter)"),
                                                    optional: true))
                    }
                }
                setOffline(false)
                episode.append(sync)
            case .staleView:
                let ref = synced()
                let view = "A\(serial)"
                episode.append(ScenarioStep(.openView, user: user, ref: ref, optional: true, view: view))
                setOffline(chance(50))
                counter += 1
                episode.append(ScenarioStep(.update, user: user, ref: ref, item: chance(50) ? ScenarioItem(notes: "note \(seed)-\(counter)")
                                            : ScenarioItem(username: "user \(seed)-\(counter)"), optional: true))
                if chance(30) { setOffline(false); episode.append(sync) }
                setOffline(chance(50))
                var stale = ScenarioItem(password: password())
                if chance(30) { counter += 1; stale.notes = "note \(seed)-\(counter)" }
                episode.append(ScenarioStep(.update, user: user, ref: ref, item: stale, optional: true, view: view))
                setOffline(false)
                episode.append(sync)
            case .folderDeleteRacingSave:
                setOffline(false)
                let folder = "nk\(serial)-\(user)"
                episode.append(ScenarioStep(.folderCreate, user: user, ref: folder))
                let ref = newRef()
                counter += 1
                episode.append(ScenarioStep(.create, user: user, ref: ref, item: ScenarioItem(
                    name: "sim \(seed) \(ref)", notes: "note \(seed)-\(counter)", username: "user", password: password(), folder: folder),
                    optional: true))
                episode.append(sync)
                // Offline both are saved in the log; online, the save's PUT may reach the server
                // after the folder's DELETE (and then names a folder that is gone).
                let online = chance(50)
                if online && chance(50) {
                    // A pending edit first: the online save then goes through the resolver.
                    setOffline(true)
                    episode.append(update(ref, password: false))
                }
                setOffline(!online)
                let save = update(ref, password: chance(50))
                let delete = ScenarioStep(.folderDelete, user: user, ref: folder)
                episode.append(ScenarioStep(.concurrently, user: user, optional: true, steps: chance(50) ? [save, delete] : [delete, save]))
                setOffline(false)
                episode.append(sync)
            case .coldOfflineStart:
                let ref = synced()
                setOffline(true)
                episode.append(ScenarioStep(.coldStart))
                episode.append(update(ref, password: true))
                if chance(50) { episode.append(update(ref, password: false)) }
                if chance(40) { create(newRef()) }
                setOffline(false)
                episode.append(ScenarioStep(.login))
                episode.append(sync)
            }
            setOffline(wasOffline)
            if wasLocked { episode.append(ScenarioStep(.lock, user: user)) }
            episodes.append((at, episode))
        }
        var steps = base
        for (at, episode) in episodes.enumerated().sorted(by: { ($0.element.at, $0.offset) > ($1.element.at, $1.offset) }).map(\.element) {
            steps.insert(contentsOf: episode, at: at)
        }
        return steps
    }
}
