import CLMDB
import Foundation
import Synchronization

extension Environment {
    // MARK: Copies and compaction

    /// Flushes to disk; useful after writes in ``Durability/noSync`` mode.
    public func sync() throws {
        try check(mdb_env_sync(env, 1), "mdb_env_sync")
    }

    /// Copies the environment to `directory` (a consistent snapshot, `mdb_env_copy2`).
    public func copy(to directory: String, compact: Bool = false) throws {
        try check(mdb_env_copy2(env, directory, compact ? UInt32(MDB_CP_COMPACT) : 0), "mdb_env_copy2 \(directory)")
    }

    /// The sizes of `data.mdb` around ``compactFile(at:holding:)``, and how long it took.
    public struct Compaction: Sendable, Equatable {
        /// The size of `data.mdb` before the copy, in bytes.
        public let bytesBefore: Int
        /// The size of the compacted file that replaced it, in bytes.
        public let bytesAfter: Int
        /// How long the copy, its flush and the rename took, in seconds.
        public var seconds: Double = 0
    }

    /// Turns this environment's shared hold on the store's ``StoreLock`` into the exclusive
    /// one, without waiting, for a file rewrite of the store (``compactFile(at:holding:)``)
    /// that must change nothing unless it can finish: while it is held, no other open of the
    /// store exists or can begin (an open in another process waits for it, see
    /// ``EnvironmentOptions/rewriteWaitLimit``).
    ///
    /// On success the caller owns the returned lock: ``close()`` no longer releases it, so it
    /// can be handed to ``compactFile(at:holding:)`` after closing; release it when done (it is
    /// also released when the last reference to it goes away).
    ///
    /// Refused with ``StoreInUseError`` (naming the other holders where the system tells)
    /// while another open of the store exists, in another process or (a second open of the
    /// directory) in this one. A refusal **closes this environment**: `flock` gives the shared
    /// lock up before it tries the exclusive one, so the environment is closed at once, with
    /// the writer lock held, so no write of this process lands while it holds no lock.
    /// `outcome` ends the refusal's message (e.g. "nothing was changed").
    public func lockExclusively(outcome: String = "nothing was changed") throws -> StoreLock {
        try writer.withLock {
            guard !closed.load(ordering: .acquiring), let lock = storeLock.withLock({ $0 }) else {
                throw LMDBError(code: EINVAL, operation: "take store \(path) exclusively (the environment is closed, or was opened without its lock file; open it writable)")
            }
            guard lock.convertToExclusive() else {
                let holders = StoreLock.otherHolders(ofLockIn: path)
                closeHoldingWriter()
                throw StoreInUseError(directory: path, holders: holders, situation: .rewriteRefused, outcome: outcome)
            }
            storeLock.withLock { $0 = nil }
            return lock
        }
    }

    /// ``compactFile(at:holding:)`` taking the store's lock itself.
    @discardableResult
    public static func compactFile(at path: String) throws -> Compaction {
        try compactFile(at: path, holding: nil)
    }

    /// Rewrites the closed environment at `path` without its free pages: LMDB's compacting copy
    /// into a directory beside the file, flushed, then renamed over `data.mdb` (an atomic
    /// replace) and the directory flushed. Freed pages keep the bytes of deleted records until
    /// LMDB reuses them; after this they are gone from the file.
    ///
    /// Exclusive across processes: it runs holding the store's ``StoreLock`` exclusively, from
    /// before it writes anything until the new file is in place. `lock` is that lock when the
    /// caller took it already (``lockExclusively(outcome:)``); otherwise it is taken here
    /// without waiting. So it is refused before anything is written (``StoreInUseError``, or
    /// `EBUSY` for an environment open in this process) while any other open of the store
    /// exists, and an open that begins meanwhile, in any process, waits and then maps the new
    /// file: no commit can land in the old file after the copy. A process that maps the store
    /// without the lock file (an older build) still holds `lock.mdb`, and that refuses too.
    ///
    /// A kill at any point leaves either the old file or the new one, both complete (the
    /// kernel drops the kill's lock; a left-over copy directory is removed by the next call).
    @discardableResult
    public static func compactFile(at path: String, holding lock: StoreLock?) throws -> Compaction {
        let started = ContinuousClock.now
        let data = (path as NSString).appendingPathComponent("data.mdb")
        let canonical = URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
        guard !openPaths.withLock({ $0.contains(canonical) }) else {
            throw LMDBError(code: EBUSY, operation: "compact store \(path) (open in this process; close it first)")
        }
        if let lock {
            guard lock.mode == .exclusive,
                  URL(fileURLWithPath: lock.directory).standardizedFileURL.resolvingSymlinksInPath().path == canonical else {
                throw LMDBError(code: EINVAL, operation: "compact store \(path) (the lock given is not this store's exclusive lock)")
            }
        }
        let exclusive = try lock ?? StoreLock.exclusive(directory: path, outcome: "data.mdb was not rewritten")
        defer { if lock == nil { exclusive.release() } }
        // Safe only now: no environment of this store is open in this process (closing the
        // probe's descriptor would drop LMDB's own locks on lock.mdb).
        if try isLockedByAnotherProcess(path) {
            throw StoreInUseError(directory: path, holders: StoreLock.otherHolders(ofLockIn: path), situation: .openWithoutLockFile,
                                  outcome: "data.mdb was not rewritten")
        }
        let before = fileSize(data)
        let work = (path as NSString).appendingPathComponent(compactDirectoryPrefix + "\(getpid())")
        let fm = FileManager.default
        // Nobody else rewrites now (the exclusive lock): any copy directory is a killed run's.
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
        let source = try Environment(path: path, options: options, holding: exclusive)
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
        return Compaction(bytesBefore: before, bytesAfter: fileSize(data), seconds: (ContinuousClock.now - started).seconds)
    }

    /// The directory name prefix of a compaction in progress.
    static let compactDirectoryPrefix = ".compacting-"

    /// Whether another process holds LMDB's lock on `lock.mdb` (every process with the
    /// environment open holds a shared lock on its first byte, except one opened with
    /// ``EnvironmentOptions/noLock``). Call it only while this process has no environment of
    /// `path` open: it opens and closes `lock.mdb`, and closing a descriptor of a file drops
    /// every `fcntl` lock the process holds on it, LMDB's included.
    public static func isLockedByAnotherProcess(_ path: String) throws -> Bool {
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

    static func flush(_ path: String) throws {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw LMDBError(code: errno, operation: "open \(path) to flush it") }
        defer { closeFile(fd) }
        guard fsync(fd) == 0 else { throw LMDBError(code: errno, operation: "fsync \(path)") }
    }

    static func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int) ?? 0
    }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
