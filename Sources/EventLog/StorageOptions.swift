import LMDB

/// How much a commit promises about surviving a power loss or an OS crash. A process crash
/// never loses a committed transaction in any mode (the written pages stay in the kernel's
/// page cache).
public enum CommitDurability: Sendable, Equatable {
    /// Every commit is durable when it returns: nothing committed is ever lost. Default. Made
    /// with one flush, of the commit's record in the store's journal (`vaultlog.journal`,
    /// beside the store's file; keep the two together); after an OS crash or power loss the
    /// next writable open replays it, and a read-only open is refused until then.
    case full
    /// Data pages are flushed at commit, the meta page lazily: an OS crash or power loss may
    /// undo the last committed transaction; the store stays consistent.
    case noMetaSync
    /// Nothing is flushed at commit: an OS crash or power loss may lose recent transactions
    /// and, on file systems that reorder writes, damage the store. For bulk loads a caller
    /// can redo, and benchmarks.
    case noSync
}

/// How an ``EventLogStore`` opens its file. EventLog's own type: a caller of the log never
/// handles the storage engine's types (the package maps these onto LMDB's options).
///
/// ```swift
/// var options = EventLogOptions()
/// options.environment.mapSize = 1 << 30      // grows by itself when full; this is the start
/// options.environment.readOnly = true        // an inspecting tool
/// let store = try EventLogStore(path: dir, options: options)
/// ```
public struct StorageOptions: Sendable {
    /// The map's initial size in bytes; it doubles by itself when full.
    public var mapSize: Int = EnvironmentOptions().mapSize
    /// Read transactions that may be open at once, across every process on the store. The
    /// lock file is sparse, so a generous number costs nothing.
    public var maxReaders: Int = EnvironmentOptions().maxReaders
    /// What a commit promises; see ``CommitDurability``.
    public var durability: CommitDurability = .full
    /// Create the directory when it is missing. Tools that only inspect a store set this to
    /// false, so that a mistyped path is an error rather than a new empty store.
    public var createDirectory: Bool = EnvironmentOptions().createDirectory
    /// Open read-only: no write can begin.
    public var readOnly: Bool = EnvironmentOptions().readOnly
    /// Open without the lock file, to read a store in a directory this user cannot write
    /// (reading otherwise needs write access to `lock.mdb`). Only with ``readOnly``; a writer
    /// in another process at the same time may make reads inconsistent.
    public var noLock: Bool = EnvironmentOptions().noLock
    /// How long a commit of blocking writers waits at most for writers that announced a write
    /// (``EventLogStore/announcingWrite(_:)``), so they share it: a fraction of one durable
    /// commit. Zero turns the wait off.
    public var groupGatherLimit: Duration = EnvironmentOptions().groupGatherLimit
    /// With ``CommitDurability/full``: how many commits the journal takes before a checkpoint
    /// flushes the store's file. Between checkpoints each save writes fresh pages (about 10,
    /// kept for a crash recovery), so a larger interval makes the checkpoint's stall rarer but
    /// longer (about 30 ms per 1,024 saves on a cloud disk) and the file up to about 40 MiB
    /// larger than its data at 1,024; an app that keeps its file small lowers it. A value
    /// below 1 counts as 1.
    /// An app and its extension may set different ones: each applies its own when it commits.
    public var journalCheckpointInterval: Int = EnvironmentOptions().journalCheckpointInterval
    /// How long an open waits at most while another process rewrites the store's file
    /// (``EventLogStore/compactFile(at:holding:)``) before it gives up naming the store.
    public var rewriteWaitLimit: Duration = EnvironmentOptions().rewriteWaitLimit

    /// The defaults described on each property.
    public init() {}

    /// The storage engine's options these stand for.
    package var environmentOptions: EnvironmentOptions {
        var options = EnvironmentOptions()
        options.mapSize = mapSize
        options.maxReaders = maxReaders
        options.durability = switch durability {
        case .full: .full
        case .noMetaSync: .noMetaSync
        case .noSync: .noSync
        }
        options.createDirectory = createDirectory
        options.readOnly = readOnly
        options.noLock = noLock
        options.groupGatherLimit = groupGatherLimit
        options.rewriteWaitLimit = rewriteWaitLimit
        options.journalCheckpointInterval = journalCheckpointInterval
        return options
    }
}

/// The sizes of a store's file, from ``EventLogStore/sizes()``.
public struct StoreSizes: Sendable, Equatable {
    /// The map's current size in bytes (the most the file may grow to before the map grows).
    public let mapSize: Int
    /// Bytes of the map in use: the last page written times the page size.
    public let usedBytes: Int
    /// The page size.
    public let pageSize: Int
    /// The id of the last commit, by any process.
    public let lastCommitID: UInt64
}

extension EventLogStore {
    /// The sizes of the store's file as of the last commit (any process's).
    public func sizes() throws -> StoreSizes {
        let info = try environment.info()
        return StoreSizes(mapSize: info.mapSize, usedBytes: info.usedBytes, pageSize: info.pageSize,
                          lastCommitID: UInt64(info.lastTransactionID))
    }
}
