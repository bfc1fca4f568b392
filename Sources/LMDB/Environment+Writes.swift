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
        try writer.withLock {
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
                Result { try body(txn) }.map { $0 as any Sendable }
            } resume: { result in
                continuation.resume(with: result.map { $0 as! T })
            }
            groupedWrites.withLock { $0.append(write) }
            writerQueue.async { self.commitGroupedWrites() }
        }
    }

    /// One queued ``writeAsync(_:)``.
    struct GroupedWrite: Sendable {
        let run: @Sendable (Transaction) -> Result<any Sendable, any Error>
        let resume: @Sendable (Result<any Sendable, any Error>) -> Void
    }

    /// Runs every queued write in one transaction (on the writer queue).
    func commitGroupedWrites() {
        let writes = groupedWrites.withLock { queued -> [GroupedWrite] in
            defer { queued.removeAll() }
            return queued
        }
        guard !writes.isEmpty else { return }
        do {
            let outcomes = try write { parent -> [Result<any Sendable, any Error>] in
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
