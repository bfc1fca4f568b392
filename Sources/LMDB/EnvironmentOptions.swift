import CLMDB
import Foundation
import Synchronization

/// How much a commit promises about surviving a power loss or OS crash. A process crash never
/// loses a committed transaction in any mode (dirty pages stay in the kernel's page cache).
public enum Durability: Sendable, Equatable {
    /// Every commit is durable when it returns: nothing committed is ever lost. Default. The
    /// commit's changes are appended to the store's journal (`vaultlog.journal`) and flushed
    /// there, once; LMDB then commits without a flush, and a checkpoint flushes `data.mdb`
    /// every ``EnvironmentOptions/journalCheckpointInterval`` commits. After an OS crash or
    /// power loss, the next writable open replays the journal (a read-only open is refused
    /// until then). See ``Journal``'s documentation in the sources and `Docs/Architecture.md`.
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

    /// How long a group-commit leader waits at most for writers that announced a write
    /// (``Environment/announcingWrite(_:)``) to queue it: a fraction of one durable commit.
    /// Zero turns the wait off.
    public var groupGatherLimit: Duration = .microseconds(250)

    /// With ``Durability/full``: how many commits' records the journal takes before a
    /// checkpoint flushes `data.mdb` (sooner when the journal would pass 4 MiB). Between two
    /// checkpoints every commit writes fresh pages (about 10 per save, kept for a recovery), so
    /// the interval trades the checkpoint's stall (one flush of all of them: about 30 ms per
    /// 1,024 saves on a cloud disk) and the file's size (up to about 40 MiB more than its data
    /// at 1,024) against how often the stall comes. The default makes the stalls rare enough
    /// that, with two processes saving (each stall holds up a few saves of both), they mostly
    /// stay out of the 99th percentile; an app that keeps its file small lowers it. A value
    /// below 1 counts as 1 (a checkpoint before every record).
    /// Processes on one store may differ: each applies its own to the records it finds when it
    /// commits.
    public var journalCheckpointInterval: Int = 1024

    /// How long an open waits at most while another process rewrites the store's file
    /// (``Environment/compactFile(at:holding:)``, which holds the store's ``StoreLock``
    /// exclusively) before it gives up with ``StoreInUseError``. Default 30 s: a rewrite copies
    /// the live data once, so an open normally waits far less.
    public var rewriteWaitLimit: Duration = .seconds(30)

    /// The defaults described on each property.
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
    /// Reader slots in use.
    public let readersUsed: Int
    /// Reader slots available (`mdb_env_set_maxreaders`).
    public let maxReaders: Int
}
