#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// One resolution at a time per store and user, in this process and across processes.
///
/// In a process, a store's resolvers (the app may make several, and every repository made
/// without one makes its own) share the store's gate. Across processes (an app and its
/// extension on one store), a holder also keeps an exclusive `flock` on a small file in the
/// store's directory, `resolve-<user>.lock`; the kernel releases it when the process ends, so a
/// killed process never blocks the others.
///
/// Two ways in:
/// - ``run(userId:_:)`` waits for the run in progress, then runs (a full resolution: a sync, a
///   pull-to-refresh);
/// - ``tryRun(userId:_:)`` runs only if no run is in progress (the resolution a save starts).
///   When one is, it asks that run, if it is in this process, to make one more pass before it
///   ends, so the save is resolved by it; a run in another process makes that pass by itself
///   (it looks for new pending changes before it ends).
final class ResolutionGate: Sendable {
    /// The store's directory, where the lock files live.
    let directory: String

    private struct UserState {
        var running = false
        /// A save asked for another pass while the run was in progress.
        var passRequested = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let users = Mutex<[String: UserState]>([:])

    init(directory: String) { self.directory = directory }

    /// Runs `body` as the only resolution of `userId`, after the one in progress (in this
    /// process or another) ends. `body` gets a function that tells whether a save asked for
    /// another pass since it was last called.
    ///
    /// When the previous holder died mid-run (the lock file still names it), waits `settle`
    /// first: requests it sent may still be in flight at the server.
    func run<T>(userId: String, settle: Duration,
                _ body: (_ takePassRequest: @Sendable () -> Bool) async throws -> T) async throws -> T {
        await acquireLocal(userId)
        defer { releaseLocal(userId) }
        let file = try await FileLock.acquire(path: lockPath(userId), wait: true)
        defer { file?.release() }
        if file?.previousHolderDied == true { try await Task.sleep(for: settle) }
        return try await body { self.takePassRequest(userId) }
    }

    /// Runs `body` as the only resolution of `userId` if none is in progress; nil when one is
    /// (then a run in this process makes one more pass before it ends).
    func tryRun<T>(userId: String, settle: Duration, _ body: () async throws -> T) async throws -> T? {
        let acquired = users.withLock { users -> Bool in
            var state = users[userId] ?? UserState()
            defer { users[userId] = state }
            if state.running {
                state.passRequested = true
                return false
            }
            state.running = true
            return true
        }
        guard acquired else { return nil }
        defer { releaseLocal(userId) }
        guard let file = try await FileLock.acquire(path: lockPath(userId), wait: false) else { return nil }
        defer { file.release() }
        if file.previousHolderDied { try await Task.sleep(for: settle) }
        return try await body()
    }

    private func takePassRequest(_ userId: String) -> Bool {
        users.withLock { users in
            let requested = users[userId]?.passRequested ?? false
            users[userId]?.passRequested = false
            return requested
        }
    }

    private func acquireLocal(_ userId: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = users.withLock { users -> Bool in
                var state = users[userId] ?? UserState()
                defer { users[userId] = state }
                if state.running {
                    state.waiters.append(continuation)
                    return false
                }
                state.running = true
                return true
            }
            if now { continuation.resume() }
        }
    }

    /// Hands the gate to the next waiter (it stays marked running), or frees it.
    private func releaseLocal(_ userId: String) {
        let next = users.withLock { users -> CheckedContinuation<Void, Never>? in
            guard var state = users[userId] else { return nil }
            defer { users[userId] = state.waiters.isEmpty && !state.running ? nil : state }
            if state.waiters.isEmpty {
                state.running = false
                state.passRequested = false
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }

    /// `resolve-<16 hex digits>.lock`, from a 64-bit FNV-1a hash of the user id (a user id is
    /// not a safe file name; two users sharing a file would only take turns).
    func lockPath(_ userId: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in userId.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let hex = String(hash, radix: 16)
        return (directory as NSString).appendingPathComponent("resolve-\(String(repeating: "0", count: 16 - hex.count) + hex).lock")
    }
}

/// An exclusive `flock` on a file, released by ``release()`` or when the process ends.
///
/// While held, the file holds the holder's process id; ``release()`` empties it. A holder that
/// finds it not empty knows the previous one died holding it (``previousHolderDied``).
struct FileLock: Sendable {
    let descriptor: Int32
    /// The file named a holder when the lock was taken: that process ended without releasing it.
    var previousHolderDied = false

    /// Takes the lock on `path` (creating the file). With `wait`, blocks (on a thread of its own,
    /// not a Swift concurrency thread) until it is free; without, nil when another process holds it.
    /// A store directory that cannot hold the file (read-only) gives nil with `wait` false and
    /// proceeds unlocked with `wait` true: nothing else can write there either.
    static func acquire(path: String, wait: Bool) async throws -> FileLock? {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            if errno == EROFS || errno == EACCES { return nil }
            throw OfflineSyncError.resolutionLock(path: path, reason: String(cString: strerror(errno)))
        }
        if flock(descriptor, LOCK_EX | LOCK_NB) == 0 { return FileLock(claiming: descriptor) }
        guard errno == EWOULDBLOCK, wait else {
            let reason = errno == EWOULDBLOCK ? nil : String(cString: strerror(errno))
            close(descriptor)
            if let reason { throw OfflineSyncError.resolutionLock(path: path, reason: reason) }
            return nil
        }
        // Another process resolves: wait for it on a thread that may block.
        let result: Int32 = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var status: Int32
                repeat { status = flock(descriptor, LOCK_EX) } while status != 0 && errno == EINTR
                continuation.resume(returning: status == 0 ? 0 : errno)
            }
        }
        guard result == 0 else {
            close(descriptor)
            throw OfflineSyncError.resolutionLock(path: path, reason: String(cString: strerror(result)))
        }
        return FileLock(claiming: descriptor)
    }

    /// The lock just taken on `descriptor`: reads whether a holder is named, names this process.
    private init(claiming descriptor: Int32) {
        self.descriptor = descriptor
        var byte: UInt8 = 0
        previousHolderDied = pread(descriptor, &byte, 1, 0) == 1
        let text = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = text.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
    }

    /// Releases the lock (emptied first: the next holder knows this one ended cleanly).
    func release() {
        _ = ftruncate(descriptor, 0)
        _ = flock(descriptor, LOCK_UN)
        close(descriptor)
    }
}
