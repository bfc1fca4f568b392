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

    /// The sizes of `data.mdb` around ``compactFile(at:)``.
    public struct Compaction: Sendable, Equatable {
        /// The size of `data.mdb` before the copy, in bytes.
        public let bytesBefore: Int
        /// The size of the compacted file that replaced it, in bytes.
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
