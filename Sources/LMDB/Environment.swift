import CLMDB
import Foundation
import Synchronization

/// An open LMDB environment: a directory holding `data.mdb` and `lock.mdb`.
///
/// Reads (``read(_:)``) run concurrently from any thread (`MDB_NOTLS`). Writes
/// (``write(_:)``) are serialised: one write transaction at a time. When a write hits
/// `MDB_MAP_FULL`, the environment aborts it, doubles the map and runs the closure again,
/// invisibly to the caller — so a write closure must not have side effects outside the
/// transaction that would be wrong to repeat.
///
/// ```swift
/// let env = try Environment(path: dir)
/// let events = try env.openDatabase("events")
/// try env.write { txn in try txn.put(events, key: [0, 1], value: [42]) }
/// let value = try env.read { txn in try txn.get(events, key: [0, 1]) }
/// ```
///
/// Never open the same directory twice in one process (LMDB's rule: closing one handle would
/// drop the other's file locks). ``Environment`` enforces this.
public final class Environment: @unchecked Sendable {
    /// The directory.
    public let path: String
    /// The options it was opened with.
    public let options: EnvironmentOptions
    /// Stale reader slots cleared by `mdb_reader_check` at open.
    public let staleReadersCleared: Int

    let env: OpaquePointer
    /// The commit journal (``Journal``); nil in a read-only environment.
    let journal: Journal?
    /// Test hook: the next journaled commit fails after its record was flushed, leaving the
    /// record as a process killed at that point would.
    package let failNextJournaledCommit = Atomic<Bool>(false)
    /// Test hook: LMDB's next commit of a journaled transaction fails (as on a full disk):
    /// the transaction is aborted and its commit returns `EIO`, after its record was flushed.
    package let failNextLMDBCommit = Atomic<Bool>(false)
    /// Serialises write transactions (LMDB allows one at a time per environment).
    let writer = PlainLock()
    /// Readers hold this shared; a map resize holds it exclusively, because
    /// `mdb_env_set_mapsize` requires that no transaction is active in this process.
    let resizeLock = ReadWriteLock()
    let closed = Atomic<Bool>(false)
    let writerQueue = DispatchQueue(label: "vaultlog.lmdb.writer")
    /// Writes queued by ``writeAsync(_:)`` and ``writeGrouped(_:)`` for the next group commit.
    let group = GroupCommitState()

    static let openPaths = Mutex(Set<String>())

    /// LMDB maps `data.mdb` and reads pages up to the last one its newest meta page names; a
    /// file cut shorter than that (a bad copy, a full disk) makes those reads fault (SIGBUS),
    /// killing the process. So before opening, read both meta pages (layout of liblmdb 0.9:
    /// 16-byte page header, then magic, version, address, map size, two 48-byte DB records
    /// whose first `md_pad` is the page size, last page number, txn id) and refuse a file shorter
    /// than `(last page + 1) × page size`. Files that are not LMDB are left to `mdb_env_open`.
    static func refuseTruncatedDataFile(in directory: String) throws {
        let file = (directory as NSString).appendingPathComponent("data.mdb")
        guard let handle = FileHandle(forReadingAtPath: file) else { return }
        defer { try? handle.close() }
        let size = (try? handle.seekToEnd()) ?? 0
        func meta(at offset: UInt64) -> (pageSize: UInt64, lastPage: UInt64, txn: UInt64)? {
            guard (try? handle.seek(toOffset: offset)) != nil, let page = try? handle.read(upToCount: 152), page.count == 152 else { return nil }
            func word<T: FixedWidthInteger>(_ at: Int, _: T.Type) -> T {
                page.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: at, as: T.self) }
            }
            guard word(16, UInt32.self) == 0xBEEF_C0DE else { return nil }
            return (UInt64(word(40, UInt32.self)), word(136, UInt64.self), word(144, UInt64.self))
        }
        guard let first = meta(at: 0), first.pageSize >= 512, first.pageSize <= 1 << 16 else { return }
        let second = size >= first.pageSize * 2 ? meta(at: first.pageSize) : nil
        let newest = second.map { $0.txn > first.txn ? $0 : first } ?? first
        // The page number comes from the file: a crafted one must give an error, not overflow.
        let (pages, pagesOverflow) = newest.lastPage.addingReportingOverflow(1)
        let (needed, neededOverflow) = pages.multipliedReportingOverflow(by: first.pageSize)
        if pagesOverflow || neededOverflow {
            throw LMDBError(code: MDB_CORRUPTED, operation:
                "open store \(directory) (data.mdb is damaged: its meta page names last page \(newest.lastPage), beyond any file)")
        }
        if size < needed {
            throw LMDBError(code: MDB_CORRUPTED, operation:
                "open store \(directory) (data.mdb is truncated: \(size) bytes, its last transaction needs \(needed))")
        }
    }

    /// This open's shared hold on the store's ``StoreLock`` (nil: a read-only open that could
    /// not open the lock file, an environment opened under its caller's exclusive lock, or
    /// handed over by ``lockExclusively(outcome:)``); released after the environment closes.
    let storeLock: Mutex<StoreLock?>

    /// Opens (and by default creates) the environment at `path`.
    ///
    /// Takes the store's lock file (``StoreLock``) shared before it maps `data.mdb`, and keeps
    /// it until ``close()``: another process's file rewrite is refused while this environment
    /// is open. While a rewrite holds the lock, this waits for it up to
    /// ``EnvironmentOptions/rewriteWaitLimit`` and then opens the new file (or throws
    /// ``StoreInUseError``). Any number of processes may open the same store at once; one
    /// process may open it once (``close()`` it before opening it again).
    public convenience init(path: String, options: EnvironmentOptions = EnvironmentOptions()) throws {
        try self.init(path: path, options: options, holding: nil)
    }

    /// Opens the environment; with `held` (the caller's exclusive ``StoreLock`` of this
    /// directory) it takes no lock of its own.
    init(path: String, options: EnvironmentOptions, holding held: StoreLock?) throws {
        let fm = FileManager.default
        var isDirectory: ObjCBool = false
        if fm.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw LMDBError(code: ENOTDIR, operation: "open store \(path) (not a directory)")
            }
        } else if options.createDirectory && !options.readOnly {
            do {
                try fm.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw LMDBError(code: EACCES, operation: "create store directory \(path)")
            }
        } else {
            throw LMDBError(code: ENOENT, operation: "open store \(path) (no such directory)")
        }
        let canonical = URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
        let registered = Self.openPaths.withLock { $0.insert(canonical).inserted }
        guard registered else {
            throw LMDBError(code: EBUSY, operation: "open store \(path) (already open in this process; share the one Environment)")
        }

        var handle: OpaquePointer?
        var shared: StoreLock?
        do {
            // Before anything of data.mdb is read: commits only in the journal when the
            // machine stopped are replayed, and a rewrite in progress finishes first.
            try Journal.recoverBeforeOpen(directory: path, options: options, holding: held)
            if held == nil {
                shared = try StoreLock.shared(directory: path, required: !options.readOnly, limit: options.rewriteWaitLimit)
            }
            try Self.refuseTruncatedDataFile(in: path)
            try check(mdb_env_create(&handle), "mdb_env_create")
            guard let handle else { throw LMDBError(code: ENOMEM, operation: "mdb_env_create") }
            do {
                try check(mdb_env_set_maxdbs(handle, MDB_dbi(options.maxDatabases)), "mdb_env_set_maxdbs")
                try check(mdb_env_set_maxreaders(handle, UInt32(options.maxReaders)), "mdb_env_set_maxreaders")
                try check(mdb_env_set_mapsize(handle, options.mapSize), "mdb_env_set_mapsize")
                var flags = UInt32(MDB_NOTLS)
                switch options.durability {
                case .full: flags |= UInt32(MDB_NOSYNC)  // the journal makes each commit durable
                case .noMetaSync: flags |= UInt32(MDB_NOMETASYNC)
                case .noSync: flags |= UInt32(MDB_NOSYNC)
                }
                if options.readOnly { flags |= UInt32(MDB_RDONLY) }
                if options.readOnly && options.noLock { flags |= UInt32(MDB_NOLOCK) }
                try check(mdb_env_open(handle, path, flags, 0o600), "mdb_env_open \(path)")
                journal = options.readOnly ? nil : try Journal(directory: path)
                staleReadersCleared = try Self.clearStaleReaders(handle, inWriteTransaction: !options.readOnly)
            } catch {
                mdb_env_close(handle)
                throw error
            }
            env = handle
        } catch {
            shared?.release()
            _ = Self.openPaths.withLock { $0.remove(canonical) }
            throw error
        }
        storeLock = Mutex(shared)
        self.path = path
        self.canonicalPath = canonical
        self.options = options
    }

    let canonicalPath: String

    /// Clears the reader slots of dead processes (`mdb_reader_check`). A writable open does it
    /// inside a write transaction: a dead process's slot may be the pin of the journal's
    /// checkpoint, and a pin may only go away while no commit is being made (see ``Journal``).
    static func clearStaleReaders(_ handle: OpaquePointer, inWriteTransaction: Bool) throws -> Int {
        var txn: OpaquePointer?
        if inWriteTransaction { try check(mdb_txn_begin(handle, nil, 0, &txn), "mdb_txn_begin (reader check)") }
        defer { if let txn { mdb_txn_abort(txn) } }
        var dead: Int32 = 0
        try check(mdb_reader_check(handle, &dead), "mdb_reader_check")
        return Int(dead)
    }

    deinit { close() }

    /// Closes the environment, then releases its share of the store's lock. Any use
    /// afterwards is a programming error. Called by `deinit`.
    public func close() {
        writer.withLock { closeHoldingWriter() }
    }

    /// ``close()``, with the writer lock held (no write of this process is running).
    func closeHoldingWriter() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        journalClose()
        resizeLock.withWriteLock { mdb_env_close(env) }
        storeLock.withLock { lock in
            lock?.release()
            lock = nil
        }
        _ = Self.openPaths.withLock { $0.remove(canonicalPath) }
    }

    /// The LMDB library version string, e.g. `"LMDB 0.9.24: (July 24, 2019)"`.
    public static var libraryVersion: String { String(cString: mdb_version(nil, nil, nil)) }

    /// Opens (creating in a write transaction if needed) a named database.
    public func openDatabase(_ name: String, create: Bool = true) throws -> Database {
        if create && !options.readOnly {
            return try write { txn in try txn.openDatabase(name, create: true) }
        }
        return try openExistingDatabases([name])[0]
    }

    /// Opens databases that must already exist, in a read transaction that is *committed*:
    /// LMDB closes handles opened in an aborted transaction (which ``read(_:)`` always is),
    /// so they would be invalid afterwards. This is how a read-only environment opens its databases.
    public func openExistingDatabases(_ names: [String]) throws -> [Database] {
        try resizeLock.withReadLock {
            var raw: OpaquePointer?
            try check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &raw), "mdb_txn_begin (open databases)")
            let txn = Transaction(raw: raw!, readOnly: true)
            let databases: [Database]
            do {
                databases = try names.map { try txn.openDatabase($0, create: false) }
            } catch {
                mdb_txn_abort(txn.raw)
                throw error
            }
            try check(mdb_txn_commit(txn.raw), "mdb_txn_commit (open databases)")
            return databases
        }
    }

    /// Runs `body` in a read-only transaction. Runs concurrently with other reads and with the
    /// writer. The buffers a read transaction hands out are valid only inside `body`.
    public func read<T>(_ body: (Transaction) throws -> T) throws -> T {
        while true {
            do {
                return try resizeLock.withReadLock {
                    var raw: OpaquePointer?
                    try check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &raw), "mdb_txn_begin (read)")
                    let txn = Transaction(raw: raw!, readOnly: true)
                    defer { mdb_txn_abort(txn.raw) }
                    return try body(txn)
                }
            } catch let error as LMDBError where error.code == MDB_MAP_RESIZED {
                try adoptResize()
            }
        }
    }

    // MARK: Information

    /// Map size, bytes in use and reader slots.
    public func info() throws -> EnvironmentInfo {
        var info = MDB_envinfo()
        var stat = MDB_stat()
        try check(mdb_env_info(env, &info), "mdb_env_info")
        try check(mdb_env_stat(env, &stat), "mdb_env_stat")
        return EnvironmentInfo(
            mapSize: info.me_mapsize,
            usedBytes: Self.multiplySaturating(info.me_last_pgno, plusOne: true, by: Int(stat.ms_psize)),
            pageSize: Int(stat.ms_psize),
            lastTransactionID: info.me_last_txnid,
            readersUsed: Int(info.me_numreaders),
            maxReaders: Int(info.me_maxreaders))
    }

    /// `(value + 1) × factor`, or `Int.max` when that does not fit (the page number is the file's).
    static func multiplySaturating(_ value: Int, plusOne: Bool, by factor: Int) -> Int {
        let (base, o1) = value.addingReportingOverflow(plusOne ? 1 : 0)
        let (product, o2) = base.multipliedReportingOverflow(by: factor)
        return o1 || o2 ? .max : product
    }

}

#if canImport(Glibc)
func closeFile(_ fd: Int32) { _ = Glibc.close(fd) }
#elseif canImport(Darwin)
func closeFile(_ fd: Int32) { _ = Darwin.close(fd) }
#endif

/// The queue of a group commit and whether a leader is committing, guarded by `condition`.
final class GroupCommitState: @unchecked Sendable {
    let condition = NSCondition()
    var queue: [Environment.GroupedWrite] = []
    var leaderActive = false
    /// Threads inside ``Environment/announcingWrite(_:)``: about to queue a grouped write, or
    /// queued, or just resumed.
    var announced = 0
    /// Whether a leader is waiting for announced writes (``gathered`` wakes it).
    var gathering = false
    /// The leader's own condition while it gathers, so that an arriving write wakes it alone
    /// and not every writer waiting on ``condition``. Taken after ``condition``, never before.
    let gathered = NSCondition()

    /// Wakes a gathering leader; called holding ``condition`` after the queue or the count of
    /// announced writes changed.
    func wakeGatheringLeader() {
        guard gathering else { return }
        gathered.lock()
        gathered.signal()
        gathered.unlock()
    }
}
