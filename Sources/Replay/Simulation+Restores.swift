import Foundation
@_spi(Tools) import OfflineSync
import VaultLogTesting

extension Simulation {
    // MARK: Restores from the trash

    /// `steps` with 1 to 3 restore episodes, each a few steps after one of the user's trash
    /// moves (an item that had none gets none), drawn from a generator of their own: a restore
    /// online or offline, alone or followed by an edit; a restore that meets another device's
    /// permanent delete or its edit of the item in the trash (before or after the restore); a
    /// restore made online onto an item with pending state (an edit in the trash saved offline);
    /// and another device's restore or permanent delete of the trashed item, sometimes followed
    /// by the user's restore. Each episode leaves the network as it found it, so the steps
    /// around it mean what they meant.
    static func insertingRestores(into steps: [ScenarioStep], seed: UInt64) -> [ScenarioStep] {
        var rng = SplitMix64(seed: seed ^ 0x2E57_02E5)
        func chance(_ percent: UInt64) -> Bool { rng.next() % 100 < percent }
        let trashMoves = steps.indices.filter { steps[$0].do == .softDelete && steps[$0].ref != nil }
        guard !trashMoves.isEmpty else { return steps }
        var counter = 0
        var inserts: [(at: Int, episode: [ScenarioStep])] = []
        for _ in 0..<(1 + Int(rng.next() % 3)) {
            let trashAt = trashMoves[Int(rng.next() % UInt64(trashMoves.count))]
            let trash = steps[trashAt]
            let at = trashAt + 1 + Int(rng.next() % UInt64(min(6, steps.count - trashAt)))
            let wasOffline = isOffline(steps, before: at)
            func step(_ action: ScenarioAction, item: ScenarioItem? = nil) -> ScenarioStep {
                ScenarioStep(action, user: trash.user, ref: trash.ref, item: item, optional: true)
            }
            func edit() -> ScenarioStep {
                counter += 1
                return step(.update, item: chance(50) ? ScenarioItem(notes: "restored note \(seed)-\(counter)")
                                                      : ScenarioItem(password: "sentinel-pw-\(seed)-restore-\(counter)"))
            }
            func advance() -> ScenarioStep { ScenarioStep(.advance, seconds: Double(1 + rng.next() % 120)) }
            /// `body` offline, then the network as it was.
            func offline(_ body: [ScenarioStep]) -> [ScenarioStep] {
                wasOffline ? body : [ScenarioStep(.offline)] + body + [ScenarioStep(.online)]
            }
            var episode: [ScenarioStep]
            switch rng.next() % 6 {
            case 0:
                episode = [advance(), step(.restore)]
            case 1:
                episode = offline([advance(), step(.restore), advance(), edit()])
            case 2:
                episode = offline([advance(), step(.restore), advance(), ScenarioStep(.anotherDeviceDelete, user: trash.user, ref: trash.ref, optional: true)])
            case 3:
                counter += 1
                let other = ScenarioStep(.anotherDevice, user: trash.user, ref: trash.ref,
                                         item: ScenarioItem(notes: "other device in the trash \(seed)-\(counter)"), optional: true)
                episode = offline(chance(50) ? [advance(), other, advance(), step(.restore)]
                                             : [advance(), step(.restore), advance(), other])
            case 4:
                // Online onto pending state: an edit in the trash saved offline, then the restore online.
                let body = [advance(), edit(), ScenarioStep(.online), advance(), step(.restore)]
                episode = (wasOffline ? body : [ScenarioStep(.offline)] + body) + (wasOffline ? [ScenarioStep(.offline)] : [])
            default:
                let other = ScenarioStep(chance(50) ? .anotherDeviceRestore : .anotherDeviceDelete, user: trash.user, ref: trash.ref, optional: true)
                episode = [advance(), other] + (chance(50) ? offline([advance(), step(.restore)]) : [])
            }
            if chance(30) { episode.append(ScenarioStep(.sync, user: trash.user, optional: true)) }
            inserts.append((at, episode))
        }
        var result = steps
        // From the last position back, so each insert's position still names the step it meant.
        for insert in inserts.sorted(by: { $0.at > $1.at }) {
            result.insert(contentsOf: insert.episode, at: insert.at)
        }
        return result
    }

    /// Whether the device is offline just before `index` (the last `offline`/`online` step before it).
    static func isOffline(_ steps: [ScenarioStep], before index: Int) -> Bool {
        steps[..<index].last { $0.do == .offline || $0.do == .online }?.do == .offline
    }
}
