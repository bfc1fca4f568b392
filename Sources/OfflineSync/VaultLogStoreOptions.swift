import EventLog
import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultModel

/// Options for ``VaultLogStore``.
public struct VaultLogStoreOptions: Sendable {
    /// Storage options (map size, durability, read-only).
    public var eventLog = EventLogOptions()
    /// Time, ids, randomness.
    public var dependencies = VaultDependencies()
    /// Save a sealed projection checkpoint after folding this many new events.
    public var checkpointInterval = 1000
    /// Save a pending-set checkpoint (headers only) after folding this many headers, so the
    /// pending count of a long log is read without scanning it (0 = never).
    public var pendingCheckpointInterval = 10_000
    /// Diagnostics (never a secret or an item's content).
    public var logger = Logger(label: "vaultlog.offlinesync")

    /// The defaults described on each property.
    public init() {}
}
