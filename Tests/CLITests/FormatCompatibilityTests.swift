import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import Replay
import Testing
import VaultCrypto
import VaultModel
import VaultLogTestSupport

/// `Fixtures/logs/format-v1.jsonl` is a log written by envelope format 1 (exported with
/// `vaultlog export`). Every later version must still import and read it, with the same
/// decoded content: what `format-v1.expect.json` records.
@Suite struct FormatCompatibilityTests {
    static let logs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/logs")
    static var logFile: String { logs.appendingPathComponent("format-v1.jsonl").path }
    static var expectFile: String { logs.appendingPathComponent("format-v1.expect.json").path }

    typealias Expectation = RecordedLog.Expectation

    static func observe(storePath: String, email: String, password: String) throws -> Expectation {
        let store = try VaultLogStore(path: storePath)
        defer { store.close() }
        return try RecordedLog.observe(store: store, email: email, password: password)
    }

    /// Regenerates the fixture from the CLI tests' store (run once per new format version:
    /// `VAULTLOG_WRITE_FIXTURES=1 swift test --filter FormatCompatibilityTests`).
    @Test(.enabled(if: ProcessInfo.processInfo.environment["VAULTLOG_WRITE_FIXTURES"] != nil))
    func writeFormatV1Fixture() throws {
        let fixture = StoreFixture.shared
        try FileManager.default.createDirectory(at: Self.logs, withIntermediateDirectories: true)
        let export = try CLI.run(["export", fixture.store, "--out", Self.logFile, "--force"])
        #expect(export.status == 0, "\(export)")
        let expectation = try Self.observe(storePath: fixture.store, email: StoreFixture.email, password: StoreFixture.password)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        try encoder.encode(expectation).write(to: URL(fileURLWithPath: Self.expectFile))
    }

    @Test func formatV1Log_importsAndReadsAsItWasWritten() throws {
        let expected = try RecordedLog.loadExpectation(path: Self.expectFile)
        #expect(expected.events.count >= 9)
        let dir = TemporaryDirectory("format-v1", create: true)
        let store = dir.file("store")
        let imported = try CLI.run(["import", Self.logFile, store])
        #expect(imported.status == 0, "\(imported)")
        let actual = try Self.observe(storePath: store, email: expected.email, password: expected.password)
        #expect(actual == expected, "\(RecordedLog.compare(expected, actual).joined(separator: "\n"))")
        let verify = try CLI.run(["verify", store, "--email", expected.email, "--password-stdin"], stdin: expected.password + "\n")
        #expect(verify.status == 0, "\(verify)")
    }

    @Test func formatV1Log_envelopesAreVersion1() throws {
        let lines = try String(contentsOfFile: Self.logFile, encoding: .utf8).split(separator: "\n").dropFirst()
        #expect(!lines.isEmpty)
        for line in lines {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(object["formatVersion"] as? Int == 1)
        }
    }
}

/// `vaultlog replay` on recorded logs: the committed log passes, a broken expectation fails
/// with a readable diff.
@Suite struct RecordedLogReplayTests {
    @Test func replay_recordedLog_passes() throws {
        let result = try CLI.run(["replay", FormatCompatibilityTests.logFile])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("1 passed, 0 failed"))
    }

    @Test func replay_brokenLogExpectation_failsWithDiff() throws {
        let dir = TemporaryDirectory("replay-log", create: true)
        let log = dir.file("broken.jsonl")
        try FileManager.default.copyItem(atPath: FormatCompatibilityTests.logFile, toPath: log)
        var expected = try RecordedLog.loadExpectation(path: FormatCompatibilityTests.expectFile)
        expected.events[1].password = "not what was typed"
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(expected).write(to: URL(fileURLWithPath: dir.file("broken.expect.json")))
        let result = try CLI.run(["replay", log])
        #expect(result.status == 1, "\(result)")
        #expect(result.stdout.contains("event 2: expected"))
        #expect(result.stdout.contains("not what was typed"))
    }
}
