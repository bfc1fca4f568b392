import ArgumentParser
import Foundation
import Replay

/// `vaultlog replay PATH...`: run scenario fixtures.
struct ReplayScenarios: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Run scenario fixtures and print a pass/fail table; a diff for each failure.",
        discussion: """
        Each PATH is a scenario file (.json) or a directory of them (not recursive). Scenarios run \
        against the embedded emulator with a fixed clock and seeded ids (Docs/Fixtures.md), so a \
        failure is reproducible. Exit 1 if any scenario fails, 2 for a malformed scenario.
        Progress is shown on stderr when stderr is a terminal.

        Examples:
          vaultlog replay Fixtures/scenarios
          vaultlog replay Fixtures/scenarios/10-update-conflict-server-newer.json --json
        """
    )

    @Argument(help: ArgumentHelp("Scenario files or directories of them.", valueName: "path"))
    var paths: [String]

    @Flag(help: "Print one JSON object per scenario instead of a table.")
    var json = false

    struct Row: Encodable {
        var file: String
        var name: String
        var passed: Bool
        var mismatches: [String]
        var error: String?
    }

    func run() async throws {
        var files: [String] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw CLIError.storage("no scenario file or directory at \(path)")
            }
            if isDirectory.boolValue {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
                files += names.filter { $0.hasSuffix(".json") }.sorted().map { (path as NSString).appendingPathComponent($0) }
            } else {
                files.append(path)
            }
        }
        guard !files.isEmpty else { throw CLIError.usage("no .json scenarios in \(paths.joined(separator: ", "))") }
        var runner = ScenarioRunner()
        runner.logger = Console.logger("vaultlog.replay")
        var rows: [Row] = []
        var malformed = false
        let progress = ProgressLine("replaying")
        for (index, file) in files.enumerated() {
            progress.update(index, of: files.count)
            do {
                let scenario = try Scenario.load(path: file)
                let outcome = try await runner.run(scenario)
                rows.append(Row(file: file, name: scenario.name, passed: outcome.passed, mismatches: outcome.mismatches))
            } catch let error as ReplayError {
                if case .malformed = error { malformed = true }
                rows.append(Row(file: file, name: (file as NSString).lastPathComponent, passed: false, mismatches: [], error: "\(error)"))
            } catch {
                rows.append(Row(file: file, name: (file as NSString).lastPathComponent, passed: false, mismatches: [], error: "\(error)"))
            }
        }
        progress.update(files.count, of: files.count)
        progress.finish()
        if json {
            for row in rows { try Console.json(row) }
        } else {
            for line in Format.table([["result", "scenario", "file"]] + rows.map { [$0.passed ? "pass" : "FAIL", $0.name, $0.file] }) {
                Console.out(line)
            }
            for row in rows where !row.passed {
                Console.out("")
                Console.out("\(row.name) (\(row.file)):")
                if let error = row.error { Console.out("  error: \(error)") }
                for line in row.mismatches { Console.out("  \(line)") }
            }
            Console.out("")
            Console.out("\(rows.filter(\.passed).count) passed, \(rows.filter { !$0.passed }.count) failed")
        }
        if malformed { throw ExitCode(ExitStatus.usage.rawValue) }
        if rows.contains(where: { !$0.passed }) { throw ExitCode(ExitStatus.problemsFound.rawValue) }
    }
}
