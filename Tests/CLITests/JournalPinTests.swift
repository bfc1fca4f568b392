import Foundation
@testable import LMDB
import Testing
import VaultLogTesting
import VaultLogTestSupport

/// The commit journal across processes: a writer trusts the checkpoint's pin while the process
/// holding it lives (its records follow the other's, no checkpoint of its own), and makes its
/// own checkpoint once that process is gone (its pin went with it). A real child process
/// (`vaultlog stress-writer --hold`) saves, then holds the store open without writing.
@Suite(.serialized, .timeLimit(.minutes(2))) struct JournalPinTests {
    @Test func anotherProcessesPin_isTrustedWhileItLives_andReplacedOnceItIsGone() throws {
        let binary = try #require(CLI.binary, "build the vaultlog binary first (swift build)")
        let dir = TemporaryDirectory("vaultlog-journal-pin", create: true)
        let writerKey = try TwoProcessTests.writerKey(in: dir)
        let path = dir.file("store")
        let child = try Child(binary, ["stress-writer", path, "--user-key-file", writerKey.file, "--operations", "20", "--hold",
                                       "--seed", "\(TwoProcessTests.seed &+ 300)"])
        defer { child.kill() }
        try #require(child.waitForLines(21, within: 60), "the writer did not save and hold: \(child.lines.suffix(3)) \(child.stderr)")
        #expect(child.lines.last == "holding")

        let env = try Environment(path: path)
        let held = try #require(env.journalHeader)
        #expect(held.pinPID == child.pid, "the writer that made the checkpoint holds its pin")
        // This process writes while the pin's process lives: its records follow the writer's,
        // and the checkpoint (and its pin) stay the writer's.
        let db = try env.openDatabase("pin-test")
        for n in 0..<5 { try env.write { try $0.put(db, key: [UInt8(n)], value: [UInt8(n)]) } }
        #expect(env.journalHeader == held, "a live process's pin was not trusted: a checkpoint was made")

        // The writer dies: its read transaction, the pin, is gone, so the next commit here
        // makes a checkpoint of its own first, pinned by this process.
        child.kill()
        let before = try env.info().lastTransactionID
        try env.write { try $0.put(db, key: [9], value: [9]) }
        let taken = try #require(env.journalHeader)
        #expect(taken.pinPID == getpid())
        #expect(taken.checkpointTxn == UInt64(before), "the checkpoint is the last commit before this one")
        env.close()

        let problems = try TwoProcessTests.check(path, acks: [child.acks], keys: [TwoProcessTests.writerUser: writerKey.key])
        #expect(problems.isEmpty, "\(problems.prefix(10).joined(separator: "\n"))")
    }
}
