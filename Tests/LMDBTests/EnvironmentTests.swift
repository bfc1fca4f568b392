import Testing
import Foundation
import Synchronization
@testable import LMDB
import VaultLogTestSupport

@Suite struct EnvironmentTests {
    func key(_ n: UInt64) -> [UInt8] { withUnsafeBytes(of: n.bigEndian) { Array($0) } }

    @Test func putGetDelete_roundTrip() throws {
        let dir = TemporaryDirectory()
        let env = try Environment(path: dir.path)
        let db = try env.openDatabase("things")
        try env.write { try $0.put(db, key: [1], value: [10, 11]) }
        #expect(try env.read { try $0.get(db, key: [1]) } == [10, 11])
        #expect(try env.read { try $0.get(db, key: [2]) } == nil)
        #expect(try env.write { try $0.delete(db, key: [1]) })
        #expect(try env.write { try $0.delete(db, key: [1]) } == false)
        #expect(try env.read { try $0.count(db) } == 0)
    }

    /// Group commit: 64 concurrent async writes share few commits; the one that throws loses
    /// only its own changes and gets its own error; every other write is there after reopening.
    @Test func concurrentAsyncWrites_areGroupCommitted_andAFailingOneIsIsolated() async throws {
        struct Boom: Error {}
        let dir = TemporaryDirectory()
        var env: Environment? = try Environment(path: dir.path)
        let db = try env!.openDatabase("things")
        let before = try env!.info().lastTransactionID
        let shared = env!
        let results = await withTaskGroup(of: (UInt64, Bool).self) { group in
            for n in UInt64(0)..<64 {
                group.addTask {
                    do {
                        try await shared.writeAsync { txn in
                            try txn.put(db, key: withUnsafeBytes(of: n.bigEndian) { Array($0) }, value: [UInt8(n)])
                            if n == 13 { throw Boom() }
                        }
                        return (n, true)
                    } catch {
                        return (n, !(error is Boom))
                    }
                }
            }
            var out: [UInt64: Bool] = [:]
            for await (n, ok) in group { out[n] = ok }
            return out
        }
        #expect(results.filter { !$0.value }.map(\.key) == [13])
        let commits = try shared.info().lastTransactionID - before
        #expect(commits < 64, "64 writes took \(commits) commits")
        shared.close()
        env = nil
        let reopened = try Environment(path: dir.path)
        let db2 = try reopened.openDatabase("things")
        let stored = try reopened.read { try $0.count(db2) }
        #expect(stored == 63)
        #expect(try reopened.read { try $0.get(db2, key: self.key(13)) } == nil)
        reopened.close()
    }

    /// Group commit for blocking callers: while one thread's write is being committed, seven
    /// other threads queue theirs; one of them then leads a group that commits all seven in
    /// one transaction. Each caller gets its own return value; the one that throws loses only its
    /// own changes; the others are there after reopening.
    @Test func concurrentBlockingWrites_shareOneCommit_andAFailingOneIsIsolated() throws {
        struct Boom: Error {}
        let dir = TemporaryDirectory()
        let env = try Environment(path: dir.path)
        let db = try env.openDatabase("things")
        let before = try env.info().lastTransactionID
        let outcomes = Mutex<[UInt64: String]>([:])
        let first = DispatchSemaphore(value: 0)
        let group = DispatchGroup()
        // Threads of their own (a dispatch pool may not start eight on two cores). The first
        // write waits inside its transaction until the seven others are queued.
        func onThread(_ body: @escaping @Sendable () -> Void) {
            group.enter()
            Thread.detachNewThread { body(); group.leave() }
        }
        onThread {
            let value = try? env.writeGrouped { txn -> UInt64 in
                first.signal()
                let deadline = Date().addingTimeInterval(10)
                while env.queuedWrites() < 7 && Date() < deadline { usleep(1000) }
                try txn.put(db, key: self.key(0), value: [0])
                return 0
            }
            outcomes.withLock { $0[0] = value.map { "returned \($0)" } ?? "failed" }
        }
        first.wait()
        for n in UInt64(1)..<8 {
            onThread {
                do {
                    let value = try env.writeGrouped { txn -> UInt64 in
                        try txn.put(db, key: self.key(n), value: [UInt8(n)])
                        if n == 5 { throw Boom() }
                        return n * 10
                    }
                    outcomes.withLock { $0[n] = "returned \(value)" }
                } catch {
                    outcomes.withLock { $0[n] = error is Boom ? "Boom" : "\(error)" }
                }
            }
        }
        group.wait()
        let seen = outcomes.withLock { $0 }
        #expect(seen[0] == "returned 0")
        #expect(seen[5] == "Boom")
        for n in UInt64(1)..<8 where n != 5 { #expect(seen[n] == "returned \(n * 10)") }
        let commits = try env.info().lastTransactionID - before
        #expect(commits == 2, "8 blocking writes took \(commits) commits")
        env.close()
        let reopened = try Environment(path: dir.path)
        let db2 = try reopened.openDatabase("things")
        #expect(try reopened.read { try $0.count(db2) } == 7)
        #expect(try reopened.read { try $0.get(db2, key: self.key(5)) } == nil)
        reopened.close()
    }

    /// A leader waits for a writer that announced its write while it prepares: both writes
    /// share one commit. (The limit is long here so that the test does not race the clock.)
    @Test func announcedWrite_isWaitedFor_andSharesTheCommit() throws {
        let dir = TemporaryDirectory()
        let (env, db) = try environment(dir, gatherLimit: .seconds(5))
        let before = try env.info().lastTransactionID
        let done = announceOnAnotherThread(env, db) { usleep(30_000) }   // preparing, while this thread leads
        try env.announcingWrite {
            try env.writeGrouped { txn in try txn.put(db, key: self.key(2), value: [2]) }
        }
        done.wait()
        #expect(try env.info().lastTransactionID - before == 1)
        #expect(try env.read { try $0.count(db) } == 2)
        env.close()
    }

    /// The wait is bounded: a writer that announced a write and does not make it within the
    /// limit does not hold up the others' commit.
    @Test func announcedWrite_thatNeverComes_delaysACommitOnlyUpToTheLimit() throws {
        let dir = TemporaryDirectory()
        let (env, db) = try environment(dir, gatherLimit: .milliseconds(20))
        let release = DispatchSemaphore(value: 0)
        let done = announceOnAnotherThread(env, db) { release.wait() }
        // Returns although the announced write is still held back, and its own write is durable.
        try env.writeGrouped { txn in try txn.put(db, key: self.key(2), value: [2]) }
        #expect(try env.read { try $0.get(db, key: self.key(2)) } == [2])
        #expect(try env.read { try $0.get(db, key: self.key(1)) } == nil)
        release.signal()
        done.wait()
        #expect(try env.read { try $0.count(db) } == 2)
        env.close()
    }

    /// An environment in `dir` with the given gather limit, and its database "things".
    func environment(_ dir: TemporaryDirectory, gatherLimit: Duration) throws -> (Environment, Database) {
        var options = EnvironmentOptions()
        options.groupGatherLimit = gatherLimit
        let env = try Environment(path: dir.path, options: options)
        return (env, try env.openDatabase("things"))
    }

    /// On a thread of its own: announces a write, runs `prepare`, then writes key 1. Returns once
    /// the write is announced; the semaphore is signalled when the write has returned.
    func announceOnAnotherThread(_ env: Environment, _ db: Database,
                                 prepare: @escaping @Sendable () -> Void) -> DispatchSemaphore {
        let announced = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? env.announcingWrite {
                announced.signal()
                prepare()
                try env.writeGrouped { txn in try txn.put(db, key: self.key(1), value: [1]) }
            }
            done.signal()
        }
        announced.wait()
        return done
    }

    @Test func throwingWriteClosure_abortsEverything() throws {
        struct Boom: Error {}
        let dir = TemporaryDirectory()
        let env = try Environment(path: dir.path)
        let db = try env.openDatabase("things")
        #expect(throws: Boom.self) {
            try env.write { txn in
                try txn.put(db, key: [1], value: [1])
                throw Boom()
            }
        }
        #expect(try env.read { try $0.get(db, key: [1]) } == nil)
    }

    @Test func rangeScans_forwardAndBackward() throws {
        let dir = TemporaryDirectory()
        let env = try Environment(path: dir.path)
        let db = try env.openDatabase("log")
        try env.write { txn in
            for n in stride(from: UInt64(10), through: 100, by: 10) { try txn.put(db, key: key(n), value: [UInt8(n)]) }
        }
        func collect(from start: UInt64?, reverse: Bool) throws -> [UInt8] {
            try env.read { txn in
                var out: [UInt8] = []
                try txn.scan(db, from: start.map(key), reverse: reverse) { _, value in out.append(value[0]); return true }
                return out
            }
        }
        #expect(try collect(from: nil, reverse: false) == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100])
        #expect(try collect(from: 35, reverse: false) == [40, 50, 60, 70, 80, 90, 100])
        #expect(try collect(from: 40, reverse: true) == [40, 30, 20, 10])
        #expect(try collect(from: 45, reverse: true) == [40, 30, 20, 10])
        #expect(try collect(from: 1000, reverse: true) == [100, 90, 80, 70, 60, 50, 40, 30, 20, 10])
        #expect(try collect(from: 1000, reverse: false) == [])
    }

    @Test func appendOutOfOrder_failsWithKeyExists() throws {
        let dir = TemporaryDirectory()
        let env = try Environment(path: dir.path)
        let db = try env.openDatabase("log")
        try env.write { txn in
            try txn.put(db, key: key(5), value: [5], flags: .append)
            try txn.put(db, key: key(6), value: [6], flags: .append)
        }
        #expect {
            try env.write { try $0.put(db, key: key(3), value: [3], flags: .append) }
        } throws: { error in
            guard let error = error as? LMDBError else { return false }
            return error.isKeyExists && error.description.contains("mdb_put log") && error.description.contains("MDB_KEYEXIST")
        }
    }

    /// A data file cut short (bad copy, full disk) would make LMDB's reads fault (SIGBUS);
    /// opening it is refused with a clear error instead, and the file is left as it was.
    @Test func truncatedDataFile_isRefusedBeforeLMDBMapsIt() throws {
        let dir = TemporaryDirectory()
        var used = 0
        do {
            let env = try Environment(path: dir.path)
            let db = try env.openDatabase("things")
            try env.write { txn in for n in 0..<2000 { try txn.put(db, key: key(UInt64(n)), value: [UInt8](repeating: 7, count: 200)) } }
            used = try env.info().usedBytes
            env.close()
        }
        let file = (dir.path as NSString).appendingPathComponent("data.mdb")
        // Cut at half the last page's end (the file itself runs ahead of it; see below).
        let size = used
        let handle = try #require(FileHandle(forWritingAtPath: file))
        try handle.truncate(atOffset: UInt64(size / 2))
        try handle.close()
        #expect {
            try Environment(path: dir.path)
        } throws: { error in
            guard let error = error as? LMDBError else { return false }
            return error.isCorrupted && error.operation.contains("data.mdb is truncated")
        }
        #expect(try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int == size / 2)
    }

    /// `data.mdb` runs ahead of its last page, so small commits write inside the file, into
    /// blocks it already has, instead of growing it or filling holes (either costs a journal
    /// commit per flush): the room just past the last page is written, not a hole; 300 small
    /// commits leave the file's size unchanged; it is extended again only when the room left
    /// is short; it never shrinks; and everything written reads back after a reopen.
    @Test func dataFileRunsAheadOfItsLastPage_andNeverShrinks() throws {
        let dir = TemporaryDirectory()
        let file = (dir.path as NSString).appendingPathComponent("data.mdb")
        func size() throws -> Int64 { Int64(try #require(try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int)) }
        // Written room past the last page: the first hole after it (its end where the file
        // system does not report holes), less the used bytes.
        func writtenRoom(_ env: Environment) throws -> Int64 {
            let used = Int64(try env.info().usedBytes)
            let handle = try #require(FileHandle(forReadingAtPath: file))
            defer { try? handle.close() }
            return Int64(lseek(handle.fileDescriptor, off_t(used), Environment.seekHole)) - used
        }
        do {
            let env = try Environment(path: dir.path)
            let db = try env.openDatabase("things")
            try env.write { try $0.put(db, key: key(0), value: [0]) }
            let first = try size()
            #expect(first >= Int64(try env.info().usedBytes) + Environment.dataFileLowWater)
            #expect(try writtenRoom(env) >= Environment.writtenLowWater, "the room past the last page is a hole")
            var leastRoom = Int64.max
            // 100, not more: between two checkpoints of the journal every commit takes fresh
            // pages (the checkpoint's are pinned), so many more would use the room up.
            for n in UInt64(1)...100 {
                try env.write { try $0.put(db, key: key(n), value: [UInt8](repeating: 1, count: 500)) }
                leastRoom = min(leastRoom, try writtenRoom(env))
            }
            #expect(try size() == first, "100 small commits changed the file's size")
            #expect(leastRoom >= Environment.writtenLowWater / 2, "a small commit wrote next to a hole")
            // A commit that uses up the room: the next one extends the file again.
            try env.write { txn in for n in UInt64(1000)..<9000 { try txn.put(db, key: key(n), value: [UInt8](repeating: 2, count: 500)) } }
            try env.write { try $0.put(db, key: key(9000), value: [9]) }
            #expect(try size() >= Int64(try env.info().usedBytes) + Environment.dataFileLowWater)
            #expect(try writtenRoom(env) >= Environment.writtenLowWater)
            env.close()
        }
        // Longer than needed already (another build, a tool): left as it is.
        let handle = try #require(FileHandle(forWritingAtPath: file))
        let longer = try size() + (64 << 20)
        try handle.truncate(atOffset: UInt64(longer))
        try handle.close()
        let env = try Environment(path: dir.path)
        let db = try env.openDatabase("things")
        try env.write { try $0.put(db, key: key(9001), value: [9]) }
        #expect(try size() == longer)
        #expect(try env.read { try $0.count(db) } == 8103)
        #expect(try env.read { try $0.get(db, key: self.key(100)) } == [UInt8](repeating: 1, count: 500))
        env.close()
    }

    @Test func mapFull_growsInvisibly() throws {
        let dir = TemporaryDirectory()
        var options = EnvironmentOptions()
        options.mapSize = 64 << 10
        let env = try Environment(path: dir.path, options: options)
        let db = try env.openDatabase("log")
        let value = [UInt8](repeating: 0xAB, count: 1000)
        for batch in 0..<20 {
            try env.write { txn in
                for i in 0..<500 { try txn.put(db, key: key(UInt64(batch * 500 + i)), value: value, flags: .append) }
            }
        }
        #expect(try env.read { try $0.count(db) } == 10_000)
        #expect(try env.info().mapSize > 64 << 10)
    }

    @Test func missingDirectory_withoutCreate_isAClearError() {
        var options = EnvironmentOptions()
        options.createDirectory = false
        #expect {
            try Environment(path: "/nonexistent/vaultlog-\(UUID())", options: options)
        } throws: { error in
            "\(error)".contains("no such directory")
        }
    }

    @Test func sameDirectoryTwice_isRefused() throws {
        let dir = TemporaryDirectory()
        let env = try Environment(path: dir.path)
        #expect { try Environment(path: dir.path) } throws: { "\($0)".contains("already open") }
        env.close()
        _ = try Environment(path: dir.path)
    }

    @Test func compactFile_dropsFreedPages_keepsEveryRecord_andRefusesAnOpenStore() throws {
        let dir = TemporaryDirectory()
        let env = try Environment(path: dir.path)
        let db = try env.openDatabase("things")
        let secret = [UInt8]("freed-page-secret-0123456789".utf8)
        try env.write { txn in
            for n in 0..<2000 as Range<UInt64> { try txn.put(db, key: key(n), value: secret + [UInt8](repeating: UInt8(n % 251), count: 200)) }
        }
        try env.write { txn in for n in 0..<1990 as Range<UInt64> { _ = try txn.delete(db, key: key(n)) } }
        #expect { try Environment.compactFile(at: dir.path) } throws: { "\($0)".contains("open in this process") }
        env.close()
        // A copy left by a compaction that was killed is cleaned up.
        try FileManager.default.createDirectory(atPath: dir.path + "/\(Environment.compactDirectoryPrefix)999", withIntermediateDirectories: false)

        func occurrences() throws -> Int {
            let file = try Data(contentsOf: URL(fileURLWithPath: dir.path + "/data.mdb"))
            var count = 0
            var range = file.startIndex..<file.endIndex
            while let found = file.range(of: Data(secret), in: range) { count += 1; range = found.upperBound..<file.endIndex }
            return count
        }
        #expect(try occurrences() > 10, "deleted values are still in free pages")
        let result = try Environment.compactFile(at: dir.path)
        #expect(result.bytesAfter < result.bytesBefore)
        #expect(try occurrences() == 10, "only the 10 live values remain")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix(".") }.isEmpty)
        let reopened = try Environment(path: dir.path)
        let things = try reopened.openDatabase("things")
        let kept = try reopened.read { txn in try (1990..<2000 as Range<UInt64>).map { try txn.get(things, key: key($0)) } }
        #expect(kept.allSatisfy { $0?.starts(with: secret) == true })
        try reopened.write { try $0.put(things, key: key(5000), value: [1]) }
    }

    @Test func nonLMDBFile_isReportedAsInvalid() throws {
        let dir = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.path, withIntermediateDirectories: true)
        try Data(repeating: 0x42, count: 64 << 10).write(to: URL(fileURLWithPath: dir.path + "/data.mdb"))
        #expect { try Environment(path: dir.path) } throws: { error in
            (error as? LMDBError)?.isInvalidFile == true
        }
    }

    @Test func readsRunWhileWriterHoldsTransaction() async throws {
        let dir = TemporaryDirectory()
        let env = try Environment(path: dir.path)
        let db = try env.openDatabase("kv")
        try env.write { try $0.put(db, key: [0], value: [0]) }
        // A reader on another task sees the last committed snapshot while a write is open.
        let sawCommitted = try env.write { txn -> Bool in
            try txn.put(db, key: [0], value: [1])
            let group = DispatchGroup()
            nonisolated(unsafe) var seen: [UInt8]?
            group.enter()
            Thread {
                seen = try? env.read { try $0.get(db, key: [0]) }
                group.leave()
            }.start()
            group.wait()
            return seen == [0]
        }
        #expect(sawCommitted)
        #expect(try env.read { try $0.get(db, key: [0]) } == [1])
    }

    @Test func libraryVersion_isReported() {
        #expect(Environment.libraryVersion.hasPrefix("LMDB 0.9"))
    }
}

/// A data file whose meta pages were edited (a crafted file, not a bad copy).
@Suite struct CraftedMetaPageTests {
    /// The page number is the file's: a huge one used to overflow `(last page + 1) × page size`
    /// and trap; it is refused with an error, and the file is left as it was.
    @Test(arguments: [UInt64.max, UInt64.max - 1, 1 << 62])
    func hugeLastPageNumber_isRefusedWithAnError(lastPage: UInt64) throws {
        let dir = TemporaryDirectory()
        do {
            let env = try Environment(path: dir.path)
            let db = try env.openDatabase("things")
            try env.write { txn in try txn.put(db, key: [0, 0, 0, 0, 0, 0, 0, 1], value: [1, 2, 3]) }
            env.close()
        }
        let file = (dir.path as NSString).appendingPathComponent("data.mdb")
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        let pageSize = bytes.withUnsafeBytes { Int($0.loadUnaligned(fromByteOffset: 40, as: UInt32.self)) }
        try #require(pageSize >= 512 && bytes.count >= 2 * pageSize)
        for meta in [0, pageSize] {   // both meta pages: last page number at offset 136
            withUnsafeBytes(of: lastPage.littleEndian) { bytes.replaceSubrange(meta + 136..<meta + 144, with: $0) }
        }
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        #expect {
            try Environment(path: dir.path)
        } throws: { error in
            guard let error = error as? LMDBError else { return false }
            return error.isCorrupted && error.operation.contains("data.mdb")
        }
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: file))) == bytes, "the file is unchanged")
    }
}

extension Environment {
    /// Writes waiting for the next group commit.
    func queuedWrites() -> Int {
        group.condition.lock()
        defer { group.condition.unlock() }
        return group.queue.count
    }
}
