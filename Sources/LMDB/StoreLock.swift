import Foundation
import Synchronization

/// The lock that keeps a file rewrite (``Environment/compactFile(at:holding:)``) away from every
/// open of the same store, across processes: `vaultlog.lock` in the store's directory, locked
/// with `flock`.
///
/// Every ``Environment`` holds it **shared** from before it maps `data.mdb` until after it is
/// closed; a rewrite holds it **exclusively**, taken without waiting (refused while any other
/// open exists, in this process or another), from before it changes anything until the new
/// file is in place. An open that finds a rewrite in progress waits for it
/// (``EnvironmentOptions/rewriteWaitLimit``) and then maps the new file. The kernel drops a
/// `flock` when its process dies, so a killed process never blocks the store. `flock` locks
/// belong to one open of the file, not to the process: two opens in one process exclude each
/// other as two processes do, and closing one never drops another's lock (unlike `fcntl`
/// locks, which LMDB uses for `lock.mdb`). The descriptor is close-on-exec, so a child process
/// never inherits the lock. The file is never removed (removing a lock file races with a
/// process about to lock it).
public final class StoreLock: Sendable {
    /// How the lock is held.
    public enum Mode: Sendable, Equatable {
        /// Any number of opens at once.
        case shared
        /// One holder and nobody else (the file rewrite).
        case exclusive
    }

    /// The lock file's name inside a store directory.
    public static let fileName = "vaultlog.lock"

    /// The store directory.
    public let directory: String
    private let fd: Int32
    private let state: Mutex<Mode?>

    private init(directory: String, fd: Int32, mode: Mode) {
        self.directory = directory
        self.fd = fd
        self.state = Mutex(mode)
    }

    deinit { release() }

    /// How the lock is held now; nil once released.
    public var mode: Mode? { state.withLock { $0 } }

    /// Releases the lock and closes its descriptor (idempotent).
    public func release() {
        let held = state.withLock { mode -> Bool in
            defer { mode = nil }
            return mode != nil
        }
        guard held else { return }
        _ = flock(fd, LOCK_UN)
        closeFile(fd)
    }

    /// Takes the lock of the store at `directory` exclusively, without waiting: refused with
    /// ``StoreInUseError`` while any open of the store holds it shared (in this process or
    /// another) or another rewrite holds it. `outcome` ends the refusal's message (what the
    /// refusal left as it was).
    public static func exclusive(directory: String, outcome: String = "nothing was changed") throws -> StoreLock {
        let path = (directory as NSString).appendingPathComponent(fileName)
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw LMDBError(code: errno, operation: "rewrite store \(directory) (cannot open its lock file \(path))")
        }
        guard tryLock(fd, LOCK_EX) else {
            closeFile(fd)
            throw StoreInUseError(directory: directory, holders: otherHolders(ofLockIn: directory), situation: .rewriteRefused, outcome: outcome)
        }
        return StoreLock(directory: directory, fd: fd, mode: .exclusive)
    }

    /// Takes the lock of the store at `directory` shared, waiting up to `limit` while a rewrite
    /// holds it. Nil when the lock file cannot be opened and `required` is false (a read-only
    /// open in a directory this user cannot write, before any writer made the file).
    static func shared(directory: String, required: Bool, limit: Duration) throws -> StoreLock? {
        let path = (directory as NSString).appendingPathComponent(fileName)
        var fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        if fd < 0 { fd = open(path, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else {
            guard required else { return nil }
            throw LMDBError(code: errno, operation: "open store \(directory) (cannot open or create its lock file \(path))")
        }
        let started = ContinuousClock.now
        while !tryLock(fd, LOCK_SH) {
            guard ContinuousClock.now - started < limit else {
                closeFile(fd)
                throw StoreInUseError(directory: directory, holders: otherHolders(ofLockIn: directory),
                                      situation: .rewriteInProgress(waited: limit), outcome: "nothing was opened")
            }
            usleep(5_000)
        }
        return StoreLock(directory: directory, fd: fd, mode: .shared)
    }

    /// Turns this shared lock into the exclusive one without waiting; false (and the lock no
    /// longer held at all: `flock` converts by releasing first) when another holder exists.
    func convertToExclusive() -> Bool {
        state.withLock { mode in
            guard mode == .shared else { return mode == .exclusive }
            if Self.tryLock(fd, LOCK_EX) {
                mode = .exclusive
                return true
            }
            return false
        }
    }

    /// `flock(fd, operation | LOCK_NB)`, retried when a signal interrupts it; false when
    /// another holder prevents it.
    private static func tryLock(_ fd: Int32, _ operation: Int32) -> Bool {
        while true {
            if flock(fd, operation | LOCK_NB) == 0 { return true }
            if errno != EINTR { return false }
        }
    }

    /// The other processes that hold the lock of the store at `directory`, as `pid N (name)`,
    /// when the system says (Linux: `/proc/locks`); empty when it does not.
    static func otherHolders(ofLockIn directory: String) -> [String] {
        #if os(Linux)
        var file = stat()
        let path = (directory as NSString).appendingPathComponent(fileName)
        guard stat(path, &file) == 0, let table = try? String(contentsOfFile: "/proc/locks", encoding: .utf8) else { return [] }
        // "1: FLOCK  ADVISORY  READ  1234 fe:00:16220312 0 EOF": the device, then the inode.
        let inode = ":\(file.st_ino)"
        var pids: [Int32] = []
        for line in table.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 6, fields[1] == "FLOCK", fields[5].hasSuffix(inode),
                  let pid = Int32(fields[4]), pid != getpid(), !pids.contains(pid) else { continue }
            pids.append(pid)
        }
        return pids.sorted().map { pid in
            let name = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
            return name.map { "pid \(pid) (\($0))" } ?? "pid \(pid)"
        }
        #else
        return []
        #endif
    }
}

/// Another open of the store stands in the way: a file rewrite refused while the store is open
/// elsewhere, or an open that waited too long for a rewrite in progress.
public struct StoreInUseError: Error, Sendable, Equatable, CustomStringConvertible, LocalizedError {
    /// What was refused.
    public enum Situation: Sendable, Equatable {
        /// A file rewrite, while another open (an app, its extension, another command) has the store.
        case rewriteRefused
        /// An open, after waiting this long for another process's file rewrite to finish.
        case rewriteInProgress(waited: Duration)
        /// A file rewrite, while a process that does not take the store's lock file (an older
        /// build, a raw LMDB tool) has `lock.mdb` locked.
        case openWithoutLockFile
    }

    /// The store directory.
    public let directory: String
    /// The other holders as far as the system tells (`pid 1234 (vaultlog)`); may be empty.
    public let holders: [String]
    /// What was refused.
    public let situation: Situation
    /// What the refusal left as it was, e.g. "nothing was changed".
    public let outcome: String

    /// The error for `situation` at `directory`.
    public init(directory: String, holders: [String], situation: Situation, outcome: String) {
        self.directory = directory
        self.holders = holders
        self.situation = situation
        self.outcome = outcome
    }

    /// The same refusal with another ``outcome``.
    public func with(outcome: String) -> StoreInUseError {
        StoreInUseError(directory: directory, holders: holders, situation: situation, outcome: outcome)
    }

    /// What happened, who holds the store, what to do, and what was left as it was.
    public var description: String {
        let who = holders.isEmpty ? "" : " (\(holders.joined(separator: ", ")))"
        switch situation {
        case .rewriteRefused:
            return "another process has the store at \(directory) open\(who), so its file cannot be rewritten now; "
                + "close the app and its extension (or that process) and run again; \(outcome)"
        case .rewriteInProgress(let waited):
            return "the store at \(directory) is being rewritten (compacted) by another process\(who) and was still "
                + "held after \(waited.components.seconds) s; try again when it has finished; \(outcome)"
        case .openWithoutLockFile:
            return "another process has the store at \(directory) open without its lock file (an older VaultLog or "
                + "an LMDB tool)\(who), so its file cannot be rewritten now; close it and run again; \(outcome)"
        }
    }

    /// The same text as ``description``.
    public var errorDescription: String? { description }
}
