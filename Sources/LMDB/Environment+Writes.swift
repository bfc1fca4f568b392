import CLMDB
import Foundation
import Synchronization

extension Environment {
    // MARK: Writes

    /// Runs `body` in a write transaction and commits it (durably, unless the environment's
    /// ``Durability`` says otherwise). If `body` throws, the transaction is aborted and
    /// nothing it wrote is kept. Write transactions are serialised.
    ///
    /// If the map fills up, the transaction is aborted, the map doubled and `body` run again.
    public func write<T>(_ body: (Transaction) throws -> T) throws -> T {
        try writer.withLock { try writeHoldingLock(body) }
    }

    /// ``write(_:)``'s transaction, retried after a map resize; the caller holds ``writer``.
    private func writeHoldingLock<T>(_ body: (Transaction) throws -> T) throws -> T {
        do {
            while true {
                do {
                    return try resizeLock.withReadLock {
                        var raw: OpaquePointer?
                        try check(mdb_txn_begin(env, nil, 0, &raw), "mdb_txn_begin (write)")
                        let recorder: JournalRecorder?
                        do {
                            recorder = try journalBegin(raw!)
                        } catch {
                            mdb_txn_abort(raw)
                            throw error
                        }
                        let txn = Transaction(raw: raw!, readOnly: false, recorder: recorder)
                        let id = UInt64(mdb_txn_id(raw))
                        keepDataFileAhead()
                        let result: T
                        do {
                            result = try body(txn)
                            try journalCommit(txn)
                        } catch {
                            journalCommitFailed(txn, id: id)
                            mdb_txn_abort(txn.raw)
                            throw error
                        }
                        let committed = commitFlushedByLMDB(txn)
                        if committed != MDB_SUCCESS { journalCommitFailed(txn, id: id) }
                        try check(committed, "mdb_txn_commit")
                        return result
                    }
                } catch let error as LMDBError where error.isMapFull {
                    try growMap()
                } catch let error as LMDBError where error.code == MDB_MAP_RESIZED {
                    try adoptResize()
                }
            }
        }
    }

    /// ``write(_:)`` with group commit, for blocking callers on several threads: the write is
    /// queued; if no commit is running, this caller becomes the leader and commits every queued
    /// write (its own, other threads' and ``writeAsync(_:)``'s) in one transaction, each in a
    /// nested transaction of its own, made durable by one commit; otherwise it waits, and either
    /// finds its write committed by that leader or leads the next group. Every caller returns
    /// only after the commit that holds its changes, with its own result or error; a body that
    /// throws rolls back only its own changes. A lone writer pays for no nested transaction.
    ///
    /// `body` may run on another caller's thread (the caller blocks until it has run), so it
    /// must not depend on locks or thread-local state of the calling thread.
    public func writeGrouped<T>(_ body: (Transaction) throws -> T) throws -> T {
        if let result = try commitAlone(body) { return result }
        return try withoutActuallyEscaping(body) { body in
            let outcome = GroupedOutcome()
            let unchecked = UncheckedBody(body: body)
            let write = GroupedWrite { txn in
                Result { try unchecked.body(txn) as Any }
            } resume: { result in
                outcome.result = result
            }
            // `outcome` is set by a leader holding the group's lock, and read here under it.
            leadOrWait(enqueuing: write) { outcome.result != nil }
            guard let result = outcome.result else {
                preconditionFailure("a grouped write returned without an outcome")
            }
            return try result.get() as! T
        }
    }

    /// A lone grouped write: when no commit runs, nothing is queued and no other writer has
    /// announced one (so a leader would take this write alone, without waiting), commits
    /// `body` in its own transaction as the group's leader, without queueing it: writers that
    /// arrive meanwhile queue for the next group, as behind any leader. Nil (nothing run)
    /// otherwise. Spares a single saver the queue's allocations and hand-offs.
    private func commitAlone<T>(_ body: (Transaction) throws -> T) throws -> T? {
        let condition = group.condition
        condition.lock()
        guard !group.leaderActive, group.queue.isEmpty, group.announced <= 1 else {
            condition.unlock()
            return nil
        }
        group.leaderActive = true
        condition.unlock()
        defer {
            condition.lock()
            group.leaderActive = false
            condition.broadcast()
            condition.unlock()
        }
        return try writer.withLock { try writeHoldingLock(body) }
    }

    /// Runs a write transaction on the environment's dedicated writer thread, so that a slow
    /// synced commit does not block a Swift concurrency thread. Group-committed with the
    /// other queued writes, as ``writeGrouped(_:)`` describes.
    public func writeAsync<T: Sendable>(_ body: @escaping @Sendable (Transaction) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let write = GroupedWrite { txn in
                Result { try body(txn) as Any }
            } resume: { result in
                continuation.resume(with: result.map { $0 as! T })
            }
            group.condition.lock()
            group.queue.append(write)
            group.wakeGatheringLeader()
            group.condition.unlock()
            // On the writer thread: lead a group unless one already took this write.
            writerQueue.async { self.leadOrWait(enqueuing: nil) { self.group.queue.isEmpty } }
        }
    }

    /// One queued ``writeAsync(_:)`` or ``writeGrouped(_:)``. Unchecked: a blocking caller's
    /// body and result cross to the thread that commits while that caller waits for them.
    struct GroupedWrite: @unchecked Sendable {
        let run: (Transaction) -> Result<Any, any Error>
        let resume: (Result<Any, any Error>) -> Void
    }

    /// Where a ``writeGrouped(_:)`` caller finds its result; set under the group's lock.
    private final class GroupedOutcome: @unchecked Sendable {
        var result: Result<Any, any Error>?
    }

    /// A blocking caller's body, handed to the thread that commits while the caller waits.
    private struct UncheckedBody: @unchecked Sendable {
        let body: (Transaction) throws -> Any
    }

    /// The group-commit protocol (a leader per group, as in LevelDB's write queue): under the
    /// group's lock, queue `write`; wait while a leader commits, until `isDone` (checked under
    /// the lock); else lead: take the whole queue, commit it outside the group's lock (holding
    /// the writer lock), then resume every write of the group and wake the waiters.
    func leadOrWait(enqueuing write: GroupedWrite?, isDone: () -> Bool) {
        let condition = group.condition
        condition.lock()
        if let write {
            group.queue.append(write)
            group.wakeGatheringLeader()
        }
        while !isDone() && group.leaderActive { condition.wait() }
        guard !isDone() else {
            condition.unlock()
            return
        }
        group.leaderActive = true
        if group.queue.count < group.announced && options.groupGatherLimit > .zero { gatherAnnouncedWrites() }
        var writes = group.queue
        group.queue.removeAll()
        condition.unlock()

        let outcomes = writer.withLock { commit(writes) }
        // Drop the bodies before waking their callers: a blocking caller's body must not
        // outlive its call (`withoutActuallyEscaping` checks).
        let resumes = writes.map(\.resume)
        writes.removeAll()

        condition.lock()
        for (resume, outcome) in zip(resumes, outcomes) { resume(outcome) }
        group.leaderActive = false
        condition.broadcast()
        condition.unlock()
    }

    /// Announces a grouped write: `body` prepares it (encoding, sealing) and then calls
    /// ``writeGrouped(_:)``. While it prepares, a leader about to commit waits a little for it
    /// (at most `options.groupGatherLimit`), so that writers on other threads share one commit
    /// and its flushes instead of each group taking only the writes that queued during the last
    /// flush. A lone writer never waits: nothing else is announced. With 8 threads saving at
    /// once on a 2-core machine, groups grew from 4 to about 6.5 writes per commit.
    public func announcingWrite<T>(_ body: () throws -> T) rethrows -> T {
        group.condition.lock()
        group.announced += 1
        group.condition.unlock()
        defer {
            group.condition.lock()
            group.announced -= 1
            group.wakeGatheringLeader()
            group.condition.unlock()
        }
        return try body()
    }

    /// A new leader's wait for announced writes (called and returning with the group's lock
    /// held): until the queue holds as many writes as there are announced writers (each has
    /// queued its write or left; a queued `writeAsync` write counts too), or the limit has
    /// passed. It waits on a condition of its own, which arrivals signal; the group's lock is
    /// released while it waits (and `gathered` is taken before it is released, so no signal
    /// is lost in between).
    private func gatherAnnouncedWrites() {
        let deadline = Date().addingTimeInterval(Double(options.groupGatherLimit.components.attoseconds) / 1e18
                                                 + Double(options.groupGatherLimit.components.seconds))
        let condition = group.condition
        group.gathering = true
        while group.queue.count < group.announced && Date() < deadline {
            group.gathered.lock()
            condition.unlock()
            _ = group.gathered.wait(until: deadline)
            group.gathered.unlock()
            condition.lock()
        }
        group.gathering = false
    }

    /// Commits `writes` in one transaction (the caller holds the writer lock): a lone write in
    /// the transaction itself, several each in a nested transaction. Returns their outcomes.
    private func commit(_ writes: [GroupedWrite]) -> [Result<Any, any Error>] {
        if writes.count == 1 {
            do {
                return [.success(try writeHoldingLock { txn in try writes[0].run(txn).get() })]
            } catch {
                return [.failure(error)]
            }
        }
        do {
            return try writeHoldingLock { parent -> [Result<Any, any Error>] in
                try writes.map { write in
                    var raw: OpaquePointer?
                    try check(mdb_txn_begin(env, parent.raw, 0, &raw), "mdb_txn_begin (nested write)")
                    let child = Transaction(raw: raw!, readOnly: false, recorder: parent.recorder.map { JournalRecorder(limit: $0.limit) })
                    let outcome = write.run(child)
                    switch outcome {
                    case .success:
                        try check(mdb_txn_commit(child.raw), "mdb_txn_commit (nested write)")
                        if let recorder = child.recorder { parent.recorder?.absorb(recorder) }
                    case .failure(let error as LMDBError) where error.isMapFull:
                        mdb_txn_abort(child.raw)
                        throw error   // the whole group is retried after the map grows
                    case .failure: mdb_txn_abort(child.raw)
                    }
                    return outcome
                }
            }
        } catch {
            return writes.map { _ in .failure(error) }
        }
    }

    /// How far `data.mdb` is kept longer than its last page (sparse: no disk blocks), and the
    /// room left below which it is extended again.
    static let dataFileSlack: Int64 = 8 << 20
    static let dataFileLowWater: Int64 = 4 << 20
    /// How much of that room is kept written (zeros, disk blocks allocated), and the written
    /// room left below which more is written.
    static let writtenSlack: Int64 = 1 << 20
    static let writtenLowWater: Int64 = 512 << 10

    /// Keeps `data.mdb` ahead of its last page, so that commits write inside the file, into
    /// disk blocks it already has, instead of growing it or filling holes. On ext4 a flush of a
    /// file whose size changed also commits the journal: on this machine an `fdatasync` after a
    /// write that extends a file took 0.38 ms at the median and 2.9 ms at the 99th percentile,
    /// against 0.22 and 0.41 ms after a write inside it. A write into a hole costs the same kind
    /// of journal commit (the block is allocated when it is flushed), so the first 1 MiB past
    /// the last page is written with zeros, without a flush of its own (the next commit's flush
    /// takes it, once per 1 MiB of growth); beyond it the file is extended by `ftruncate`
    /// (holes, no disk space) once per 4 MiB of growth. A bulk load overwrites the zeros in the
    /// page cache before they reach the disk. LMDB reads nothing past its last page, so the
    /// tail is never read, and a crash leaves only that tail.
    ///
    /// Called at the start of a write transaction, before it has written anything: LMDB's
    /// writer lock keeps every other process from writing or extending the file meanwhile, and
    /// only the region past the last committed page is touched (the zeros stay inside the size
    /// `ftruncate` gave, so they never change it). Best effort: a failure leaves the file as it
    /// was (LMDB extends it itself as before).
    func keepDataFileAhead() {
        guard !options.readOnly else { return }
        var fd: Int32 = -1
        var info = MDB_envinfo()
        var pages = MDB_stat()
        guard mdb_env_get_fd(env, &fd) == 0, fd >= 0, mdb_env_info(env, &info) == 0, mdb_env_stat(env, &pages) == 0 else { return }
        var file = stat()
        guard fstat(fd, &file) == 0 else { return }
        let used = (Int64(info.me_last_pgno) + 1) * Int64(pages.ms_psize)
        if Int64(file.st_size) < used + Self.dataFileLowWater {
            guard ftruncate(fd, off_t(used + Self.dataFileSlack)) == 0 else { return }
        }
        // The first hole at or past the last page (the file's end where holes are unknown).
        // LMDB moves the descriptor's offset itself before each `writev`, so this seek is
        // harmless to it.
        let hole = Int64(lseek(fd, off_t(used), Self.seekHole))
        guard hole >= used, hole < used + Self.writtenLowWater else { return }
        Self.writeZeros(fd: fd, from: hole, to: used + Self.writtenSlack)
    }

    /// `SEEK_HOLE` (Glibc's module does not export it).
    #if os(Linux)
    static let seekHole: Int32 = 4
    #else
    static let seekHole: Int32 = SEEK_HOLE
    #endif

    private static let zeros = [UInt8](repeating: 0, count: 64 << 10)

    /// Writes zeros over `from..<to` of `fd` with `pwrite`, stopping at the first failure
    /// (`data.mdb`'s room past its last page, the journal's past its records).
    static func writeZeros(fd: Int32, from start: Int64, to end: Int64) {
        var offset = start
        zeros.withUnsafeBytes { buffer in
            while offset < end {
                let count = Int(Swift.min(Int64(buffer.count), end - offset))
                let written = pwrite(fd, buffer.baseAddress, count, off_t(offset))
                guard written > 0 else { return }
                offset += Int64(written)
            }
        }
    }

    /// `MDB_MAP_RESIZED` at begin means another process grew the map: adopt its size. Needs
    /// no transaction active in this process, hence the exclusive resize lock.
    func adoptResize() throws {
        try resizeLock.withWriteLock {
            try check(mdb_env_set_mapsize(env, 0), "mdb_env_set_mapsize (adopt)")
        }
    }

    /// Doubles the map. Called with the writer lock held and no write transaction active;
    /// waits for readers to finish (exclusive resize lock).
    func growMap() throws {
        try resizeLock.withWriteLock {
            var info = MDB_envinfo()
            try check(mdb_env_info(env, &info), "mdb_env_info")
            let newSize = info.me_mapsize * 2
            try check(mdb_env_set_mapsize(env, newSize), "mdb_env_set_mapsize \(newSize)")
        }
    }
}
