#if canImport(System)
import System
#endif
import EventLog
import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultModel

/// The opened store of one device: the event log, the local vault cache (`ciphers`), and the
/// unlocked sessions. The entry point the repository, resolver and sync build on (an app
/// usually opens it through `VaultLogKit`'s `OfflineVault`, which builds them all).
///
/// ```swift
/// let store = try VaultLogStore(path: dir)                              // one per device and process
/// let uid = try await store.unlock(email: email, masterPassword: pw)    // the KDF runs off this thread
/// let resolver = OfflineSyncResolver(store: store, server: client)     // one per store, shared
/// let repository = VaultRepository(store: store, userId: uid, server: client, resolver: resolver)
/// ```
public final class VaultLogStore: Sendable {
    /// The underlying log (package plumbing: the CLI, the replay tools and tests read it
    /// directly; an app goes through the store's methods).
    package let log: EventLogStore
    /// Injected time, ids and randomness.
    public let dependencies: VaultDependencies
    let ciphers: SideTable
    let accounts: SideTable
    /// Per user, the pending set from headers as of a sequence (see ``PendingCheckpoint``);
    /// nil for a read-only store written before it existed.
    let pendingCheckpoints: SideTable?
    /// Per user, the folders deleted on this device (``markFoldersDeleted(userId:_:in:)``); nil
    /// for a read-only store written before it existed.
    let deletedFolders: SideTable?
    /// Per user, the server's folders as the device last learnt them (``localFolders(userId:)``);
    /// nil for a read-only store written before it existed.
    let folderCache: SideTable?
    let checkpointInterval: Int
    let pendingCheckpointInterval: Int
    let logger: Logger
    let sessions = Mutex<[String: UnlockedKeys]>([:])
    /// Each unlocked user's projection and the sequence of its newest checkpoint.
    let projections = Mutex<[String: (projection: Projection, checkpointedAt: UInt64)]>([:])
    /// Per user, the sequence of the newest pending-set checkpoint this store knows of (read
    /// once, then kept as the writer saves them).
    let pendingCheckpointedAt = Mutex<[String: UInt64]>([:])
    /// Users whose account record this process has seen carry a log mark (one read per user
    /// and process; marks are only removed by a logout, which clears its user here).
    let markedUsers = Mutex<Set<String>>([])
    /// The pending-count streams and their watcher (`VaultLogStore+Observers.swift`).
    let observers = PendingCountObservers()
    /// One resolution at a time per user, shared by every resolver of this store and, through
    /// a lock file in the store's directory, with other processes.
    let resolutionGate: ResolutionGate

    /// Passes through the resolution gate of `userId` with nothing to do (its in-process wait
    /// and its lock file, as a resolution's run takes and gives back): what the gate costs a run,
    /// for the benchmark.
    @_spi(Tools) public func passThroughResolutionGate(userId: String) async throws {
        try await resolutionGate.run(userId: userId, settle: ResolverOptions().settleAfterInterruptedRun) { _ in }
    }

    /// Opens (creating if needed) the store at `path`.
    public init(path: String, options: VaultLogStoreOptions = VaultLogStoreOptions()) throws {
        var logOptions = options.eventLog
        logOptions.random = options.dependencies.random
        log = try EventLogStore(path: path, options: logOptions)
        ciphers = try log.openSideTable("ciphers")
        accounts = try log.openSideTable("accounts")
        let readOnly = options.eventLog.environment.readOnly
        pendingCheckpoints = readOnly ? try? log.openSideTable("pending") : try log.openSideTable("pending")
        deletedFolders = readOnly ? try? log.openSideTable("deletedFolders") : try log.openSideTable("deletedFolders")
        folderCache = readOnly ? try? log.openSideTable("folders") : try log.openSideTable("folders")
        dependencies = options.dependencies
        checkpointInterval = options.checkpointInterval
        pendingCheckpointInterval = options.pendingCheckpointInterval
        logger = options.logger
        resolutionGate = ResolutionGate(directory: path)
    }

    /// Opens (creating if needed) the store in the directory at `url`, for example one under
    /// the app's Application Support directory. `url` must be a file URL.
    public convenience init(directory url: URL, options: VaultLogStoreOptions = VaultLogStoreOptions()) throws {
        guard url.isFileURL else {
            throw OfflineSyncError.notAFileLocation(url.absoluteString)
        }
        try self.init(path: url.path, options: options)
    }

    #if canImport(System)
    /// Opens (creating if needed) the store in the directory at `path` (Apple platforms, where
    /// the System module provides `FilePath`).
    public convenience init(directory path: FilePath, options: VaultLogStoreOptions = VaultLogStoreOptions()) throws {
        try self.init(path: path.string, options: options)
    }
    #endif

    /// Closes the store (also done when it is released); ends its pending-count streams.
    public func close() {
        observers.close()
        log.close()
    }
}
