import Foundation
import Replay
import Testing

/// The figure `Docs/Reliability.md` quotes: over a fixed set of generated conflicts (an offline
/// edit of one part of an item, another device's edit of one part, in either order), the backups
/// the original decision matrix makes against those made with merging. Disjoint parts: one backup
/// per conflict without merging, none with it, and the merged item holds both sides' changes.
/// The same part on both sides: the same backups either way.
@Suite struct MergeFigureTests {
    /// What each side can change; `favorite` only another device (the scenario's local edit has no flag).
    enum Part: String, CaseIterable { case name, notes, credential, favorite }

    struct Conflict {
        let item: Int
        let local: Part
        let server: Part
        let phoneFirst: Bool
    }

    /// The fixed set: every (local, server) pair of parts, in both orders, the local side one of
    /// name, notes, credential: 24 conflicts, 18 on disjoint parts and 6 on the same part.
    static let conflicts: [Conflict] = {
        var list: [Conflict] = []
        for local in [Part.name, .notes, .credential] {
            for server in Part.allCases {
                for phoneFirst in [false, true] { list.append(Conflict(item: list.count, local: local, server: server, phoneFirst: phoneFirst)) }
            }
        }
        return list
    }()

    static func original(_ i: Int) -> ScenarioItem {
        ScenarioItem(name: "Item \(i)", notes: "notes \(i)", username: "user", password: "pw-\(i)")
    }

    static func change(_ part: Part, of i: Int, by side: String) -> ScenarioItem? {
        switch part {
        case .name: ScenarioItem(name: "Item \(i) (\(side))")
        case .notes: ScenarioItem(notes: "notes \(i) \(side)")
        case .credential: ScenarioItem(password: "pw-\(i)-\(side)")
        case .favorite: nil
        }
    }

    static func scenario(_ conflicts: [Conflict], merge: Bool) -> Scenario {
        var steps: [ScenarioStep] = [ScenarioStep(.offline)]
        for c in conflicts {
            let ref = "item\(c.item)"
            let local = ScenarioStep(.update, ref: ref, item: change(c.local, of: c.item, by: "here"))
            let phone = c.server == .favorite ? ScenarioStep(.anotherDeviceFavorite, ref: ref)
                                              : ScenarioStep(.anotherDevice, ref: ref, item: change(c.server, of: c.item, by: "phone"))
            for step in c.phoneFirst ? [phone, local] : [local, phone] {
                steps += [ScenarioStep(.advance, seconds: 60), step]
            }
        }
        steps += [ScenarioStep(.online), ScenarioStep(.sync)]
        var scenario = Scenario(name: "merge-figure", seed: 43,
                                server: conflicts.map { ScenarioServerItem(ref: "item\($0.item)", item: original($0.item)) },
                                steps: steps, expect: ScenarioExpectation(pending: ["alice": 0]))
        scenario.merge = merge
        return scenario
    }

    /// The merged item: the original with both sides' parts.
    static func merged(_ c: Conflict) -> ScenarioItemExpectation {
        func value(_ part: Part) -> String? { c.local == part ? "here" : c.server == part ? "phone" : nil }
        return ScenarioItemExpectation(name: value(.name).map { "Item \(c.item) (\($0))" } ?? "Item \(c.item)",
                                       password: value(.credential).map { "pw-\(c.item)-\($0)" } ?? "pw-\(c.item)",
                                       notes: value(.notes).map { "notes \(c.item) \($0)" } ?? "notes \(c.item)",
                                       favorite: c.server == .favorite)
    }

    static func backups(_ outcome: ScenarioOutcome) -> Int {
        (outcome.actual.outcomes ?? [:]).values.reduce(0) { $0 + $1.filter { $0 == "backupCreated" }.count }
    }

    @Test func disjointConflicts_makeNoBackupWithMerging_andOneEachWithout() async throws {
        let disjoint = Self.conflicts.filter { $0.local != $0.server }
        var merging = Self.scenario(disjoint, merge: true)
        merging.expect.server = ["alice": disjoint.map(Self.merged)]
        let withMerge = try await ScenarioRunner().run(merging)
        let matrix = try await ScenarioRunner().run(Self.scenario(disjoint, merge: false))
        #expect(withMerge.passed, "\(withMerge.mismatches.joined(separator: "\n"))")
        #expect(matrix.passed, "\(matrix.mismatches.joined(separator: "\n"))")
        let (with, without) = (Self.backups(withMerge), Self.backups(matrix))
        print("merge figure: \(disjoint.count) conflicts on disjoint parts: \(without) backups with the original matrix, \(with) with merging")
        #expect(with == 0)
        #expect(without == disjoint.count)
    }

    @Test func sameParts_makeTheSameBackupsEitherWay() async throws {
        let overlapping = Self.conflicts.filter { $0.local == $0.server }
        let withMerge = try await ScenarioRunner().run(Self.scenario(overlapping, merge: true))
        let matrix = try await ScenarioRunner().run(Self.scenario(overlapping, merge: false))
        #expect(withMerge.passed && matrix.passed, "\(withMerge.mismatches + matrix.mismatches)")
        let (with, without) = (Self.backups(withMerge), Self.backups(matrix))
        print("merge figure: \(overlapping.count) conflicts on the same part: \(without) backups with the original matrix, \(with) with merging")
        #expect(with == without && without == overlapping.count)
        #expect(withMerge.actual.outcomes == matrix.actual.outcomes)
        #expect(withMerge.actual.server == matrix.actual.server)
    }
}
