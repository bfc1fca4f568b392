import Testing
import Foundation
import Synchronization
@testable import LMDB
import VaultLogTestSupport

/// The commit journal: a commit acknowledged after its one flush survives a machine stop
/// whatever part of `data.mdb`'s unflushed pages reached the disk.
///
/// A machine stop is made from two copies of `data.mdb`: the file right after a checkpoint
/// (flushed, so what the disk holds then) and the file after later commits (the page cache).
/// The disk after a stop holds, page by page, either version: every mix is possible, meta
/// pages included. The test builds such mixes, with the journal as it was flushed, opens them
/// as after a reboot, and compares every database with a model of what was acknowledged.
@Suite struct JournalTests {
    /// The model: database name → key → values (one for a plain database).
    typealias Model = [String: [[UInt8]: Set<[UInt8]>]]

    func bytes(_ n: Int, _ seed: UInt64, length: Int) -> [UInt8] {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(n)
        return (0..<length).map { _ in
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
    }

    func key(_ n: Int) -> [UInt8] { withUnsafeBytes(of: UInt32(n).bigEndian) { Array($0) } }

    func contents(_ env: Environment) throws -> Model {
        let plain = try env.openDatabase("plain", create: false)
        let dups = try env.openExistingDatabases(["dups"])[0]
        var model: Model = ["plain": [:], "dups": [:]]
        try env.read { txn in
            try txn.scan(plain) { k, v in model["plain"]![Array(k), default: []].insert(Array(v)); return true }
            try txn.scan(dups) { k, v in model["dups"]![Array(k), default: []].insert(Array(v)); return true }
        }
        return model
    }

    /// Random commits of every kind of change, applied to the store and to `model`.
    func commit(_ env: Environment, _ plain: Database, _ dups: Database, seed: UInt64, round: Int, model: inout Model) throws {
        var rng = SplitMix(seed: seed &+ UInt64(round) &* 7919)
        let kind = rng.next() % 10
        try env.write { txn in
            switch kind {
            case 0...4:  // puts, some large enough for overflow pages
                for _ in 0..<(1 + Int(rng.next() % 6)) {
                    let k = key(Int(rng.next() % 300))
                    let v = bytes(round, rng.next(), length: rng.next() % 5 == 0 ? 5000 : 40 + Int(rng.next() % 200))
                    try txn.put(plain, key: k, value: v)
                    model["plain"]![k] = [v]
                }
            case 5, 6:  // deletes, one through a cursor
                let k = key(Int(rng.next() % 300))
                if try txn.delete(plain, key: k) { model["plain"]![k] = nil }
                try txn.withCursor(plain) { cursor in
                    if let first = try cursor.seek(atOrAfter: key(Int(rng.next() % 300))) {
                        model["plain"]![Array(first.key)] = nil
                        try cursor.deleteCurrent()
                    }
                }
            case 7, 8:  // duplicates appended in bulk, one removed
                let k = key(Int(rng.next() % 4))
                let start = (model["dups"]![k]?.map { Int(UInt64(bigEndianBytes: $0)) }.max() ?? 0) + 1
                let values = (start..<start + 1 + Int(rng.next() % 40)).flatMap { withUnsafeBytes(of: UInt64($0).bigEndian) { Array($0) } }
                try txn.withCursor(dups) { cursor in
                    try k.withUnsafeBytes { kb in try values.withUnsafeBytes { try cursor.putDuplicates(key: kb, values: $0, size: 8, flags: .appendDuplicate) } }
                }
                for i in stride(from: 0, to: values.count, by: 8) { model["dups"]![k, default: []].insert(Array(values[i..<i + 8])) }
                if let victim = model["dups"]![k]?.first, try txn.delete(dups, key: k, value: victim) {
                    model["dups"]![k]!.remove(victim)
                }
            default:  // a key with every value dropped, through a cursor
                let k = key(Int(rng.next() % 4))
                try txn.withCursor(dups) { cursor in
                    if try k.withUnsafeBytes({ try cursor.find($0) }) != nil {
                        try cursor.deleteCurrentKey()
                        model["dups"]![k] = nil
                    }
                }
            }
        }
        model["dups"] = model["dups"]!.filter { !$0.value.isEmpty }
    }

    /// The store in `dir` as after the machine stopped: each page of `data.mdb` from `flushed`
    /// or from `cached` as `pick` says, and the journal as flushed. Written into the files in
    /// place (a journal belongs to its `data.mdb` by inode), and the machine named as rebooted.
    func crash(_ dir: TemporaryDirectory, flushed: [UInt8], cached: [UInt8], journal: [UInt8], pick: (Int) -> Bool) throws {
        try MachineStop.write(into: dir.path, journalFile: Journal.fileName, flushed: flushed, cached: cached, journal: journal, pick: pick)
        Journal.nameAnotherBoot(for: dir.path)
    }

    func read(_ path: String) throws -> [UInt8] { try MachineStop.read(path) }

    @Test(arguments: [UInt64(1), 2, 3, 4])
    func acknowledgedCommits_surviveAMachineStop_whateverPagesReachedTheDisk(seed: UInt64) throws {
        let dir = TemporaryDirectory()
        let env = try Environment(path: dir.path)
        let plain = try env.openDatabase("plain")
        let dups = try env.write { try $0.openDatabase("dups", create: true, fixedSizeDuplicates: true) }
        var model: Model = ["plain": [:], "dups": [:]]
        for round in 0..<60 { try commit(env, plain, dups, seed: seed, round: round, model: &model) }
        try env.checkpointJournal()
        let flushed = try read(dir.path + "/data.mdb")
        let checkpoint = try #require(env.journalHeader).checkpointTxn
        for round in 60..<100 { try commit(env, plain, dups, seed: seed, round: round, model: &model) }
        // Pages the checkpoint's tree uses were never written again (the pin).
        #expect(env.journalHeader?.checkpointTxn == checkpoint, "no checkpoint in between")
        let cached = try read(dir.path + "/data.mdb")
        let journal = try read(dir.path + "/" + Journal.fileName)
        #expect(try contents(env) == model)
        env.close()

        var rng = SplitMix(seed: seed)
        for (name, pick) in MachineStop.picks(using: &rng) {
            try crash(dir, flushed: flushed, cached: cached, journal: journal, pick: pick)
            let recovered = try Environment(path: dir.path)
            #expect(try contents(recovered) == model, "pages that reached the disk: \(name)")
            recovered.close()
            // Opened again (same boot now), it is as it was.
            let again = try Environment(path: dir.path)
            #expect(try contents(again) == model, "reopened after recovering (\(name))")
            again.close()
        }
    }

    /// A record flushed whose commit never happened (as when the process is killed between
    /// the two; longer than the record written over it) is overwritten by the next commits and
    /// never replayed.
    @Test func aRecordWhoseCommitNeverHappened_isOverwritten_andNeverReplayed() throws {
        try expectNeverReplayed(failing: { $0.failNextJournaledCommit.store(true, ordering: .relaxed) },
                                value: bytes(3, 3, length: 3000)) { env, plain in
            try env.write { try $0.put(plain, key: self.key(4), value: [4]) }
            try env.write { try $0.put(plain, key: self.key(5), value: [5]) }
            return [self.key(4): [[4]], self.key(5): [[5]]]
        }
    }

    /// A commit that fails in LMDB after its record was flushed (a full disk) is reported as
    /// failed, so its record must never be replayed: it is cleared at once, and a machine stop
    /// right after it recovers the commits before it only, whatever pages reached the disk.
    @Test func aRecordWhoseCommitFailed_isCleared_andNeverReplayed() throws {
        try expectNeverReplayed(failing: { $0.failNextLMDBCommit.store(true, ordering: .relaxed) }, value: [3]) { _, _ in [:] }
    }

    /// Keys 1 and 2 committed around a checkpoint, then a write of key 3 (`value`) that
    /// `failing` makes fail after its record was flushed, then `after` (which returns what it
    /// committed): the store holds keys 1, 2 and `after`'s, and so does every disk after a
    /// machine stop right then (none of the later pages, all of them).
    func expectNeverReplayed(failing: (Environment) -> Void, value: [UInt8],
                             after: (Environment, Database) throws -> [[UInt8]: Set<[UInt8]>]) throws {
        let dir = TemporaryDirectory()
        let env = try Environment(path: dir.path)
        let plain = try env.openDatabase("plain")
        _ = try env.write { try $0.openDatabase("dups", create: true, fixedSizeDuplicates: true) }
        try env.write { try $0.put(plain, key: key(1), value: [1]) }
        try env.checkpointJournal()
        let flushed = try read(dir.path + "/data.mdb")
        try env.write { try $0.put(plain, key: key(2), value: [2]) }
        failing(env)
        #expect(throws: LMDBError.self) { try env.write { try $0.put(plain, key: self.key(3), value: value) } }
        let later = try after(env, plain)
        let expected: Model = ["plain": [key(1): [[1]], key(2): [[2]]].merging(later) { _, new in new }, "dups": [:]]
        #expect(try contents(env) == expected)
        let cached = try read(dir.path + "/data.mdb")
        let journal = try read(dir.path + "/" + Journal.fileName)
        env.close()
        for pick in [{ (_: Int) in false }, { _ in true }] {
            try crash(dir, flushed: flushed, cached: cached, journal: journal, pick: pick)
            let recovered = try Environment(path: dir.path)
            #expect(try contents(recovered) == expected, "the failed write was replayed")
            recovered.close()
        }
    }

    @Test func aReadOnlyOpenAfterAMachineStop_isRefused_andChangesNothing() throws {
        let dir = TemporaryDirectory()
        let env = try Environment(path: dir.path)
        let plain = try env.openDatabase("plain")
        try env.checkpointJournal()
        try env.write { try $0.put(plain, key: key(1), value: [1]) }
        let data = try read(dir.path + "/data.mdb")
        let journal = try read(dir.path + "/" + Journal.fileName)
        env.close()
        try crash(dir, flushed: data, cached: data, journal: journal) { _ in true }
        var options = EnvironmentOptions()
        options.readOnly = true
        #expect(throws: JournalError.recoveryNeeded(directory: dir.path)) { try Environment(path: dir.path, options: options) }
        #expect(try read(dir.path + "/data.mdb") == data)
        #expect(try read(dir.path + "/" + Journal.fileName) == journal)
        // A writable open then recovers it.
        let recovered = try Environment(path: dir.path)
        let reopened = try recovered.openDatabase("plain", create: false)
        #expect(try recovered.read { try $0.get(reopened, key: key(1)) } == [1])
        recovered.close()
    }

    @Test func aWriteTooLargeForTheJournal_isFlushedByItsCommit_andTheNextMakesACheckpoint() throws {
        let dir = TemporaryDirectory()
        let env = try Environment(path: dir.path)
        let plain = try env.openDatabase("plain")
        try env.write { try $0.put(plain, key: key(0), value: [0]) }
        let before = try #require(env.journalHeader)
        try env.write { txn in
            for n in 1...400 { try txn.put(plain, key: key(n), value: bytes(n, 9, length: 4000)) }
        }
        let bulk = try env.info().lastTransactionID
        #expect(env.journalHeader?.checkpointTxn == UInt64(bulk) - 1, "records were pending: a checkpoint came first")
        #expect(env.journalHeader?.sequence == before.sequence + 1)
        try env.write { try $0.put(plain, key: key(401), value: [1]) }
        #expect(env.journalHeader?.checkpointTxn == UInt64(bulk), "the commit after it starts from it")
        try env.write { txn in
            for n in 1...400 { try txn.put(plain, key: key(n), value: bytes(n, 10, length: 4000)) }
        }
        #expect(env.journalHeader?.checkpointTxn == UInt64(bulk) + 1, "one record pending: a checkpoint came first")
        env.close()
    }

    /// A checkpoint comes before the record that would pass the checkpoint interval (the
    /// default and a store's own), or the journal's capacity: never sooner (each is a flush of
    /// every page written since the last), never later (the records and the pinned pages
    /// would grow without bound).
    @Test(arguments: [nil, 20])
    func checkpoints_comeEveryInterval_orAtTheJournalsCapacity(interval: Int?) throws {
        let dir = TemporaryDirectory()
        var options = EnvironmentOptions()
        if let interval { options.journalCheckpointInterval = interval }
        let records = options.journalCheckpointInterval
        let env = try Environment(path: dir.path, options: options)
        let plain = try env.openDatabase("plain")   // the first write: a checkpoint, then its record
        let first = try #require(env.journalHeader)
        for n in 1..<records {
            try env.write { try $0.put(plain, key: key(n % 50), value: [UInt8(truncatingIfNeeded: n)]) }
        }
        #expect(env.journalHeader == first, "\(records) records, no checkpoint")
        let full = try env.info().lastTransactionID
        try env.write { try $0.put(plain, key: key(1), value: [1]) }
        #expect(env.journalHeader?.checkpointTxn == UInt64(full), "the next record starts after a checkpoint")
        guard interval == nil else { return env.close() }
        // Records near the largest size: the capacity comes first.
        let large = Journal.largestRecord - 1024
        let start = try #require(env.journalHeader)
        var commits = 0
        while env.journalHeader?.checkpointTxn == start.checkpointTxn {
            try env.write { try $0.put(plain, key: key(100), value: bytes(commits, 3, length: large)) }
            commits += 1
            try #require(commits < records)
        }
        #expect(commits == Int(Journal.capacity - Journal.recordsStart) / (large + 200) + 1, "\(commits) records of \(large) bytes")
        env.close()
    }

    /// A `.noSync` writer (a bulk load) records nothing and makes no checkpoint: its writes
    /// are not flushed one by one.
    @Test func aWriterThatDoesNotJournal_makesNoCheckpoints() throws {
        let dir = TemporaryDirectory()
        do {
            let env = try Environment(path: dir.path)
            let plain = try env.openDatabase("plain")
            try env.write { try $0.put(plain, key: key(0), value: [0]) }
            env.close()
        }
        var options = EnvironmentOptions()
        options.durability = .noSync
        let env = try Environment(path: dir.path, options: options)
        let plain = try env.openDatabase("plain")
        let before = try #require(env.journalHeader)
        for n in 1...20 { try env.write { try $0.put(plain, key: key(n), value: [UInt8(n)]) } }
        #expect(env.journalHeader == before)
        env.close()
    }

    @Test func recordChecksum_isZlibsCRC32() {
        let check = Array("123456789".utf8)
        #expect(check.withUnsafeBytes { CRC32.checksum($0) } == 0xCBF4_3926)
        let long = bytes(1, 1, length: 1001)
        var bytewise: UInt32 = 0xFFFF_FFFF
        for byte in long {
            bytewise ^= UInt32(byte)
            for _ in 0..<8 { bytewise = bytewise & 1 == 1 ? (bytewise >> 1) ^ 0xEDB8_8320 : bytewise >> 1 }
        }
        #expect(long.withUnsafeBytes { CRC32.checksum($0) } == bytewise ^ 0xFFFF_FFFF)
    }

    @Test func closing_leavesACheckpointWithNoPin_andNoRecords() throws {
        let dir = TemporaryDirectory()
        let env = try Environment(path: dir.path)
        let plain = try env.openDatabase("plain")
        for n in 0..<10 { try env.write { try $0.put(plain, key: key(n), value: [UInt8(n)]) } }
        #expect(env.journalHeader?.pinPID == getpid())
        let last = try env.info().lastTransactionID
        env.close()
        let fd = open(dir.path + "/" + Journal.fileName, O_RDONLY)
        defer { close(fd) }
        let header = try #require(Journal.readHeader(fd: fd))
        #expect(header.pinPID == 0)
        #expect(header.checkpointTxn == UInt64(last))
        let records = try Journal.scan(fd: fd, header: header).count
        #expect(records == 0)
    }
}

/// A small deterministic generator (SplitMix64).
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension UInt64 {
    init(bigEndianBytes bytes: [UInt8]) {
        self = bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }
}
