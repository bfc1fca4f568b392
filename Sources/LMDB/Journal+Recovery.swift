import CLMDB
import Foundation

/// A journal that cannot be used, named with what to do.
public enum JournalError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A record's operations do not decode (the record passed its checksum, so this is a bug
    /// or a journal written by another program).
    case damagedRecord(journal: String, detail: String)
    /// The machine stopped (OS crash, power loss) while commits were in the journal only, and
    /// this open may not repair the store.
    case recoveryNeeded(directory: String)

    public var description: String {
        switch self {
        case .damagedRecord(let journal, let detail):
            "the store's journal \(journal) holds a record that cannot be replayed (\(detail)); "
                + "nothing was changed: keep a copy of the store's directory and report it"
        case .recoveryNeeded(let directory):
            "the store \(directory) was in use when the machine stopped, and its last commits are only in its journal; "
                + "open it once writable (any VaultLog command that writes, or the app) to replay them; nothing was changed"
        }
    }
}

extension JournalError: LocalizedError {
    public var errorDescription: String? { description }
}

extension Journal {
    /// What an open finds in the store at `directory`: the records written after the
    /// journal's checkpoint when the machine has restarted since (its boot differs) and the
    /// checkpoint is of this `data.mdb`; nil when there is nothing to recover.
    static func pendingRecovery(in directory: String) -> (header: JournalHeader, records: [(txn: UInt64, body: [UInt8])])? {
        let path = (directory as NSString).appendingPathComponent(fileName)
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { closeFile(fd) }
        let boot = bootIdentity(of: directory)
        guard let header = readHeader(fd: fd), !boot.isEmpty, header.boot != boot else { return nil }
        var file = stat()
        guard stat((directory as NSString).appendingPathComponent("data.mdb"), &file) == 0,
              UInt64(file.st_ino) == header.dataInode else { return nil }
        var records: [(txn: UInt64, body: [UInt8])] = []
        _ = scan(fd: fd, header: header) { txn, body in records.append((txn, Array(body))) }
        return records.isEmpty ? nil : (header, records)
    }

    /// Brings the store at `directory` back after a machine stop (the caller holds its lock
    /// exclusively, so no other open exists): puts the checkpoint's meta pages back into
    /// `data.mdb` (the checkpoint's pages were flushed and pinned, so its tree is whole
    /// whatever later pages reached the disk), replays the records in one transaction flushed
    /// by LMDB, and writes a new checkpoint. Stopped halfway, it is simply done again: the
    /// replay writes only pages the checkpoint does not use. Returns the commits replayed.
    @discardableResult
    static func recover(directory: String, options: EnvironmentOptions) throws -> Int {
        guard let (header, records) = pendingRecovery(in: directory) else { return 0 }
        let dataPath = (directory as NSString).appendingPathComponent("data.mdb")
        let data = open(dataPath, O_RDWR | O_CLOEXEC)
        guard data >= 0 else { throw LMDBError(code: errno, operation: "open \(dataPath) to recover it from its journal") }
        defer { closeFile(data) }
        for (index, meta) in [header.meta0, header.meta1].enumerated() {
            let written = meta.withUnsafeBytes { pwrite(data, $0.baseAddress, $0.count, off_t(index * Int(header.pageSize))) }
            guard written == meta.count else {
                throw LMDBError(code: errno, operation: "restore the checkpoint's meta pages in \(dataPath) (the journal is kept; open again)")
            }
        }
        guard fsync(data) == 0 else { throw LMDBError(code: errno, operation: "flush \(dataPath) during recovery") }

        var handle: OpaquePointer?
        try check(mdb_env_create(&handle), "mdb_env_create (recovery)")
        guard let env = handle else { throw LMDBError(code: ENOMEM, operation: "mdb_env_create (recovery)") }
        defer { mdb_env_close(env) }
        try check(mdb_env_set_maxdbs(env, MDB_dbi(options.maxDatabases)), "mdb_env_set_maxdbs")
        var mapSize = max(options.mapSize, 1 << 20)
        try check(mdb_env_set_mapsize(env, mapSize), "mdb_env_set_mapsize")
        try check(mdb_env_open(env, directory, UInt32(MDB_NOTLS), 0o600), "mdb_env_open \(directory) (recovery)")
        let journalPath = (directory as NSString).appendingPathComponent(fileName)
        while true {
            var raw: OpaquePointer?
            try check(mdb_txn_begin(env, nil, 0, &raw), "mdb_txn_begin (recovery)")
            do {
                for record in records {
                    try record.body.withUnsafeBytes { try replayJournalOperations($0, in: raw!, journal: journalPath) }
                }
                try check(mdb_txn_commit(raw), "mdb_txn_commit (recovery)")
                break
            } catch let error as LMDBError where error.isMapFull {
                mdb_txn_abort(raw)
                mapSize *= 2
                try check(mdb_env_set_mapsize(env, mapSize), "mdb_env_set_mapsize \(mapSize) (recovery)")
            } catch {
                mdb_txn_abort(raw)
                throw error
            }
        }
        try check(mdb_env_sync(env, 1), "mdb_env_sync (recovery)")

        var info = MDB_envinfo()
        try check(mdb_env_info(env, &info), "mdb_env_info")
        let journal = try Journal(directory: directory)
        try journal.writeHeader(JournalHeader(
            sequence: header.sequence &+ 1, generation: UInt64.random(in: 1...UInt64.max), checkpointTxn: UInt64(info.me_last_txnid),
            dataInode: header.dataInode, pageSize: header.pageSize, pinPID: 0, boot: bootIdentity(of: directory),
            meta0: JournalHeader.metaPage(0, of: data, pageSize: header.pageSize),
            meta1: JournalHeader.metaPage(1, of: data, pageSize: header.pageSize)))
        return records.count
    }

    /// Recovers the store at `directory` when it needs it, before an open maps it: waits (up to
    /// `limit`) to hold its lock exclusively, which it gives back. A read-only open may not
    /// write, and throws ``JournalError/recoveryNeeded(directory:)`` instead.
    static func recoverBeforeOpen(directory: String, options: EnvironmentOptions, holding held: StoreLock?) throws {
        guard pendingRecovery(in: directory) != nil else { return }
        guard !options.readOnly else { throw JournalError.recoveryNeeded(directory: directory) }
        if held != nil {
            try recover(directory: directory, options: options)
            return
        }
        let deadline = ContinuousClock.now + options.rewriteWaitLimit
        while true {
            do {
                let exclusive = try StoreLock.exclusive(directory: directory, outcome: "nothing was changed")
                defer { exclusive.release() }
                try recover(directory: directory, options: options)
                return
            } catch let error as StoreInUseError {
                guard ContinuousClock.now < deadline else { throw error }
                Thread.sleep(forTimeInterval: 0.02)
            }
        }
    }
}
