@testable import EventLog
import Foundation
import LMDB
@_spi(Tools) import OfflineSync
import Replay
import Testing
import VaultCrypto
import VaultModel
import VaultLogTesting
import VaultLogTestSupport

/// The reading commands on stores edited with LMDB directly (a copied envelope, a forged
/// pending checkpoint) and on an import ending at sequence 2^64 − 1: a clear error or a clean
/// answer, never a hang or a crash.
@Suite("vaultlog on edited stores")
struct UntrustedStoreCommandTests {
    let fixture = StoreFixture.shared

    /// Runs the binary, killing it after `seconds` (a command that loops must fail the test,
    /// not hang it).
    func run(_ arguments: [String], seconds: Double = 60) throws -> (result: RunResult, hung: Bool) {
        let binary = try #require(CLI.binary, "build the vaultlog binary first")
        let dir = TemporaryDirectory("vaultlog-run", create: true)
        let outPath = dir.file("stdout"), errPath = dir.file("stderr")
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        let hung = process.isRunning
        if hung { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return (RunResult(status: process.terminationStatus,
                          stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
                          stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""), hung)
    }

    /// A copy of the fixture store with event 3 (user A's) also stored under key 20 and listed
    /// in user A's index there.
    func copyWithMovedEnvelope() throws -> TemporaryDirectory {
        let copy = TemporaryDirectory("vaultlog-moved", create: true)
        try fixture.copyStore(to: copy.path)
        let environment = try Environment(path: copy.path)
        defer { environment.close() }
        let events = try environment.openDatabase("events", create: false)
        let users = try environment.openDatabase("users", create: false)
        try environment.write { txn in
            let bytes = try #require(try txn.get(events, key: sequenceKey(3)))
            try txn.put(events, key: sequenceKey(20), value: bytes)
            try txn.put(users, key: [UInt8(StoreFixture.userA.utf8.count)] + Array(StoreFixture.userA.utf8), value: sequenceKey(20))
        }
        return copy
    }

    @Test(arguments: ["events", "pending", "pending-with-key", "events-with-key"])
    func movedEnvelope_readingCommandsExit4NamingTheKey(command: String) throws {
        let copy = try copyWithMovedEnvelope()
        let arguments = [String(command.split(separator: "-")[0]), copy.path] + (command.hasSuffix("with-key") ? fixture.passwordArgs : [])
        let (result, hung) = try run(arguments)
        #expect(!hung, "vaultlog \(command) did not finish")
        #expect(result.status == 4, "\(result)")
        #expect(result.stderr.contains("key 20") && result.stderr.contains("event 3"), "\(result)")
    }

    @Test func movedEnvelope_verifyExits1NamingTheKey() throws {
        let copy = try copyWithMovedEnvelope()
        let (result, hung) = try run(["verify", copy.path] + fixture.passwordArgs)
        #expect(!hung)
        #expect(result.status == 1, "\(result)")
        #expect(result.stdout.contains("seq 20: stored under key 20 but its header (covered by the MAC) says event 3"), "\(result)")
    }

    @Test func forgedPendingCheckpoint_verifyExits1NamingTheUser() throws {
        let copy = TemporaryDirectory("vaultlog-forged", create: true)
        try fixture.copyStore(to: copy.path)
        do {
            let environment = try Environment(path: copy.path)
            defer { environment.close() }
            let pending = try environment.openDatabase("pending", create: false)
            // "Nothing pending as of event 9" (user A's last event), 13 bytes.
            let forged: [UInt8] = [1] + sequenceKey(9) + [0, 0, 0, 0]
            try environment.write { txn in
                try txn.put(pending, key: [UInt8(StoreFixture.userA.utf8.count)] + Array(StoreFixture.userA.utf8), value: forged)
            }
        }
        for key in [[], fixture.passwordArgs] {
            let (result, _) = try run(["verify", copy.path] + key)
            #expect(result.status == 1, "\(result)")
            #expect(result.stdout.contains("pending checkpoint of user user-a lists nothing pending"), "\(result)")
            #expect(result.stdout.contains("[derivedRecordMismatch]"), "\(result)")
        }
    }

    /// A crafted export whose last event sits at sequence 2^64 − 1, consistently chained and
    /// headed, is refused by the import (the store would have no sequence left for a new event);
    /// nothing is imported.
    @Test func importEndingAtTheLastSequence_isRefused_andImportsNothing() throws {
        let work = TemporaryDirectory("vaultlog-max", create: true)
        let export = try run(["export", fixture.store])
        #expect(export.result.status == 0, "\(export.result)")
        var lines = export.result.stdout.split(separator: "\n").map(String.init)
        var metadata = try ExportFormat.metadata(line: lines[0])
        // One more event of user A, sealed with A's key at sequence 2^64 − 1.
        let cipher = try CipherView(type: .login, name: "Last", notes: "n", id: "server-last", login: LoginView(username: "a", password: "last-pw"))
            .encrypt(userKey: fixture.userKey, random: SeededRandomSource(seed: 5))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let body = try Array(encoder.encode(OperationBody(cipher: cipher, passwordChanged: true, baseRevisionDate: nil,
                                                          at: BitwardenDate(Date(timeIntervalSince1970: 1_767_300_000)))))
        // Chained onto user A's last event, with A's head record moved to it, as an append would.
        let lastOfA = try #require(lines.dropFirst().map { try ExportFormat.envelope(line: $0) }
            .last { $0.header.userId == StoreFixture.userA })
        let key = SealingKey(userKey: fixture.userKey)
        let header = EventHeader(sequence: .max, userId: StoreFixture.userA, cipherId: "server-last",
                                 eventType: VaultEventType.created.rawValue, recordedAtMillis: 1_767_300_000_000,
                                 previousMAC: Array(lastOfA.mac))
        let envelope = try Envelope(bytes: Envelope.seal(header: header, body: body, key: key,
                                                         iv: [UInt8](repeating: 9, count: 16)[...]))
        metadata.eventCount += 1
        metadata.lastSequence = .max
        metadata.heads?[StoreFixture.userA] = Base64.encode(
            HeadRecord(userId: StoreFixture.userA, lastSequence: .max, chain: Array(envelope.mac)).sealed(key: key))
        lines[0] = try ExportFormat.encode(metadata)
        lines.append(try ExportFormat.encode(ExportFormat.EnvelopeLine(envelope)))
        try (lines.joined(separator: "\n") + "\n").write(toFile: work.file("max.jsonl"), atomically: true, encoding: .utf8)

        let store = work.file("store")
        let imported = try run(["import", work.file("max.jsonl"), store] + fixture.passwordArgs)
        #expect(imported.result.status == 4, "\(imported.result)")
        #expect(imported.result.stderr.contains("18446744073709551615") && imported.result.stderr.contains("beyond"), "\(imported.result)")
        let events = try run(["events", store]).result
        #expect(!events.stdout.contains("server-last"), "a refused import left events: \(events)")
    }
}
