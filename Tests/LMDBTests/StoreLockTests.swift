import Foundation
import LMDB
import Synchronization
import Testing
import VaultLogTestSupport

/// The store's lock file (`vaultlog.lock`): every open holds it shared, a file rewrite
/// exclusively; a rewrite is refused while any open exists and an open waits for a rewrite.
/// Another open is simulated in this process with a `flock` of its own on the file (a `flock`
/// belongs to one open of the file, so this process counts as another holder).
@Suite struct StoreLockTests {
    /// Holds the store's lock shared through a descriptor of its own, as another process's open does.
    final class ForeignHolder {
        let fd: Int32
        init(_ directory: String) throws {
            fd = open(directory + "/" + StoreLock.fileName, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            try #require(fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) == 0)
        }
        func release() { close(fd) }
    }

    /// An environment opened on another thread.
    final class Opened: Sendable {
        private let value = Mutex<Environment?>(nil)
        func withLock<T>(_ body: (inout Environment?) -> T) -> T { value.withLock { body(&$0) } }
    }

    static func isInUse(_ error: any Error, _ situation: StoreInUseError.Situation) -> Bool {
        (error as? StoreInUseError)?.situation == situation
    }

    @Test func anOpenEnvironment_holdsTheLockShared_soARewriteIsRefusedUntilItCloses() throws {
        let dir = TemporaryDirectory()
        let env = try Environment(path: dir.path)
        #expect(FileManager.default.fileExists(atPath: dir.path + "/" + StoreLock.fileName))
        #expect { try StoreLock.exclusive(directory: dir.path) } throws: { Self.isInUse($0, .rewriteRefused) }
        env.close()
        let lock = try StoreLock.exclusive(directory: dir.path)
        #expect(lock.mode == .exclusive)
        lock.release()
        #expect(lock.mode == nil)
    }

    @Test func anOpen_waitsForARewrite_andGivesUpAfterItsLimit_namingTheStore() throws {
        let dir = TemporaryDirectory()
        try Environment(path: dir.path).close()
        let lock = try StoreLock.exclusive(directory: dir.path)
        var options = EnvironmentOptions()
        options.rewriteWaitLimit = .milliseconds(200)
        let started = Date()
        #expect { try Environment(path: dir.path, options: options) } throws: { error in
            Self.isInUse(error, .rewriteInProgress(waited: .milliseconds(200)))
                && "\(error)".contains("the store at \(dir.path) is being rewritten") && "\(error)".contains("try again")
        }
        #expect(Date().timeIntervalSince(started) >= 0.2)
        // Released while an open waits: the open goes on.
        let opened = Opened()
        let path = dir.path
        let thread = Thread {
            var options = EnvironmentOptions()
            options.rewriteWaitLimit = .seconds(10)
            let env = try? Environment(path: path, options: options)
            opened.withLock { $0 = env }
        }
        thread.start()
        usleep(300_000)
        #expect(opened.withLock { $0 } == nil, "opened while the rewrite held the lock")
        lock.release()
        let deadline = Date().addingTimeInterval(10)
        while opened.withLock({ $0 }) == nil, Date() < deadline { usleep(5_000) }
        let env = try #require(opened.withLock { $0 })
        env.close()
    }

    @Test func lockExclusively_isRefusedBesideAnotherOpen_closingTheEnvironment_andHeldUntilReleased() throws {
        let dir = TemporaryDirectory()
        let env = try Environment(path: dir.path)
        let db = try env.openDatabase("things")
        try env.write { try $0.put(db, key: [1], value: [1]) }
        let other = try ForeignHolder(dir.path)
        #expect { try env.lockExclusively() } throws: { error in
            Self.isInUse(error, .rewriteRefused) && "\(error)".contains("another process has the store at \(dir.path) open")
                && "\(error)".contains("nothing was changed") && (error as? LocalizedError)?.errorDescription == "\(error)"
        }
        // Refused: closed, so the directory can be opened again in this process.
        other.release()
        let again = try Environment(path: dir.path)
        let lock = try again.lockExclusively()
        #expect(lock.mode == .exclusive)
        // Held: no other open can begin, also after this environment closed.
        let things = try again.openDatabase("things")
        try again.write { try $0.put(things, key: [2], value: [2]) }
        again.close()
        var options = EnvironmentOptions()
        options.rewriteWaitLimit = .milliseconds(50)
        #expect { try Environment(path: dir.path, options: options) } throws: { Self.isInUse($0, .rewriteInProgress(waited: .milliseconds(50))) }
        #expect { try StoreLock.exclusive(directory: dir.path) } throws: { Self.isInUse($0, .rewriteRefused) }
        let result = try Environment.compactFile(at: dir.path, holding: lock)
        #expect(result.bytesAfter > 0 && result.seconds >= 0)
        #expect(lock.mode == .exclusive, "compactFile leaves a lock it was given to its owner")
        lock.release()
        let reopened = try Environment(path: dir.path)
        let kept = try reopened.openDatabase("things")
        #expect(try reopened.read { txn in [try txn.get(kept, key: [1]), try txn.get(kept, key: [2])] } == [[1], [2]])
        reopened.close()
    }

    @Test func compactFile_refusesBesideAnotherOpen_andWithAnotherStoresLock() throws {
        let dir = TemporaryDirectory(), elsewhere = TemporaryDirectory()
        try Environment(path: dir.path).close()
        try Environment(path: elsewhere.path).close()
        let other = try ForeignHolder(dir.path)
        #expect { try Environment.compactFile(at: dir.path) } throws: { error in
            Self.isInUse(error, .rewriteRefused) && "\(error)".contains("data.mdb was not rewritten")
        }
        other.release()
        let wrong = try StoreLock.exclusive(directory: elsewhere.path)
        #expect { try Environment.compactFile(at: dir.path, holding: wrong) } throws: { "\($0)".contains("not this store's exclusive lock") }
        wrong.release()
        #expect(try Environment.compactFile(at: dir.path).bytesAfter > 0)
    }

    /// The lock's descriptor is close-on-exec: a child process started while the store is
    /// open does not keep the store locked after this process closed it.
    @Test func aChildProcess_doesNotInheritTheLock() throws {
        let dir = TemporaryDirectory()
        let env = try Environment(path: dir.path)
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/sleep")
        child.arguments = ["2"]
        try child.run()
        defer { child.terminate(); child.waitUntilExit() }
        env.close()
        let lock = try StoreLock.exclusive(directory: dir.path)
        lock.release()
    }

    /// Several opens in one process, one after another, and of several stores at once.
    @Test func opensInOneProcess_oneAfterAnother_andOfSeveralStores() throws {
        let first = TemporaryDirectory(), second = TemporaryDirectory()
        for _ in 0..<3 {
            let a = try Environment(path: first.path), b = try Environment(path: second.path)
            #expect { try Environment(path: first.path) } throws: { "\($0)".contains("already open in this process") }
            a.close()
            b.close()
        }
        try StoreLock.exclusive(directory: first.path).release()
        try StoreLock.exclusive(directory: second.path).release()
    }
}
