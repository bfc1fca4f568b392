import Foundation
import Logging
import VaultCrypto
import VaultModel

/// Options of ``OfflineSyncResolver``. Every limit is named here with its reason.
public struct ResolverOptions: Sendable {
    /// Items resolved at the same time (different ciphers; one item's steps stay in order).
    /// Resolution is bound by server round trips (2 per item), so 16 in flight turns 1,000
    /// items at 20 ms latency from ~40 s into a few seconds without loading a server more than a
    /// browser tab does. 1 reproduces the serial algorithm and makes the log
    /// byte-for-byte reproducible.
    public var concurrency = 16
    /// Failed attempts after which an item becomes a dead letter: still pending, reported,
    /// excluded from automatic retries until `OfflineSyncResolver.retryDeadLetters(userId:cipherIds:)`.
    public var maxAttempts = 6
    /// Backoff after the n-th failure: `base * 2^(n-1)`, capped at `backoffMax`, plus up to
    /// `jitter` of itself (drawn from the injected randomness, so replays are deterministic).
    public var backoffBase: TimeInterval = 30
    /// The longest backoff (6 hours: an item is still tried a few times a day).
    public var backoffMax: TimeInterval = 6 * 3600
    /// The random share added to each backoff, so devices do not retry in lockstep.
    public var jitter = 0.25
    /// Re-reads after a 400 "out of date" before the run gives up on the item (it stays
    /// pending with an immediate retry; a stale answer never counts towards dead-lettering).
    public var staleRetryLimit = 3
    /// Offline password changes that make a backup of the server copy even without a
    /// conflict (the 5-entry history would otherwise lose intermediate passwords).
    public var softConflictPasswordChangeThreshold = 4
    /// Merge an offline edit with another device's change of the same item when the two
    /// changed different parts (name, notes, folder, favourite and reprompt, the credential,
    /// URIs, each custom field...): the server gets one item holding both, and no backup is made.
    /// When both changed one part the decision matrix applies. Off: the matrix for every
    /// change another device made (the newer side wins, the other is kept as a backup item).
    public var mergesDisjointChanges = true
    /// How long a run waits before it starts when the previous run of the user ended without
    /// releasing the store's resolution lock cleanly (its process died mid-run: an extension
    /// the system stopped, an app killed during a sync). Requests that process sent may still be
    /// in flight at the server; a create or backup it posted must be on the server before this
    /// run looks for it by its marker, or it would be posted twice.
    public var settleAfterInterruptedRun: Duration = .seconds(2)
    /// The defaults described on each property.
    public init() {}
}

/// An error that stops a resolution run at once, recording nothing: a ``CipherServer`` throws
/// one to end the run as if the process had stopped there (crash tests wrap their server in
/// VaultLogTesting's `EffectObservingServer` and throw one right after a server effect). Any other
/// error is caught per item, recorded as `resolutionFailed`, and the run continues.
public protocol ResolutionInterruption: Error {}
