import Foundation
import Testing
@testable import Replay

/// The simulation's restores from the trash: the generator makes them, and invariant 13 (a
/// restore the user made ends with the item active on the server) can fail.
@Suite struct RestoreSimulationTests {
    /// Over a few seeds every kind of restore episode appears: the user's restores (some made
    /// while offline, some online onto an edit in the trash saved offline), each after a trash
    /// move of the same item, and other devices' restores and permanent deletes of it.
    @Test func scenarios_restoreTrashedItems_offlineAndOnline() {
        var restores = 0, offlineRestores = 0, onlineAfterOfflineEdit = 0, otherDevice = Set<ScenarioAction>()
        for seed in UInt64(1)...40 {
            let steps = Simulation.scenario(seed: seed).steps
            for (index, step) in steps.enumerated() where step.do == .restore {
                restores += 1
                #expect(steps[..<index].contains { $0.do == .softDelete && $0.ref == step.ref }, "seed \(seed): a restore of \(step.ref ?? "?") before any trash move")
                let offline = Simulation.isOffline(steps, before: index)
                if offline { offlineRestores += 1 }
                if !offline, index >= 3, steps[index - 3].do == .update, steps[index - 3].ref == step.ref, steps[index - 2].do == .online {
                    onlineAfterOfflineEdit += 1
                }
            }
            for (index, step) in steps.enumerated() where [.anotherDeviceRestore, .anotherDeviceDelete].contains(step.do) {
                if steps[..<index].contains(where: { $0.do == .softDelete && $0.ref == step.ref }) { otherDevice.insert(step.do) }
            }
        }
        #expect(restores >= 20, "\(restores) restores over 40 seeds")
        #expect(offlineRestores >= 5 && restores - offlineRestores >= 5, "\(offlineRestores) of \(restores) offline")
        #expect(onlineAfterOfflineEdit >= 1)
        #expect(otherDevice == [.anotherDeviceRestore, .anotherDeviceDelete])
    }

    /// The sequential scenario of a seed is the same every time (the restores come from a
    /// generator of their own, seeded from the seed).
    @Test func restores_areDeterministic() {
        #expect(Simulation.scenario(seed: 12) == Simulation.scenario(seed: 12))
    }

    static let item = ScenarioItem(name: "sim bank", notes: "n1", username: "user", password: "pw-1")
    static let journal: [ScenarioJournalEntry] = [
        ScenarioJournalEntry(step: -1, ref: "bank", action: .initial, content: item, offline: false, pendingBefore: false, user: "u1"),
        ScenarioJournalEntry(step: 0, ref: "bank", action: .softDelete, content: nil, offline: false, pendingBefore: false, user: "u1"),
        ScenarioJournalEntry(step: 2, ref: "bank", action: .restore, content: nil, offline: true, pendingBefore: false, user: "u1"),
    ]

    /// The oracle: a restore whose item is still in the server's trash at the end is reported;
    /// the item active, or the restored version as an active backup, is not.
    @Test func invariant13_failsWhenTheRestoredItemStaysInTheTrash() {
        let trashed = ScenarioItemExpectation(name: "sim bank", password: "pw-1", notes: "n1", deleted: true, username: "user")
        let lost = Simulation.check(journal: Self.journal, pending: ["u1": 0], server: ["u1": [trashed]])
        #expect(lost.contains { $0.hasPrefix("invariant 13: bank:") }, "\(lost)")

        let active = ScenarioItemExpectation(name: "sim bank", password: "pw-1", notes: "n1", deleted: false, username: "user")
        #expect(Simulation.check(journal: Self.journal, pending: ["u1": 0], server: ["u1": [active]]).isEmpty)

        let backup = ScenarioItemExpectation(name: "sim bank - 2026-01-01 00:01:00", password: "pw-1", notes: "n1", deleted: false, username: "user")
        let other = ScenarioItemExpectation(name: "sim bank", password: "pw-1", notes: "other", deleted: true, username: "user")
        var withOther = Self.journal
        withOther.insert(ScenarioJournalEntry(step: 1, ref: "bank", action: .anotherDevice,
                                              content: ScenarioItem(name: "sim bank", notes: "other", username: "user", password: "pw-1"),
                                              offline: false, pendingBefore: false, user: "u1"), at: 2)
        #expect(!Simulation.check(journal: withOther, pending: ["u1": 0], server: ["u1": [other, backup]]).contains { $0.hasPrefix("invariant 13") })
    }
}
