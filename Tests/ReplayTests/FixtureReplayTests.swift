import Foundation
import Testing
@testable import Replay

/// Every scenario under `Fixtures/scenarios` replays and meets its expectations.
@Suite struct FixtureReplayTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/scenarios")

    static let scenarioFiles: [String] = {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: fixtures.path)) ?? []
        return names.filter { $0.hasSuffix(".json") }.sorted()
    }()

    @Test func thereAreAtLeastFortyScenarios() {
        #expect(Self.scenarioFiles.count >= 40, "found \(Self.scenarioFiles.count) in \(Self.fixtures.path)")
    }

    @Test(arguments: scenarioFiles)
    func scenario_replaysAndMeetsItsExpectations(file: String) async throws {
        let scenario = try Scenario.load(path: Self.fixtures.appendingPathComponent(file).path)
        let outcome = try await ScenarioRunner().run(scenario)
        #expect(outcome.passed, "\(file):\n\(outcome.mismatches.joined(separator: "\n"))")
    }

    @Test func brokenExpectation_failsWithAReadableDiff() async throws {
        var scenario = try Scenario.load(path: Self.fixtures.appendingPathComponent("10-update-conflict-server-newer.json").path)
        scenario.expect.outcomes = ["bank": ["pushed", "resolved"]]
        scenario.expect.server = ["alice": [ScenarioItemExpectation(name: "Bank", password: "mine")]]
        let outcome = try await ScenarioRunner().run(scenario)
        #expect(!outcome.passed)
        #expect(outcome.mismatches.contains(#"outcomes.bank: expected ["pushed", "resolved"]"#))
        #expect(outcome.mismatches.contains(#"outcomes.bank:   actual ["backupCreated", "serverCopyKept", "resolved"]"#))
        #expect(outcome.mismatches.contains(#"server.alice: missing    {name="Bank", password="mine"}"#))
        #expect(outcome.mismatches.contains { $0.hasPrefix("server.alice: unexpected {name=\"Bank\", password=\"other\"") })
    }

    @Test func sameScenarioTwice_givesTheSameOutcomes() async throws {
        let scenario = try Scenario.load(path: Self.fixtures.appendingPathComponent("22-eight-password-changes-none-lost.json").path)
        let first = try await ScenarioRunner().run(scenario)
        let second = try await ScenarioRunner().run(scenario)
        #expect(first.actual == second.actual)
    }

    @Test func malformedScenario_isRefusedNamingTheFileAndField() throws {
        let path = NSTemporaryDirectory() + "bad-scenario-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(#"{"format": 1, "name": "x", "steps": [{"ref": "a"}], "expect": {}}"#.utf8).write(to: URL(fileURLWithPath: path))
        #expect {
            try Scenario.load(path: path)
        } throws: { error in
            let text = "\(error)"
            return text.contains(path) && text.contains("'do'") && text.contains("steps[0]")
        }
    }

    @Test func unknownFlavor_isRefusedNamingIt_notRunAsBitwarden() throws {
        let path = NSTemporaryDirectory() + "bad-flavor-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(#"{"format": 1, "name": "x", "flavor": "vaultwardn", "steps": [], "expect": {}}"#.utf8)
            .write(to: URL(fileURLWithPath: path))
        #expect {
            try Scenario.load(path: path)
        } throws: { error in
            let text = "\(error)"
            return text.contains(path) && text.contains("flavor") && text.contains("vaultwardn")
        }
    }

    @Test func scenarioDecode_withoutSteps_namesTheSourceAndTheMissingField() {
        #expect(throws: ReplayError.malformed(path: "inline.json", reason: "missing field 'steps' at the top level")) {
            try Scenario.decode(Data(#"{"format":1,"name":"x","expect":{}}"#.utf8), path: "inline.json")
        }
    }

    /// An unknown action is refused when the file is read (before anything runs), naming the
    /// step, the action and the ones that exist.
    @Test func unknownAction_isRefusedOnLoad_namingTheStepAndTheKnownActions() throws {
        let json = #"{"format": 1, "name": "bad", "steps": [{"do": "offline"}, {"do": "teleport"}], "expect": {}}"#
        #expect {
            try Scenario.decode(Data(json.utf8), path: "bad.json")
        } throws: { error in
            let text = "\(error)"
            return text.hasPrefix("bad.json: not a valid scenario") && text.contains("unknown action 'teleport'")
                && text.contains("steps[1].do") && text.contains("softDelete")
        }
    }

    @Test func hugeAdvance_isABadStepNotATrap() async throws {
        for seconds in [1e300, -1, Double.infinity] {
            let scenario = Scenario(name: "far", steps: [ScenarioStep(.advance, seconds: seconds)], expect: ScenarioExpectation())
            await #expect(throws: ReplayError.badStep(index: 0, reason: "'advance' needs 'seconds' from 0 to 3153600000 (100 years)")) {
                try await ScenarioRunner().run(scenario)
            }
        }
    }

    @Test(arguments: [0, -3, 5_000_000])
    func faultCountOutOfRange_isABadStepNotATrap(count: Int) async throws {
        let step = ScenarioStep(.fault, fault: ScenarioFault(failNext: count, path: "/api/sync"))
        let scenario = Scenario(name: "faults", steps: [step], expect: ScenarioExpectation())
        await #expect(throws: ReplayError.badStep(index: 0, reason: "'failNext' must be a count from 1 to 1000000 (got \(count))")) {
            try await ScenarioRunner().run(scenario)
        }
    }
}
