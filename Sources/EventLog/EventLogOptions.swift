import Crypto
import Foundation
import LMDB
import Synchronization
import Logging
import VaultCrypto

/// Options for opening an ``EventLogStore``.
public struct EventLogOptions: Sendable {
    /// How the store's file is opened (map size, durability, read-only, ...).
    public var environment = StorageOptions()
    /// Source of IVs. Inject a seeded source (VaultLogTesting's `SeededRandomSource`) only for deterministic replays.
    public var random: any RandomSource = SystemRandomSource()
    /// Diagnostics.
    public var logger = Logger(label: "vaultlog.eventlog")
    /// How many events may follow the item index before an append brings it up to date
    /// (default 32,768). Each event's entry under its user is written with the event; its entry
    /// under its user and item is written later, for many events at once, by the append that
    /// finds this many events not yet in the item index: a commit then copies each item's last
    /// index page once per merge instead of once per commit. A query of one item's events reads
    /// the index and then the headers of the events after it (at most about this many).
    /// 0 indexes every event's item with the event.
    public var itemIndexMergeInterval = 32_768

    /// Called inside the upcast of an older store with the number of index entries moved so far
    /// (a format 1–5 store's user entries, then a format 5–7 store's item entries); an error it
    /// throws aborts the upcast's transaction (tests: an upcast cut short leaves the old store).
    package var upcastInterruption: (@Sendable (_ moved: Int) throws -> Void)?

    /// The defaults described on each property.
    public init() {}
}
