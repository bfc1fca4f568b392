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
                        let txn = Transaction(raw: raw!, readOnly: false)
                        let result: T
                        do {
                            result = try body(txn)
                        } catch {
                            mdb_txn_abort(txn.raw)
                            throw error
                        }
                        try check(mdb_txn_commit(txn.raw), "mdb_txn_commit")
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
    /// queued, and whichever caller gets the writer lock first runs every queued write (its
    /// own, other threads' and ``writeAsync(_:)``'s) in one transaction, each in a nested
    /// transaction of its own, made durable by one commit. Every caller returns only after the
    /// commit that holds its changes, with its own result or error; a body that throws rolls
    /// back only its own changes. With one writer at a time this is ``write(_:)`` (no nested
    /// transaction); with eight savers on this machine it cut the commits, and with them the
    /// device flushes, per save about sevenfold.
    ///
    /// `body` may run on another caller's thread (the caller blocks until it has run), so it
    /// must not depend on locks or thread-local state of the calling thread.
    public func writeGrouped<T>(_ body: (Transaction) throws -> T) throws -> T {
        try withoutActuallyEscaping(body) { body in
            let outcome = GroupedOutcome()
            let unchecked = UncheckedBody(body: body)
            let write = GroupedWrite { txn in
                Result { try unchecked.body(txn) as Any }
            } resume: { result in
                outcome.result = result
            }
            groupedWrites.withLock { $0.append(write) }
            // Runs the group holding our write, unless a caller before us already committed it
            // (then the queue no longer holds it and `outcome` is set: resumes happen under
            // the writer lock).
            commitGroupedWrites()
            guard let result = outcome.result else {
                preconditionFailure("a grouped write left the writer lock without an outcome")
            }
            return try result.get() as! T
        }
    }

    /// Runs a write transaction on the environment's dedicated writer thread, so that a slow
    /// synced commit does not block a Swift concurrency thread.
    ///
    /// Group commit: writes that arrive while a commit is in progress are run together in the
    /// next transaction, each in a nested transaction of its own (a body that throws rolls back
    /// only its own changes and gets its own error), and made durable by one commit. A caller
    /// resumes only after the commit that holds its changes; a failed commit fails them all.
    public func writeAsync<T: Sendable>(_ body: @escaping @Sendable (Transaction) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let write = GroupedWrite { txn in
                Result { try body(txn) as Any }
            } resume: { result in
                continuation.resume(with: result.map { $0 as! T })
            }
            groupedWrites.withLock { $0.append(write) }
            writerQueue.async { self.commitGroupedWrites() }
        }
    }

    /// One queued ``writeAsync(_:)`` or ``writeGrouped(_:)``. Unchecked: a blocking caller's
    /// body and result cross to the thread that commits while that caller waits for them.
    struct GroupedWrite: @unchecked Sendable {
        let run: (Transaction) -> Result<Any, any Error>
        let resume: (Result<Any, any Error>) -> Void
    }

    /// Where a ``writeGrouped(_:)`` caller finds its result; set under the writer lock.
    private final class GroupedOutcome: @unchecked Sendable {
        var result: Result<Any, any Error>?
    }

    /// A blocking caller's body, handed to the thread that commits while the caller waits.
    private struct UncheckedBody: @unchecked Sendable {
        let body: (Transaction) throws -> Any
    }

    /// Runs every queued write in one transaction and resumes their callers, holding the
    /// writer lock throughout (so a blocking caller that finds the queue empty finds its
    /// outcome set).
    func commitGroupedWrites() {
        writer.withLock {
            let writes = groupedWrites.withLock { queued -> [GroupedWrite] in
                defer { queued.removeAll() }
                return queued
            }
            guard !writes.isEmpty else { return }
            // One write: its own transaction, no nested one (a failure aborts just it).
            if writes.count == 1 {
                let write = writes[0]
                let outcome: Result<Any, any Error>
                do {
                    outcome = .success(try writeHoldingLock { txn in try write.run(txn).get() })
                } catch {
                    outcome = .failure(error)
                }
                write.resume(outcome)
                return
            }
            commitGroup(writes)
        }
    }

    /// ``commitGroupedWrites()``'s transaction for two or more writes.
    private func commitGroup(_ writes: [GroupedWrite]) {
        do {
            let outcomes = try writeHoldingLock { parent -> [Result<Any, any Error>] in
                try writes.map { write in
                    var raw: OpaquePointer?
                    try check(mdb_txn_begin(env, parent.raw, 0, &raw), "mdb_txn_begin (nested write)")
                    let child = Transaction(raw: raw!, readOnly: false)
                    let outcome = write.run(child)
                    switch outcome {
                    case .success: try check(mdb_txn_commit(child.raw), "mdb_txn_commit (nested write)")
                    case .failure(let error as LMDBError) where error.isMapFull:
                        mdb_txn_abort(child.raw)
                        throw error   // the whole group is retried after the map grows
                    case .failure: mdb_txn_abort(child.raw)
                    }
                    return outcome
                }
            }
            for (write, outcome) in zip(writes, outcomes) { write.resume(outcome) }
        } catch {
            for write in writes { write.resume(.failure(error)) }
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
