import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import Testing
import VaultCrypto
import VaultModel
import VaultLogTesting

/// Kill test of compaction: `vaultlog compact` (fold, one write transaction, close, compacting
/// copy, rename) is SIGKILLed at moments spread over a full run; after each kill the store must
/// open, verify clean with the key, hold the same pending state, and be either the old store
/// (horizon 0, every event) or the compacted one (the planned horizon, the retained events
/// only), the file rewritten or not. `make test` runs 40 kills (`VAULTLOG_COMPACT_KILLS`).
@Suite(.serialized) struct CompactionKillTests {
    static let kills = Int(ProcessInfo.processInfo.environment["VAULTLOG_COMPACT_KILLS"] ?? "") ?? 40
    static let seed = UInt64(ProcessInfo.processInfo.environment["VAULTLOG_KILL_SEED"] ?? "") ?? 20261126

    struct Failure: Error, CustomStringConvertible { let description: String }

    @Test func sigkillDuringCompaction_leavesTheOldOrTheNewStore_bothValid() async throws {
        let binary = try #require(CLI.binary, "build the vaultlog binary first (swift build)")
        let problems = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[String], any Error>) in
            Thread.detachNewThread { continuation.resume(with: Result { try Self.killLoop(binary: binary) }) }
        }
        #expect(problems.isEmpty, "\(problems.prefix(20).joined(separator: "\n"))")
    }

    /// What a reopened store is after a kill.
    enum Phase: String, CaseIterable { case untouched = "before the write", compacted = "after the write, file not yet rewritten", rewritten = "file rewritten" }

    static func killLoop(binary: String) throws -> [String] {
        // 40 rounds of edits 12 hours apart, ending now, and 5 changes pending half-way (carried
        // in the snapshot): 10 days kept, so half the log stays (and is copied).
        let fixture = try HistoryFixture(items: 100, edits: 40, pending: 5, pendingAfter: 20,
                                         start: Date().addingTimeInterval(-20 * 86_400), roundSeconds: 12 * 3600)
        let pristine = fixture.dir.file("pristine")
        try FileManager.default.createDirectory(atPath: pristine, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: fixture.store + "/data.mdb", toPath: pristine + "/data.mdb")
        let pristineSize = try FileManager.default.attributesOfItem(atPath: pristine + "/data.mdb")[.size] as? Int ?? 0
        let arguments = ["--keep-days", "10", "--keep-versions", "2", "--user-key-file", fixture.keyFile]
        let (pendingBefore, allEvents) = try Self.state(of: pristine, key: fixture.userKey)

        // One run to completion: its duration spreads the kills, its result is "the new store".
        let work = fixture.dir.file("work")
        try Self.reset(work, from: pristine)
        let started = Date()
        let full = try CLI.run(via: binary, ["compact", work, "--json"] + arguments)
        let duration = Date().timeIntervalSince(started)
        guard full.status == 0, let report = try? full.jsonDocument(), let horizon = report["horizon"] as? Int else {
            return ["the uninterrupted compaction failed: \(full)"]
        }
        // The timeline of the run: start-up and unlock, the fold, the write transaction (its
        // commit at the end), then closing, the compacting copy and the rename.
        let fold = (report["prepareMilliseconds"] as? Double ?? 0) / 1000
        let write = (report["writeMilliseconds"] as? Double ?? 0) / 1000
        let copy = (report["copyMilliseconds"] as? Double ?? 0) / 1000
        let startup = max(0, duration - fold - write - copy)
        let commitAt = startup + fold + write
        let retained = allEvents.filter { $0 > UInt64(horizon) }

        var problems: [String] = []
        var phases: [Phase: Int] = [:]
        // Kills by the moment they were sent: start-up, fold, write transaction, copy, after the end.
        var timeline = [0, 0, 0, 0, 0]
        let random = SeededRandomSource(seed: Self.seed)
        for round in 0..<Self.kills {
            try Self.reset(work, from: pristine)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = ["compact", work] + arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            // Even rounds: uniform over the whole run, a little past its end. Odd rounds: uniform
            // around the commit and the file rewrite, which are short but where a kill matters most.
            let fraction = Double(random.bytes(2).reduce(0) { $0 << 8 | Int($1) }) / 65_536
            let delay = round % 2 == 0 ? fraction * duration * 1.1 : max(0, commitAt - 0.03) + fraction * (copy + 0.06)
            timeline[delay < startup ? 0 : delay < startup + fold ? 1 : delay < commitAt ? 2 : delay < duration ? 3 : 4] += 1
            usleep(UInt32(delay * 1_000_000))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            do {
                let (pending, events) = try Self.state(of: work, key: fixture.userKey)
                let size = try FileManager.default.attributesOfItem(atPath: work + "/data.mdb")[.size] as? Int ?? 0
                guard pending == pendingBefore else { throw Failure(description: "round \(round): the pending state changed") }
                let horizonNow = try Self.horizon(of: work)
                if horizonNow == 0 {
                    guard events == allEvents else { throw Failure(description: "round \(round): not compacted, yet events are missing") }
                    phases[.untouched, default: 0] += 1
                } else {
                    guard horizonNow == UInt64(horizon), events == retained else {
                        throw Failure(description: "round \(round): horizon \(horizonNow) with \(events.count) events; expected \(horizon) with \(retained.count)")
                    }
                    phases[size < pristineSize ? .rewritten : .compacted, default: 0] += 1
                }
            } catch {
                problems.append("round \(round) (killed after \(Int(delay * 1000)) ms): \(error)")
            }
        }
        // A compaction after the last kill finishes the job and leaves no work directory behind.
        let finish = try CLI.run(via: binary, ["compact", work] + arguments)
        if finish.status != 0 { problems.append("compaction after the kills failed: \(finish)") }
        let leftovers = (try FileManager.default.contentsOfDirectory(atPath: work)).filter { $0.hasPrefix(".compacting-") }
        if !leftovers.isEmpty { problems.append("left-over copy directories: \(leftovers)") }
        let phaseTimes = ["prepareMilliseconds", "writeMilliseconds", "copyMilliseconds"].map { "\(Int(report[$0] as? Double ?? 0))" }.joined(separator: "/")
        print("compaction kills: \(Self.kills) SIGKILLs over a \(Int(duration * 1000)) ms run (fold/write/copy \(phaseTimes) ms) (\(allEvents.count) events, \(allEvents.count - retained.count) removed); "
              + "sent during start-up/fold/write/copy/after the end: \(timeline.map(String.init).joined(separator: "/")); found "
              + Phase.allCases.map { "\(phases[$0] ?? 0) \($0.rawValue)" }.joined(separator: ", ") + "; \(problems.count) problems")
        return problems
    }

    static func reset(_ work: String, from pristine: String) throws {
        try? FileManager.default.removeItem(atPath: work)
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: pristine + "/data.mdb", toPath: work + "/data.mdb")
    }

    static func horizon(of path: String) throws -> UInt64 {
        let store = try VaultLogStore(path: path)
        defer { store.close() }
        return try store.horizon(userId: HistoryFixture.userId)
    }

    /// The pending state and the user's event sequences, after checking that the store opens
    /// writable and verifies clean with the key.
    static func state(of path: String, key: SymmetricCryptoKey) throws -> ([String: PendingChange], [UInt64]) {
        let store = try VaultLogStore(path: path)
        defer { store.close() }
        store.unlock(userId: HistoryFixture.userId, userKey: key)
        let report = try store.verify(keys: [HistoryFixture.userId: SealingKey(userKey: key)])
        guard report.isClean else { throw Failure(description: "verify: \(report.problems.prefix(3))") }
        return (try store.projection(userId: HistoryFixture.userId).pending,
                try store.log.read { try $0.sequences(userId: HistoryFixture.userId, cipherId: nil) })
    }
}
