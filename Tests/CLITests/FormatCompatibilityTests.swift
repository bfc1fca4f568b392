import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import Replay
import Testing
import VaultCrypto
import VaultModel
import VaultLogTestSupport

/// `Fixtures/logs/format-vN.jsonl` is a log written by a build whose envelopes were of format N
/// (exported with `vaultlog export`): format 1, and format 2 (written by the build before format
/// 3, at b125b49). Every later version must still import and read each, with the same decoded
/// content: what `format-vN.expect.json` records.
@Suite struct FormatCompatibilityTests {
    static let logs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/logs")
    static func logFile(_ version: Int) -> String { logs.appendingPathComponent("format-v\(version).jsonl").path }
    static func expectFile(_ version: Int) -> String { logs.appendingPathComponent("format-v\(version).expect.json").path }
    static var logFile: String { logFile(1) }
    static var expectFile: String { expectFile(1) }
    /// The recorded logs, by envelope format.
    static let recordedVersions = [1, 2]

    typealias Expectation = RecordedLog.Expectation

    static func observe(storePath: String, email: String, password: String) throws -> Expectation {
        let store = try VaultLogStore(path: storePath)
        defer { store.close() }
        return try RecordedLog.observe(store: store, email: email, password: password)
    }

    /// Records the current format's log from the CLI tests' store, under its own name (run once
    /// per new envelope format, before a later one replaces it:
    /// `VAULTLOG_WRITE_FIXTURES=1 swift test --filter FormatCompatibilityTests`).
    @Test(.enabled(if: ProcessInfo.processInfo.environment["VAULTLOG_WRITE_FIXTURES"] != nil))
    func writeCurrentFormatFixture() throws {
        let fixture = StoreFixture.shared
        let version = Int(Envelope.currentFormatVersion)
        try FileManager.default.createDirectory(at: Self.logs, withIntermediateDirectories: true)
        let export = try CLI.run(["export", fixture.store, "--out", Self.logFile(version), "--force"])
        #expect(export.status == 0, "\(export)")
        let expectation = try Self.observe(storePath: fixture.store, email: StoreFixture.email, password: StoreFixture.password)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        try encoder.encode(expectation).write(to: URL(fileURLWithPath: Self.expectFile(version)))
    }

    @Test(arguments: recordedVersions)
    func recordedLog_importsAndReadsAsItWasWritten(version: Int) throws {
        let expected = try RecordedLog.loadExpectation(path: Self.expectFile(version))
        #expect(expected.events.count >= 9)
        let dir = TemporaryDirectory("format-v\(version)", create: true)
        let store = dir.file("store")
        let imported = try CLI.run(["import", Self.logFile(version), store])
        #expect(imported.status == 0, "\(imported)")
        let actual = try Self.observe(storePath: store, email: expected.email, password: expected.password)
        #expect(actual == expected, "\(RecordedLog.compare(expected, actual).joined(separator: "\n"))")
        let verify = try CLI.run(["verify", store, "--email", expected.email, "--password-stdin"], stdin: expected.password + "\n")
        #expect(verify.status == 0, "\(verify)")
    }

    @Test(arguments: recordedVersions)
    func recordedLog_envelopesAreOfItsVersion(version: Int) throws {
        let lines = try String(contentsOfFile: Self.logFile(version), encoding: .utf8).split(separator: "\n").dropFirst()
        #expect(!lines.isEmpty)
        for line in lines {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(object["formatVersion"] as? Int == version)
        }
    }

    /// A store imported from the format 2 log appends format 3 events chained onto its last
    /// one, and verifies with the key.
    @Test func format2Log_takesFormat3EventsAfterIt() async throws {
        let expected = try RecordedLog.loadExpectation(path: Self.expectFile(2))
        let dir = TemporaryDirectory("format-v2-then-3", create: true)
        let path = dir.file("store")
        let imported = try CLI.run(["import", Self.logFile(2), path])
        #expect(imported.status == 0, "\(imported)")
        do {
            let store = try VaultLogStore(path: path)
            defer { store.close() }
            let userId = try await store.unlock(email: expected.email, masterPassword: expected.password)
            let last = try #require(try store.log.envelopes(userId: userId).last)
            #expect(last.header.formatVersion == 2)
            try await store.append(userId: userId, cipherId: last.header.cipherId, type: .resolved,
                                   body: .outcome(OutcomeBody(at: BitwardenDate(Date(timeIntervalSince1970: 1_767_225_600)))))
            let new = try #require(try store.log.envelopes(userId: userId).last)
            #expect(new.header.formatVersion == 3 && new.header.previousMAC.map { $0[...] } == last.mac)
        }
        let verify = try CLI.run(["verify", path, "--email", expected.email, "--password-stdin"], stdin: expected.password + "\n")
        #expect(verify.status == 0, "\(verify)")
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
