import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import Testing
import VaultCrypto
import VaultModel
import VaultLogTesting
import VaultLogTestSupport

/// Kill test of the writer (SQLite's crash tests, in spirit): a child process saves offline
/// edits and acknowledges each durable one; the parent SIGKILLs it at random moments, reopens
/// the store and checks that every acknowledged edit is there, nothing is torn (`verify` is
/// clean with the key), and the local store agrees with the log. `make test` runs 100 kills,
/// `make torture` 1,000 (`VAULTLOG_KILLS`); `VAULTLOG_KILL_SEED` picks the kill moments.
@Suite(.serialized) struct WriterKillTests {
    struct Ack: Equatable {
        let sequence: UInt64
        let cipherId: String
        let type: String
    }

    static let kills = Int(ProcessInfo.processInfo.environment["VAULTLOG_KILLS"] ?? "") ?? 100
    static let seed = UInt64(ProcessInfo.processInfo.environment["VAULTLOG_KILL_SEED"] ?? "") ?? 20261123

    /// Runs on a thread of its own: the kill loop sleeps and waits for processes, which must
    /// not hold one of the few Swift concurrency threads the other tests need.
    @Test func sigkillAtRandomMoments_losesNoAcknowledgedEdit() async throws {
        let binary = try #require(CLI.binary, "build the vaultlog binary first (swift build)")
        let problems = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[String], any Error>) in
            Thread.detachNewThread {
                continuation.resume(with: Result { try Self.killLoop(binary: binary) })
            }
        }
        #expect(problems.isEmpty, "\(problems.prefix(20).joined(separator: "\n"))")
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    /// The kill rounds; returns every problem found (tests record them on the test's task).
    static func killLoop(binary: String) throws -> [String] {
        var problems: [String] = []
        let dir = TemporaryDirectory("vaultlog-kill", create: true)
        let storePath = dir.file("store")
        let keyFile = dir.file("user.key")
        let key = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 5))
        try key.exportBase64().write(toFile: keyFile, atomically: true, encoding: .utf8)
        let killRng = SeededRandomSource(seed: Self.seed)
        var acked: [Ack] = []
        var killedMidWork = 0
        let start = Date()

        for round in 0..<Self.kills {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = ["stress-writer", storePath, "--user-key-file", keyFile, "--seed", "\(Self.seed &+ UInt64(round))"]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            // One kill in five lands at start-up (0–60 ms after launch); the others 0–300 ms
            // after the child's first acknowledgement, i.e. in the middle of writes however slow
            // the machine is to start a process.
            let roll = killRng.bytes(3).reduce(0) { $0 << 8 | Int($1) }
            var head = Data()
            if roll % 5 == 0 {
                usleep(UInt32(roll % 60_000))
            } else {
                head = Self.readFirstLine(of: output.fileHandleForReading, timeoutMilliseconds: 20_000)
                usleep(UInt32(roll % 300_000))
            }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            let text = String(decoding: head + output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            // A line cut by the kill has no newline: only whole lines were acknowledged.
            let lines = text.split(separator: "\n", omittingEmptySubsequences: true)
            let complete = text.hasSuffix("\n") ? lines : lines.dropLast()
            let roundAcks = complete.compactMap { line -> Ack? in
                let parts = line.split(separator: " ")
                guard parts.count == 4, parts[0] == "ack", let sequence = UInt64(parts[1]) else { return nil }
                return Ack(sequence: sequence, cipherId: String(parts[2]), type: String(parts[3]))
            }
            if !roundAcks.isEmpty { killedMidWork += 1 }
            acked += roundAcks
            guard FileManager.default.fileExists(atPath: (storePath as NSString).appendingPathComponent("data.mdb")) else { continue }
            problems += try Self.check(storePath: storePath, key: key, acked: acked, round: round)
        }
        if killedMidWork <= Self.kills / 2 {
            problems.append("most kills should land after some writes (\(killedMidWork) of \(Self.kills))")
        }
        print("kill test: \(Self.kills) SIGKILLs survived, \(acked.count) acknowledged edits checked, \(killedMidWork) kills mid-work, lost or torn = \(problems.count)\(problems.isEmpty ? " (all intact)" : ""); \(String(format: "%.1f", Date().timeIntervalSince(start))) s")
        return problems
    }

    /// Reads from `handle` until a newline arrived, the pipe closed or the time ran out; returns
    /// the bytes read (the rest of the output is read after the kill).
    static func readFirstLine(of handle: FileHandle, timeoutMilliseconds: Int32) -> Data {
        var data = Data()
        var pollFd = pollfd(fd: handle.fileDescriptor, events: Int16(POLLIN), revents: 0)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !data.contains(UInt8(ascii: "\n")), poll(&pollFd, 1, timeoutMilliseconds) > 0 {
            let count = read(handle.fileDescriptor, &buffer, buffer.count)
            if count <= 0 { break }
            data.append(contentsOf: buffer[0..<count])
        }
        return data
    }

    /// Every acknowledged edit is in the log as acknowledged; the log verifies clean; the local
    /// store holds exactly the latest version of every pending item.
    static func check(storePath: String, key: SymmetricCryptoKey, acked: [Ack], round: Int) throws -> [String] {
        var problems: [String] = []
        let store = try VaultLogStore(path: storePath)
        defer { store.close() }
        let user = "stress-user"
        store.unlock(userId: user, userKey: key)
        for ack in acked {
            guard let envelope = try store.log.envelope(at: ack.sequence) else {
                problems.append("round \(round): acknowledged event \(ack.sequence) is missing (LOST)")
                continue
            }
            if envelope.header.cipherId != ack.cipherId || VaultEventType(rawValue: envelope.header.eventType)?.description != ack.type {
                problems.append("round \(round): event \(ack.sequence) is not the acknowledged \(ack.type) of \(ack.cipherId)")
            }
        }
        let report = try store.log.verify(keys: [user: SealingKey(userKey: key)])
        if !report.isClean { problems.append("round \(round): verify: \(report.problems.prefix(3))") }
        let projection = try store.projection(userId: user)
        let locals = Dictionary(uniqueKeysWithValues: try store.localCiphers(userId: user).map { ($0.id!, $0) })
        for (id, change) in projection.pending {
            if change.changeType == .hardDelete, locals[id] != nil {
                problems.append("round \(round): \(id) was deleted but has a local copy")
            } else if change.changeType != .hardDelete, locals[id] != change.latest {
                problems.append("round \(round): local copy of \(id) differs from its latest event")
            }
        }
        for id in locals.keys where projection.pending[id] == nil { problems.append("round \(round): local \(id) has no pending event") }
        return problems
    }
}
