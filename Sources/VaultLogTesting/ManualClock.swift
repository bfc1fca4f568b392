import Foundation
@_spi(Tools) import OfflineSync
import Synchronization
import VaultCrypto

/// A clock tests and simulations move by hand.
public final class ManualClock: Sendable {
    private let state: Mutex<Date>

    /// A clock standing at `start` (default 2026-01-01 00:00:00 UTC) until moved.
    public init(_ start: Date = Date(timeIntervalSince1970: 1_767_225_600)) { state = Mutex(start) }

    /// The current time.
    public var now: Date { state.withLock { $0 } }

    /// Moves the clock forward.
    public func advance(by seconds: TimeInterval) { state.withLock { $0 += seconds } }

    /// Sets the clock.
    public func set(_ date: Date) { state.withLock { $0 = date } }
}

extension VaultDependencies {
    /// Deterministic dependencies for tests and replays: a hand-moved clock, and ids, IVs and
    /// keys from a seeded generator (ids and randomness drawn from separate streams).
    public static func deterministic(seed: UInt64, clock: ManualClock) -> VaultDependencies {
        let ids = SeededRandomSource(seed: seed ^ 0x1D5)
        return VaultDependencies(now: { clock.now }, makeId: { ids.uuidString() },
                                 random: SeededRandomSource(seed: seed))
    }
}
