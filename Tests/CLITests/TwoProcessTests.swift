import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import Synchronization
import Testing
import VaultCrypto
import VaultModel
import VaultLogTesting
import VaultLogTestSupport

/// One store opened by two processes at once, as an iOS app and its autofill extension do:
/// real child processes (`vaultlog stress-writer`, `vaultlog compact`) beside this test process
/// or each other. Every acknowledged save must be in the log afterwards, with strictly
/// increasing sequences never handed out twice, and `verify` clean; the file rewrite of
/// compaction is refused before it changes anything while another process has the store open;
/// the pending-count stream of one process follows the other's saves within a second.
/// `make test` runs 6 rounds of the compaction race, `make torture` 60
/// (`VAULTLOG_TWO_PROCESS_ROUNDS`).
@Suite(.serialized, .timeLimit(.minutes(5))) struct TwoProcessTests {
    static let rounds = Int(ProcessInfo.processInfo.environment["VAULTLOG_TWO_PROCESS_ROUNDS"] ?? "") ?? 6
    static let seed = UInt64(ProcessInfo.processInfo.environment["VAULTLOG_KILL_SEED"] ?? "") ?? 20261128
    static let writerUser = "stress-user"

    /// (1) The app compacts and rewrites while the extension is saving: refused before anything
    /// changes (the horizon stays 0, every event of the compacted user is there), with an error
    /// that names the store and says what to do; the writer loses nothing.
    @Test func compactAndClose_whileAnotherProcessWrites_isRefusedBeforeAnyChange() async throws {
        let binary = try #require(CLI.binary, "build the vaultlog binary first (swift build)")
        let fixture = try HistoryFixture()
        let writerKey = try Self.writerKey(in: fixture.dir)
        let before = try Self.userEvents(fixture.store)
        let writer = try Child(binary, ["stress-writer", fixture.store, "--user-key-file", writerKey.file, "--seed", "\(Self.seed)"])
        defer { writer.kill() }
        try #require(writer.waitForLines(3, within: 30), "the writer acknowledged nothing: \(writer.stderr)")

        let store = try VaultLogStore(path: fixture.store)
        store.unlock(userId: HistoryFixture.userId, userKey: fixture.userKey)
        var refusal: (any Error)?
        do {
            _ = try store.compactAndCloseBlocking(userIds: [HistoryFixture.userId], policy: RetentionPolicy(keepDays: 0, keepVersions: 1))
        } catch {
            refusal = error
        }
        let message = refusal.map { "\($0)" } ?? "no error"
        #expect(refusal != nil, "the rewrite ran beside another process's open store")
        #expect(message.contains("another process has the store at \(fixture.store) open") && message.contains("close the app")
                && message.contains("nothing was changed"), "\(message)")
        #expect((refusal as? LocalizedError)?.errorDescription == message, "localizedDescription says the same")
        // Nothing changed: the user's log is as it was, while the writer goes on.
        let reopened = try VaultLogStore(path: fixture.store)
        #expect(try reopened.horizon(userId: HistoryFixture.userId) == 0, "compacted before refusing")
        #expect(try reopened.log.read { try $0.sequences(userId: HistoryFixture.userId, cipherId: nil) } == before)
        reopened.close()

        try #require(writer.waitForLines(writer.lines.count + 3, within: 30), "the writer stopped: \(writer.stderr)")
        writer.kill()
        let problems = try Self.check(fixture.store, acks: [writer.acks], keys: [Self.writerUser: writerKey.key, HistoryFixture.userId: fixture.userKey])
        #expect(problems.isEmpty, "\(problems.prefix(10).joined(separator: "\n"))")
    }

    /// (1) `vaultlog compact` started while another process starts saving at a random moment
    /// of its run: either the compaction is refused before it changes anything (exit 4, the
    /// message naming the store) or the writer waits for the new file; never a commit written
    /// into the replaced file, never a sequence handed out twice.
    @Test func compactCommand_withAWriterStartingDuringTheRun_losesNoCommit() async throws {
        let binary = try #require(CLI.binary, "build the vaultlog binary first (swift build)")
        let problems = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[String], any Error>) in
            Thread.detachNewThread { continuation.resume(with: Result { try Self.compactionRace(binary: binary) }) }
        }
        #expect(problems.isEmpty, "\(problems.prefix(20).joined(separator: "\n"))")
    }

    static func compactionRace(binary: String) throws -> [String] {
        // 8,000 events: the run lasts long enough (about 0.7 s here) for a writer to start in it.
        let fixture = try HistoryFixture(items: 100, edits: 40)
        let writerKey = try writerKey(in: fixture.dir)
        let pristine = fixture.dir.file("pristine")
        try FileManager.default.createDirectory(atPath: pristine, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: fixture.store + "/data.mdb", toPath: pristine + "/data.mdb")
        let arguments = ["--keep-days", "0", "--keep-versions", "1", "--user-key-file", fixture.keyFile, "--user", HistoryFixture.userId]
        let work = fixture.dir.file("work")
        try CompactionKillTests.reset(work, from: pristine)
        let started = Date()
        let full = try CLI.run(via: binary, ["compact", work] + arguments)
        let duration = Date().timeIntervalSince(started)
        guard full.status == 0 else { return ["the compaction alone failed: \(full)"] }
        let compactedHorizon = try CompactionKillTests.horizon(of: work)

        var problems: [String] = []
        var outcomes = (refused: 0, rewritten: 0)
        let random = SeededRandomSource(seed: seed)
        for round in 0..<rounds {
            try CompactionKillTests.reset(work, from: pristine)
            // Odd rounds: the writer starts at a moment uniform over the compaction's run (it
            // needs some of it to start up). Even rounds: the writer first, the compaction up to
            // 150 ms later (while the writer starts up, or once it has the store open).
            let fraction = Double(random.bytes(2).reduce(0) { $0 << 8 | Int($1) }) / 65_536
            let writerFirst = round % 2 == 0
            let writerArguments = ["stress-writer", work, "--user-key-file", writerKey.file, "--seed", "\(seed &+ UInt64(round))"]
            let compact: Child, writer: Child
            if writerFirst {
                writer = try Child(binary, writerArguments)
                usleep(UInt32(fraction * 150_000))
                compact = try Child(binary, ["compact", work] + arguments)
            } else {
                compact = try Child(binary, ["compact", work] + arguments)
                usleep(UInt32(fraction * 0.9 * duration * 1_000_000))
                writer = try Child(binary, writerArguments)
            }
            let status = compact.wait()
            // Saves after the compaction ended (into the new file, or the old one that was kept).
            let target = writer.lines.count + 5
            if !writer.waitForLines(target, within: 30) { problems.append("round \(round): the writer stopped: \(writer.stderr)") }
            writer.kill()
            let horizon = try CompactionKillTests.horizon(of: work)
            switch status {
            case 0:
                outcomes.rewritten += 1
                if horizon != compactedHorizon { problems.append("round \(round): compacted to \(horizon), expected \(compactedHorizon)") }
            case 4:
                outcomes.refused += 1
                if !compact.stderr.contains("another process has the store at \(work) open") || !compact.stderr.contains("nothing was changed") {
                    problems.append("round \(round): the refusal does not say what happened: \(compact.stderr)")
                }
                if horizon != 0 { problems.append("round \(round): refused, yet compacted to \(horizon)") }
            default:
                problems.append("round \(round): compact exited \(status): \(compact.stderr)")
            }
            problems += try check(work, acks: [writer.acks], keys: [writerUser: writerKey.key, HistoryFixture.userId: fixture.userKey])
                .map { "round \(round) (\(writerFirst ? "compaction started \(Int(fraction * 150)) ms after the writer" : "writer started at \(Int(fraction * 90)) % of the run")): \($0)" }
        }
        print("two-process compaction race: \(rounds) rounds beside a writer (a \(Int(duration * 1000)) ms run alone); "
              + "\(outcomes.refused) refused before any change, \(outcomes.rewritten) rewritten with the writer waiting; \(problems.count) problems")
        return problems
    }

    /// (2) The logical compaction (no file rewrite) in this process while another process
    /// saves edits of the same user: every acknowledged save is there, the compaction removed
    /// the old history, `verify` is clean.
    @Test func compaction_whileAnotherProcessSavesToTheSameUser_losesNoCommit() async throws {
        let binary = try #require(CLI.binary, "build the vaultlog binary first (swift build)")
        let fixture = try HistoryFixture(items: 50, edits: 20)
        let writer = try Child(binary, ["stress-writer", fixture.store, "--user", HistoryFixture.userId, "--user-key-file", fixture.keyFile,
                                        "--seed", "\(Self.seed)"])
        defer { writer.kill() }
        try #require(writer.waitForLines(2, within: 30), "the writer acknowledged nothing: \(writer.stderr)")
        let store = try VaultLogStore(path: fixture.store)
        store.unlock(userId: HistoryFixture.userId, userKey: fixture.userKey)
        // Events of the last day stay: the writer's; the fixture's (2026-01-01) go, in small steps.
        let result = try await store.compact(userId: HistoryFixture.userId, policy: RetentionPolicy(keepDays: 1, keepVersions: 1),
                                       eventsPerTransaction: 100)
        #expect(result.transactions > 5 && result.counts.removedEvents >= 2000, "\(result)")
        store.close()
        try #require(writer.waitForLines(writer.lines.count + 3, within: 30), "the writer stopped: \(writer.stderr)")
        writer.kill()
        let problems = try Self.check(fixture.store, acks: [writer.acks], keys: [HistoryFixture.userId: fixture.userKey], user: HistoryFixture.userId)
        #expect(problems.isEmpty, "\(problems.prefix(10).joined(separator: "\n"))")
    }

    /// (3) This process's pending-count stream sees another process's save (within the wait;
    /// the latency is printed) and never repeats a value.
    @Test func pendingCountStream_seesAnotherProcessesSave_andNeverRepeatsAValue() async throws {
        let binary = try #require(CLI.binary, "build the vaultlog binary first (swift build)")
        let dir = TemporaryDirectory("vaultlog-two-stream", create: true)
        let writerKey = try Self.writerKey(in: dir)
        let path = dir.file("store")
        let store = try VaultLogStore(path: path)
        defer { store.close() }
        store.unlock(userId: Self.writerUser, userKey: writerKey.key)
        let seen = Locked<[(count: Int, at: Date)]>([])
        let consumer = Task {
            for await count in store.pendingCountUpdates(userId: Self.writerUser) { seen.withLock { $0.append((count, Date())) } }
        }
        defer { consumer.cancel() }
        #expect(await Self.waitFor(within: 5) { seen.withLock { $0.map(\.count) } == [0] }, "the current count first")

        for expected in 1...2 {
            let writer = try Child(binary, ["stress-writer", path, "--user-key-file", writerKey.file, "--own-items", "--operations", "1",
                                            "--seed", "\(Self.seed &+ UInt64(expected))"])
            #expect(writer.wait() == 0, "\(writer.stderr)")
            let ack = try #require(writer.lineTimes.last, "the writer acknowledged nothing: \(writer.stderr)")
            // A creation (the writer's first edit of its own items): one more pending item.
            let arrived = await Self.waitFor(within: 5) { seen.withLock { $0.last?.count } == expected }
            let at = seen.withLock { $0.last(where: { $0.count == expected })?.at }
            #expect(arrived, "the stream never showed \(expected): \(seen.withLock { $0.map(\.count) })")
            // The watcher polls every 250 ms; the latency is printed, not asserted (a loaded
            // two-core machine takes longer, and speed belongs in benchmarks).
            if let at { print("pending-count stream: another process's save shown after \(String(format: "%.3f", at.timeIntervalSince(ack))) s") }
        }
        let counts = seen.withLock { $0.map(\.count) }
        #expect(zip(counts, counts.dropFirst()).allSatisfy { $0 != $1 }, "a value repeated: \(counts)")
    }

    /// (4) Two processes save into one store at once, edits of the same user interleaved:
    /// every acknowledged save is there as acknowledged, sequences are unique and increase
    /// within each process, the local store holds each pending item's latest version.
    @Test func interleavedSavesFromTwoProcesses_areAllThere() async throws {
        let binary = try #require(CLI.binary, "build the vaultlog binary first (swift build)")
        let dir = TemporaryDirectory("vaultlog-two-writers", create: true)
        let writerKey = try Self.writerKey(in: dir)
        let path = dir.file("store")
        let writers = try (0..<2).map { n in
            try Child(binary, ["stress-writer", path, "--user-key-file", writerKey.file, "--own-items", "--operations", "60",
                               "--seed", "\(Self.seed &+ UInt64(100 + n))"])
        }
        for writer in writers { #expect(writer.wait() == 0, "\(writer.stderr)") }
        let acks = writers.map(\.acks)
        #expect(acks.allSatisfy { $0.count == 60 }, "\(acks.map(\.count))")
        let first = Set(acks[0].map(\.sequence)), second = Set(acks[1].map(\.sequence))
        #expect(first.min()! < second.max()! && second.min()! < first.max()!, "the two processes' saves did not interleave")
        let problems = try Self.check(path, acks: acks, keys: [Self.writerUser: writerKey.key])
        #expect(problems.isEmpty, "\(problems.prefix(10).joined(separator: "\n"))")
    }

    // MARK: Support

    /// A user key for the writer, in a file.
    static func writerKey(in dir: TemporaryDirectory) throws -> (key: SymmetricCryptoKey, file: String) {
        let key = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 77))
        let file = dir.file("writer.key")
        try key.exportBase64().write(toFile: file, atomically: true, encoding: .utf8)
        return (key, file)
    }

    static func userEvents(_ path: String) throws -> [UInt64] {
        let store = try VaultLogStore(path: path)
        defer { store.close() }
        return try store.log.read { try $0.sequences(userId: HistoryFixture.userId, cipherId: nil) }
    }

    /// Every acknowledged event is in the log as acknowledged; each process's sequences
    /// increase; no sequence was acknowledged twice; `verify` is clean with `keys`; the
    /// writers' user's local store holds exactly the latest version of every pending item.
    static func check(_ path: String, acks: [[WriterKillTests.Ack]], keys: [String: SymmetricCryptoKey], user: String = writerUser) throws -> [String] {
        var problems: [String] = []
        for (n, list) in acks.enumerated() {
            for (a, b) in zip(list, list.dropFirst()) where b.sequence <= a.sequence {
                problems.append("process \(n): sequence \(b.sequence) acknowledged after \(a.sequence) (REUSED)")
            }
        }
        let all = acks.flatMap { $0 }
        if Set(all.map(\.sequence)).count != all.count { problems.append("a sequence was acknowledged twice (REUSED)") }
        let store = try VaultLogStore(path: path)
        defer { store.close() }
        for (userId, key) in keys { store.unlock(userId: userId, userKey: key) }
        for ack in all.sorted(by: { $0.sequence < $1.sequence }) {
            guard let envelope = try store.log.envelope(at: ack.sequence) else {
                problems.append("acknowledged event \(ack.sequence) is missing (LOST)")
                continue
            }
            if envelope.header.cipherId != ack.cipherId || VaultEventType(rawValue: envelope.header.eventType)?.description != ack.type {
                problems.append("event \(ack.sequence) is not the acknowledged \(ack.type) of \(ack.cipherId) (LOST and REUSED)")
            }
        }
        let report = try store.log.verify(keys: keys.mapValues { SealingKey(userKey: $0) })
        if !report.isClean { problems.append("verify: \(report.problems.prefix(3))") }
        let projection = try store.projection(userId: user)
        let locals = Dictionary(uniqueKeysWithValues: try store.localCiphers(userId: user).map { ($0.id!, $0) })
        for (id, change) in projection.pending where all.contains(where: { $0.cipherId == id }) {
            if change.changeType == .hardDelete, locals[id] != nil {
                problems.append("\(id) was deleted but has a local copy")
            } else if change.changeType != .hardDelete, locals[id] != change.latest {
                problems.append("local copy of \(id) differs from its latest event")
            }
        }
        return problems
    }

    /// Polls `condition` every 10 ms until it holds or `seconds` pass (no blind sleep).
    static func waitFor(within seconds: Double, _ condition: @Sendable () -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }
}

/// A value behind a lock, shareable with closures and threads.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<T>(_ body: (inout Value) -> T) -> T { mutex.withLock { body(&$0) } }
}

/// A child `vaultlog` process whose stdout lines are collected, each with the time it arrived.
final class Child: @unchecked Sendable {
    private let process: Process
    private let collected = Locked<(lines: [(String, Date)], stderr: String, closed: Bool)>(([], "", false))

    init(_ binary: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        self.process = process
        let collected = collected
        let reader = Thread {
            var buffer = Data()
            while true {
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                let now = Date()
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                    buffer.removeSubrange(buffer.startIndex...newline)
                    collected.withLock { $0.lines.append((line, now)) }
                }
            }
            let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            collected.withLock {
                $0.stderr = text
                $0.closed = true
            }
        }
        reader.start()
    }

    /// The process id.
    var pid: Int32 { process.processIdentifier }

    /// Whole lines printed so far.
    var lines: [String] { collected.withLock { $0.lines.map(\.0) } }
    /// When each line arrived.
    var lineTimes: [Date] { collected.withLock { $0.lines.map(\.1) } }
    /// stderr, once the process ended.
    var stderr: String { collected.withLock { $0.stderr } }

    /// The `ack SEQ CIPHER TYPE` lines of a stress writer.
    var acks: [WriterKillTests.Ack] {
        lines.compactMap { line in
            let parts = line.split(separator: " ")
            guard parts.count == 4, parts[0] == "ack", let sequence = UInt64(parts[1]) else { return nil }
            return WriterKillTests.Ack(sequence: sequence, cipherId: String(parts[2]), type: String(parts[3]))
        }
    }

    /// Waits until `count` lines arrived, the output ended, or `seconds` passed; whether they arrived.
    func waitForLines(_ count: Int, within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            let (have, closed) = collected.withLock { ($0.lines.count, $0.closed) }
            if have >= count { return true }
            if closed { return false }
            usleep(5_000)
        }
        return collected.withLock { $0.lines.count } >= count
    }

    /// Waits for the process to end and for its output to be read; its exit status.
    @discardableResult
    func wait() -> Int32 {
        process.waitUntilExit()
        while !collected.withLock({ $0.closed }) { usleep(2_000) }
        return process.terminationStatus
    }

    /// SIGKILL (only lines printed whole before it count), then ``wait()``.
    func kill() {
        if process.isRunning { Foundation.kill(process.processIdentifier, SIGKILL) }
        wait()
    }
}
