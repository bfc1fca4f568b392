import CLMDB
import Foundation
import Synchronization

/// How much a commit promises about surviving a power loss or OS crash. A process crash never
/// loses a committed transaction in any mode (dirty pages stay in the kernel's page cache).
public enum Durability: Sendable, Equatable {
    /// Every commit is flushed (data and meta page). Nothing committed is ever lost. Default.
    case full
    /// `MDB_NOMETASYNC`: data pages are flushed, the meta page lazily. An OS crash or power
    /// loss may undo the **last** committed transaction; the database stays consistent.
    case noMetaSync
    /// `MDB_NOSYNC`: nothing is flushed at commit. An OS crash or power loss may lose recent
    /// transactions and, on file systems that reorder writes, corrupt the database.
    case noSync
}

/// Options for ``Environment/init(path:options:)``.
public struct EnvironmentOptions: Sendable {
    /// Initial map size in bytes; the map doubles automatically when full.
    public var mapSize: Int = 64 << 20
    /// Named databases the environment may hold.
    public var maxDatabases: Int = 16
    /// Reader-table slots (concurrent read transactions across processes). The lock file is
    /// sparse, so a generous number costs nothing.
    public var maxReaders: Int = 512
    /// Commit durability; see ``Durability``.
    public var durability: Durability = .full
    /// Create the directory if it is missing. Tools that only inspect a store set this to false,
    /// so a mistyped path is an error rather than a new empty store.
    public var createDirectory: Bool = true
    /// Open read-only (`MDB_RDONLY`): no write transaction can begin.
    public var readOnly: Bool = false
    /// Open without the lock file (`MDB_NOLOCK`), for reading a store in a directory this user
    /// cannot write (LMDB otherwise needs write access to `lock.mdb` even to read). Only with
    /// `readOnly`; a writer in another process at the same time may make reads inconsistent.
    public var noLock: Bool = false

    public init() {}
}

/// A handle on a named database inside an environment (an `MDB_dbi`).
public struct Database: Sendable, Hashable {
    /// The LMDB handle.
    public let dbi: MDB_dbi
    /// The name it was opened with.
    public let name: String
}

/// Sizes reported by ``Environment/info()``.
public struct EnvironmentInfo: Sendable {
    /// Current map size in bytes.
    public let mapSize: Int
    /// Bytes of the map in use (last used page × page size).
    public let usedBytes: Int
    /// The page size.
    public let pageSize: Int
    /// The last committed transaction id.
    public let lastTransactionID: Int
    /// Reader slots in use / available.
    public let readersUsed: Int
    public let maxReaders: Int
}

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
    /// Serialises write transactions (LMDB allows one at a time per environment).
    private let writer = PlainLock()
    /// Readers hold this shared; a map resize holds it exclusively, because
    /// `mdb_env_set_mapsize` requires that no transaction is active in this process.
    private let resizeLock = ReadWriteLock()
    private let closed = Atomic<Bool>(false)
    private let writerQueue = DispatchQueue(label: "vaultlog.lmdb.writer")
    /// Writes queued by ``writeAsync(_:)`` for the next group commit.
    private let groupedWrites = Mutex<[GroupedWrite]>([])

    private static let openPaths = Mutex(Set<String>())

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

    /// Opens (and by default creates) the environment at `path`.
    public init(path: String, options: EnvironmentOptions = EnvironmentOptions()) throws {
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
        try Self.refuseTruncatedDataFile(in: path)
        let canonical = URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
        let registered = Self.openPaths.withLock { $0.insert(canonical).inserted }
        guard registered else {
            throw LMDBError(code: EBUSY, operation: "open store \(path) (already open in this process; share the one Environment)")
        }

        var handle: OpaquePointer?
        do {
            try check(mdb_env_create(&handle), "mdb_env_create")
            guard let handle else { throw LMDBError(code: ENOMEM, operation: "mdb_env_create") }
            do {
                try check(mdb_env_set_maxdbs(handle, MDB_dbi(options.maxDatabases)), "mdb_env_set_maxdbs")
                try check(mdb_env_set_maxreaders(handle, UInt32(options.maxReaders)), "mdb_env_set_maxreaders")
                try check(mdb_env_set_mapsize(handle, options.mapSize), "mdb_env_set_mapsize")
                var flags = UInt32(MDB_NOTLS)
                switch options.durability {
                case .full: break
                case .noMetaSync: flags |= UInt32(MDB_NOMETASYNC)
                case .noSync: flags |= UInt32(MDB_NOSYNC)
                }
                if options.readOnly { flags |= UInt32(MDB_RDONLY) }
                if options.readOnly && options.noLock { flags |= UInt32(MDB_NOLOCK) }
                try check(mdb_env_open(handle, path, flags, 0o600), "mdb_env_open \(path)")
                var dead: Int32 = 0
                try check(mdb_reader_check(handle, &dead), "mdb_reader_check")
                staleReadersCleared = Int(dead)
            } catch {
                mdb_env_close(handle)
                throw error
            }
            env = handle
        } catch {
            _ = Self.openPaths.withLock { $0.remove(canonical) }
            throw error
        }
        self.path = path
        self.canonicalPath = canonical
        self.options = options
    }

    private let canonicalPath: String

    deinit { close() }

    /// Closes the environment. Any use afterwards is a programming error. Called by `deinit`.
    public func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        writer.withLock {
            resizeLock.withWriteLock { mdb_env_close(env) }
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
    private func commitGroupedWrites() {
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
    private func adoptResize() throws {
        try resizeLock.withWriteLock {
            try check(mdb_env_set_mapsize(env, 0), "mdb_env_set_mapsize (adopt)")
        }
    }

    /// Doubles the map. Called with the writer lock held and no write transaction active;
    /// waits for readers to finish (exclusive resize lock).
    private func growMap() throws {
        try resizeLock.withWriteLock {
            var info = MDB_envinfo()
            try check(mdb_env_info(env, &info), "mdb_env_info")
            let newSize = info.me_mapsize * 2
            try check(mdb_env_set_mapsize(env, newSize), "mdb_env_set_mapsize \(newSize)")
        }
    }

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

    /// Flushes to disk; useful after writes in ``Durability/noSync`` mode.
    public func sync() throws {
        try check(mdb_env_sync(env, 1), "mdb_env_sync")
    }

    /// Copies the environment to `directory` (a consistent snapshot, `mdb_env_copy2`).
    public func copy(to directory: String, compact: Bool = false) throws {
        try check(mdb_env_copy2(env, directory, compact ? UInt32(MDB_CP_COMPACT) : 0), "mdb_env_copy2 \(directory)")
    }

    /// The sizes of `data.mdb` around ``compactFile(at:)``.
    public struct Compaction: Sendable, Equatable {
        public let bytesBefore: Int
        public let bytesAfter: Int
    }

    /// Rewrites the closed environment at `path` without its free pages: LMDB's compacting copy
    /// into a directory beside the file, flushed, then renamed over `data.mdb` (an atomic
    /// replace) and the directory flushed. Freed pages keep the bytes of deleted records until
    /// LMDB reuses them; after this they are gone from the file.
    ///
    /// A kill at any point leaves either the old file or the new one, both complete (a
    /// left-over copy directory is removed by the next call). The environment must be closed
    /// in every process: one open in this process, or whose lock another process holds, is
    /// refused (`EBUSY`) before anything is written. A process that opens it during the call is
    /// not detected, so call it where nothing else can open the store (an app at logout).
    @discardableResult
    public static func compactFile(at path: String) throws -> Compaction {
        let data = (path as NSString).appendingPathComponent("data.mdb")
        let canonical = URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
        guard !openPaths.withLock({ $0.contains(canonical) }) else {
            throw LMDBError(code: EBUSY, operation: "compact store \(path) (open in this process; close it first)")
        }
        if try isLockedByAnotherProcess(path) {
            throw LMDBError(code: EBUSY, operation: "compact store \(path) (another process has it open; close it there first)")
        }
        let before = fileSize(data)
        let work = (path as NSString).appendingPathComponent(compactDirectoryPrefix + "\(getpid())")
        let fm = FileManager.default
        for name in (try? fm.contentsOfDirectory(atPath: path)) ?? [] where name.hasPrefix(compactDirectoryPrefix) {
            try? fm.removeItem(atPath: (path as NSString).appendingPathComponent(name))
        }
        do {
            try fm.createDirectory(atPath: work, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        } catch {
            throw LMDBError(code: EACCES, operation: "compact store \(path) (cannot create \(work))")
        }
        defer { try? fm.removeItem(atPath: work) }
        var options = EnvironmentOptions()
        options.createDirectory = false
        options.readOnly = true
        let source = try Environment(path: path, options: options)
        do {
            try source.copy(to: work, compact: true)
        } catch {
            source.close()
            throw error
        }
        source.close()
        let copy = (work as NSString).appendingPathComponent("data.mdb")
        try flush(copy)
        guard rename(copy, data) == 0 else {
            throw LMDBError(code: errno, operation: "compact store \(path) (rename the compacted copy over data.mdb)")
        }
        try flush(path)
        return Compaction(bytesBefore: before, bytesAfter: fileSize(data))
    }

    /// The directory name prefix of a compaction in progress.
    static let compactDirectoryPrefix = ".compacting-"

    /// Whether another process holds LMDB's lock on `lock.mdb` (every process with the
    /// environment open holds a shared lock on its first byte).
    static func isLockedByAnotherProcess(_ path: String) throws -> Bool {
        let lockFile = (path as NSString).appendingPathComponent("lock.mdb")
        let fd = open(lockFile, O_RDWR)
        guard fd >= 0 else { return false }
        defer { closeFile(fd) }
        var probe = flock()
        probe.l_type = Int16(F_WRLCK)
        probe.l_whence = Int16(SEEK_SET)
        probe.l_start = 0
        probe.l_len = 1
        guard fcntl(fd, F_GETLK, &probe) == 0 else {
            throw LMDBError(code: errno, operation: "compact store \(path) (check lock.mdb)")
        }
        return probe.l_type != Int16(F_UNLCK)
    }

    private static func flush(_ path: String) throws {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw LMDBError(code: errno, operation: "open \(path) to flush it") }
        defer { closeFile(fd) }
        guard fsync(fd) == 0 else { throw LMDBError(code: errno, operation: "fsync \(path)") }
    }

    private static func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int) ?? 0
    }
}

#if canImport(Glibc)
private func closeFile(_ fd: Int32) { _ = Glibc.close(fd) }
#elseif canImport(Darwin)
private func closeFile(_ fd: Int32) { _ = Darwin.close(fd) }
#endif

/// A small pthread read-write lock.
final class ReadWriteLock: @unchecked Sendable {
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>

    init() {
        lock = .allocate(capacity: 1)
        pthread_rwlock_init(lock, nil)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    func withReadLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    func withWriteLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}

/// A pthread mutex (unlike `Mutex`, its closure may return non-Sendable values).
final class PlainLock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
