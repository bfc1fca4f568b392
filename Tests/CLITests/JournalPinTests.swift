import Foundation
@testable import LMDB
import Testing
import VaultLogTesting
import VaultLogTestSupport

/// The commit journal across processes: a writer trusts the checkpoint's pin while the process
/// holding it lives (its records follow the other's, no checkpoint of its own), and makes its
/// own checkpoint once that process is gone (its pin went with it). A real child process
/// (`vaultlog stress-writer --hold`) saves, then holds the store open without writing.
///
/// And a machine stop while two processes write: the records of both processes' commits follow
/// one checkpoint, and the disk after the stop may hold any mix of the pages written since; an
/// open after the reboot replays every record, whichever process wrote it.
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

    /// A machine stop while this process and a child write, after a checkpoint made by either:
    /// - by this process: it commits, makes a checkpoint (pinned here) and `data.mdb` is copied
    ///   as on disk; the child saves 20 times trusting that pin and holds the store open;
    /// - by the child: `data.mdb` is copied as the first writer's close flushed it; the child's
    ///   first save makes the checkpoint there (no live pin), pinned by the child, and it saves
    ///   20 times and holds the store open.
    /// Then this process commits 5 times, trusting the other's pin if it is the child's; or
    /// (`committingAtOnce`) it commits from the child's first save until the child holds, so
    /// the two processes' commits alternate and each writer finds the other's records after
    /// its own (the test requires that they alternated). The machine stops: `data.mdb` holds,
    /// page by page, either the checkpoint's flushed copy or what both processes wrote since
    /// (eight mixes), and the journal holds both processes' records. The open after the reboot has every commit of this process and every save the
    /// children acknowledged, and the store passes the two-process checks.
    @Test(arguments: [false, true], [false, true])
    func aMachineStop_whileTwoProcessesWrite_keepsEveryAcknowledgedCommitOfBoth(checkpointByTheChild: Bool, committingAtOnce: Bool) throws {
        let binary = try #require(CLI.binary, "build the vaultlog binary first (swift build)")
        let dir = TemporaryDirectory("vaultlog-journal-stop", create: true)
        let writerKey = try TwoProcessTests.writerKey(in: dir)
        let path = dir.file("store")
        // The store made by a first writer, which saves 5 times and exits.
        let first = try Child(binary, ["stress-writer", path, "--user-key-file", writerKey.file, "--operations", "5",
                                       "--seed", "\(TwoProcessTests.seed &+ 401)"])
        try #require(first.wait() == 0, "the first writer failed: \(first.stderr)")
        try #require(first.acks.count == 5, "the first writer acknowledged \(first.acks.count) saves, not 5")

        let env = try Environment(path: path)
        var db: Database?
        if !checkpointByTheChild {
            db = try env.openDatabase("parent")
            try env.write { try $0.put(db!, key: Self.key(0), value: Self.key(0)) }
            try env.checkpointJournal()
        }
        let flushedTxn = UInt64(try env.info().lastTransactionID)
        let flushed = try MachineStop.read(path + "/data.mdb")

        let child = try Child(binary, ["stress-writer", path, "--user-key-file", writerKey.file, "--operations", "20", "--hold",
                                       "--seed", "\(TwoProcessTests.seed &+ 400)"])
        defer { child.kill() }
        // This process's commits (keys 1...commits) and their transaction ids.
        var commits = 0
        var ids: [UInt64] = []
        func commit() throws {
            if db == nil { db = try env.openDatabase("parent") }
            commits += 1
            let key = Self.key(commits)
            ids.append(try env.write { txn in
                try txn.put(db!, key: key, value: key)
                return txn.id
            })
        }
        if committingAtOnce {
            // From the child's first save (which makes the checkpoint when it is the child's)
            // until it holds. LMDB's writer lock is not fair: a process that takes it again
            // at once can keep the other out for hundreds of commits, so each commit is
            // followed by a pause of 0.2 ms, in which the child's waiting save gets the lock.
            try #require(child.waitForLines(1, within: 60), "the writer did not save: \(child.stderr)")
            while child.lines.count < 21, commits < 900 {
                try commit()
                usleep(200)
            }
        }
        try #require(child.waitForLines(21, within: 60), "the writer did not save and hold: \(child.lines.suffix(3)) \(child.stderr)")
        let checkpoint = try #require(env.journalHeader)
        try #require(checkpoint.checkpointTxn == flushedTxn, "the checkpoint is not the copied state (a writer that found the records it expected broken makes a new one): the test cannot stand for a stop")
        #expect(checkpoint.pinPID == (checkpointByTheChild ? child.pid : getpid()), "the checkpoint's pin is held by the process that made it")
        if committingAtOnce {
            try #require(ids.count >= 2 && ids.last! - ids.first! + 1 > UInt64(ids.count),
                         "the child committed between none of this process's \(ids.count) commits: the test cannot stand for commits at once")
        } else {
            for _ in 1...5 { try commit() }
        }
        // Every commit since the checkpoint is only in the journal: the flushed copy is the disk.
        try #require(env.journalHeader == checkpoint, "a checkpoint was made after the copy: the test cannot stand for a stop")
        let cached = try MachineStop.read(path + "/data.mdb")
        let journal = try MachineStop.read(path + "/" + Journal.fileName)
        #expect(cached != flushed, "the child's saves wrote to data.mdb")
        child.kill()
        env.close()

        var rng = SplitMix64(seed: TwoProcessTests.seed &+ 400)
        for (name, pick) in MachineStop.picks(using: &rng) {
            try MachineStop.write(into: path, journalFile: Journal.fileName, flushed: flushed, cached: cached, journal: journal, pick: pick)
            Journal.nameAnotherBoot(for: path)

            let recovered = try Environment(path: path)
            let parent = try recovered.openDatabase("parent", create: false)
            let keys = checkpointByTheChild ? 1...commits : 0...commits
            let values = try recovered.read { txn in try keys.map { try txn.get(parent, key: Self.key($0)) } }
            #expect(values == keys.map { Self.key($0) }, "this process's \(commits) commits after the stop (\(name))")
            recovered.close()
            let problems = try TwoProcessTests.check(path, acks: [first.acks, child.acks], keys: [TwoProcessTests.writerUser: writerKey.key])
            #expect(problems.isEmpty, "the children's saves after the stop (\(name)): \(problems.prefix(5).joined(separator: "; "))")
        }
    }

    /// This process's `n`th commit's key and value (big-endian `UInt16`).
    static func key(_ n: Int) -> [UInt8] { [UInt8(n >> 8), UInt8(n & 0xFF)] }
}
