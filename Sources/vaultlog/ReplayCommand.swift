import ArgumentParser
import Foundation
@_spi(Tools) import OfflineSync
import Replay

/// `vaultlog replay PATH...`: run scenario fixtures.
struct ReplayScenarios: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Run scenario fixtures and print a pass/fail table; a diff for each failure.",
        discussion: """
        Each PATH is a scenario file (.json), a recorded log (.jsonl, an export with its \
        NAME.expect.json beside it), or a directory holding them (searched recursively). Scenarios run against \
        the embedded emulator with a fixed clock and seeded ids (Docs/Fixtures.md), so a failure is \
        reproducible; a recorded log is imported into a fresh store and read back. Exit 1 if any \
        fails, 2 for a malformed file.
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

    /// Imports a recorded log into a fresh store and compares what it reads with the expectation.
    func replayLog(_ file: String) throws -> Row {
        let expected = try RecordedLog.loadExpectation(path: RecordedLog.expectationPath(forLog: file))
        let scan = try Import.scan(file)
        let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("vaultlog-replay-log-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try Import.load(scan, into: Import.Target(directory))
        defer { store.close() }
        let actual = try RecordedLog.observe(store: store, email: expected.email, password: expected.password)
        var mismatches = RecordedLog.compare(expected, actual)
        let report = try store.log.verify(keys: [actual.userId: store.sealingKey(userId: actual.userId)])
        if !report.isClean { mismatches += report.problems.map { "verify: \($0)" } }
        return Row(file: file, name: (file as NSString).lastPathComponent, passed: mismatches.isEmpty, mismatches: mismatches)
    }

    func run() async throws {
        var files: [String] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw CLIError.storage("no scenario file or directory at \(path)")
            }
            if isDirectory.boolValue {
                // Recursive: `vaultlog replay Fixtures` runs scenarios/ and logs/.
                let names = FileManager.default.enumerator(atPath: path)?.compactMap { $0 as? String } ?? []
                files += names.filter { ($0.hasSuffix(".json") && !$0.hasSuffix(".expect.json")) || $0.hasSuffix(".jsonl") }
                    .sorted().map { (path as NSString).appendingPathComponent($0) }
            } else {
                files.append(path)
            }
        }
        guard !files.isEmpty else { throw CLIError.usage("no scenarios (.json) or recorded logs (.jsonl) in \(paths.joined(separator: ", "))") }
        var runner = ScenarioRunner()
        runner.logger = Console.logger("vaultlog.replay")
        // Scenarios inject faults on purpose: the resolver's warnings about them are expected.
        runner.logger.logLevel = .error
        var rows: [Row] = []
        var malformed = false
        let progress = ProgressLine("replaying")
        for (index, file) in files.enumerated() {
            progress.update(index, of: files.count)
            if file.hasSuffix(".jsonl") {
                do {
                    rows.append(try replayLog(file))
                } catch {
                    if error is ReplayError || (error as? CLIError)?.status == .usage { malformed = true }
                    rows.append(Row(file: file, name: (file as NSString).lastPathComponent, passed: false, mismatches: [], error: "\(error)"))
                }
                continue
            }
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
