import EventLog
import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultModel

/// Where the domain gets the current time and new ids.
public struct VaultDependencies: Sendable {
    /// The current time.
    public var now: @Sendable () -> Date
    /// A new unique id (temporary cipher ids, backup markers).
    public var makeId: @Sendable () -> String
    /// IVs and keys.
    public var random: any RandomSource

    /// The system's clock, random UUIDs and the system's secure random generator by default.
    public init(now: @escaping @Sendable () -> Date = { Date() },
                makeId: @escaping @Sendable () -> String = { UUID().uuidString.lowercased() },
                random: any RandomSource = SystemRandomSource()) {
        self.now = now
        self.makeId = makeId
        self.random = random
    }
}
