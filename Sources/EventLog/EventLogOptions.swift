import Crypto
import Foundation
import LMDB
import Synchronization
import Logging
import VaultCrypto

/// Options for opening an ``EventLogStore``.
public struct EventLogOptions: Sendable {
    /// LMDB environment options (map size, durability, read-only, ...).
    public var environment = EnvironmentOptions()
    /// Source of IVs. Inject a seeded source (VaultLogTesting's `SeededRandomSource`) only for deterministic replays.
    public var random: any RandomSource = SystemRandomSource()
    /// Diagnostics.
    public var logger = Logger(label: "vaultlog.eventlog")

    /// The defaults described on each property.
    public init() {}
}
