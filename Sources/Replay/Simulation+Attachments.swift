import Foundation
@_spi(Tools) import OfflineSync
import VaultLogTesting

extension Simulation {
    // MARK: Attachments

    /// `steps` with up to three episodes, at random points, where another device adds an
    /// attachment to an item (each file named and filled uniquely for the seed). Then either that
    /// device often changes the item's password (a pending edit meets a server copy with the
    /// attachment: a backup of the server's copy), or a sync lets the device's copy learn the
    /// attachment, the user edits it (pending if the device is offline) and another device edits
    /// the item later (a backup of the local version) or deletes it (a re-create, whose file is
    /// gone). Invariant 14 checks the copies. From a generator of their own, like the compactions:
    /// the other steps of a seed stay what they were.
    static func insertingAttachments(into steps: [ScenarioStep], seed: UInt64, refs: [(ref: String, user: String)]) -> [ScenarioStep] {
        var rng = SplitMix64(seed: seed ^ 0xA77A_C4ED)
        guard !refs.isEmpty, rng.next() % 100 < 60 else { return steps }
        var steps = steps
        for n in 0..<(1 + Int(rng.next() % 3)) {
            let target = refs[Int(rng.next() % UInt64(refs.count))]
            let at = Int(rng.next() % UInt64(steps.count + 1))
            var attach = ScenarioStep(.anotherDeviceAttach, user: target.user, ref: target.ref, optional: true)
            attach.attachment = ScenarioAttachment(fileName: "sim-\(seed)-\(n).txt", contents: "attachment \(n) of seed \(seed)")
            var episode = [attach]
            let other = ScenarioStep(.anotherDevice, user: target.user, ref: target.ref,
                                     item: ScenarioItem(password: "sentinel-att-pw-\(seed)-\(n)"), optional: true)
            switch rng.next() % 3 {
            case 0:
                // The server's copy has the attachment when it meets a pending edit.
                if rng.next() % 2 == 0 { episode.append(ScenarioStep(.sync, user: target.user, optional: true)) }
                if rng.next() % 100 < 60 { episode.append(other) }
            default:
                // The device's copy learns the attachment, the user edits it (pending while the
                // device is offline), then another device edits the item later (the local version
                // is backed up) or deletes it (the local version is re-created).
                episode.append(ScenarioStep(.sync, user: target.user, optional: true))
                episode.append(ScenarioStep(.update, user: target.user, ref: target.ref,
                                            item: ScenarioItem(password: "sentinel-att-local-\(seed)-\(n)"), optional: true))
                episode.append(ScenarioStep(.advance, seconds: 60))
                episode.append(rng.next() % 2 == 0 ? other : ScenarioStep(.anotherDeviceDelete, user: target.user, ref: target.ref, optional: true))
            }
            steps.insert(contentsOf: episode, at: at)
        }
        return steps
    }
}
