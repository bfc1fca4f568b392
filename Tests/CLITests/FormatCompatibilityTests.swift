import EventLog
import Foundation
import OfflineSync
import Testing
import VaultCrypto
import VaultModel

/// `Fixtures/logs/format-v1.jsonl` is a log written by envelope format 1 (exported with
/// `vaultlog export`). Every later version must still import and read it, with the same
/// decoded content: what `format-v1.expect.json` records.
@Suite struct FormatCompatibilityTests {
    static let logs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/logs")
    static var logFile: String { logs.appendingPathComponent("format-v1.jsonl").path }
    static var expectFile: String { logs.appendingPathComponent("format-v1.expect.json").path }

    /// What a reader of the log must see.
    struct Expectation: Codable, Equatable {
        struct Event: Codable, Equatable {
            var sequence: UInt64
            var userId: String
            var cipherId: String
            var type: String
            /// Operations: the decrypted name and password of the snapshot.
            var name: String?
            var password: String?
            var passwordChanged: Bool?
            /// Outcomes: the reason and server id.
            var reason: String?
            var serverId: String?
        }
        var email: String
        var password: String
        var userId: String
        var events: [Event]
        /// User A's projection: pending change type and password-change count per cipher, id map.
        var pending: [String: String]
        var passwordChanges: [String: Int]
        var idMap: [String: String]
    }

    static func observe(storePath: String, email: String, password: String) throws -> Expectation {
        let store = try VaultLogStore(path: storePath)
        defer { store.close() }
        let userId = try store.unlock(email: email, masterPassword: password)
        let key = try store.userKey(userId: userId)
        let events = try store.events(userId: userId).map { event -> Expectation.Event in
            var e = Expectation.Event(sequence: event.sequence, userId: event.header.userId, cipherId: event.cipherId,
                                      type: event.type.description)
            if let op = event.operation {
                let view = try op.cipher.decrypt(userKey: key)
                e.name = view.name
                e.password = view.login?.password
                e.passwordChanged = op.passwordChanged
            }
            if let outcome = event.outcome {
                e.reason = outcome.reason
                e.serverId = outcome.serverId
            }
            return e
        }
        let projection = try store.projection(userId: userId)
        return Expectation(email: email, password: password, userId: userId, events: events,
                           pending: projection.pending.mapValues(\.changeType.rawValue),
                           passwordChanges: projection.pending.mapValues(\.offlinePasswordChangeCount),
                           idMap: projection.idMap)
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
        let expected = try JSONDecoder().decode(Expectation.self, from: Data(contentsOf: URL(fileURLWithPath: Self.expectFile)))
        #expect(expected.events.count >= 9)
        let dir = TemporaryDirectory("format-v1")
        let store = dir.file("store")
        let imported = try CLI.run(["import", Self.logFile, store])
        #expect(imported.status == 0, "\(imported)")
        let actual = try Self.observe(storePath: store, email: expected.email, password: expected.password)
        #expect(actual == expected)
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
