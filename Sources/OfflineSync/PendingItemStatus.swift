import Foundation
import VaultModel

/// One item still waiting for the server, as an app shows it ("3 changes not synced yet",
/// "1 needs your decision").
public struct PendingItemStatus: Sendable, Equatable, Identifiable {
    /// Where the item stands.
    public enum State: Sendable, Equatable {
        /// Sent with the next sync (or the resolution a save starts).
        case waiting
        /// An attempt failed; retried automatically from this time on.
        case retrying(at: Date)
        /// Failed too often (the server answered each time): automatic retries stopped, the
        /// app asks the user to retry, discard the change or save it as a new item.
        case deadLetter(attempts: Int)
        /// An event of the item cannot be read (the store file was damaged): the item is never
        /// sent automatically; the rest of the vault resolves as usual.
        case quarantined(reason: String)
    }

    /// The item's id in the log (a temporary id for an item created offline).
    public var cipherId: String
    /// What is waiting: a create, an update, a trash move or a permanent delete.
    public var changeType: PendingChangeType
    /// Where the item stands.
    public var state: State
    /// The last failure's text, when an attempt failed.
    public var lastError: String?
    /// When the user last changed the item (nil when only headers could be read: a locked vault).
    public var updatedAt: Date?

    /// ``cipherId``.
    public var id: String { cipherId }

    /// Whether the item needs the user's decision (a dead letter).
    public var needsDecision: Bool {
        if case .deadLetter = state { return true }
        return false
    }

    /// Creates a status.
    public init(cipherId: String, changeType: PendingChangeType, state: State, lastError: String? = nil, updatedAt: Date? = nil) {
        self.cipherId = cipherId
        self.changeType = changeType
        self.state = state
        self.lastError = lastError
        self.updatedAt = updatedAt
    }
}

extension Projection {
    /// Every pending item's status, in the order the items were first changed.
    public var pendingItems: [PendingItemStatus] {
        pending.values
            .sorted { ($0.versionSequences.first ?? 0) < ($1.versionSequences.first ?? 0) }
            .map { change in
                let state: PendingItemStatus.State
                if let reason = quarantined?[change.cipherId] {
                    state = .quarantined(reason: reason)
                } else if change.isDeadLetter {
                    state = .deadLetter(attempts: change.attempts)
                } else if let next = change.nextRetryAt {
                    state = .retrying(at: next.date)
                } else {
                    state = .waiting
                }
                return PendingItemStatus(cipherId: change.cipherId, changeType: change.changeType, state: state,
                                         lastError: change.lastError, updatedAt: change.updatedAt.date)
            }
    }
}

extension HeaderProjection {
    /// The pending items a header-only fold knows (a locked vault): ids and change types,
    /// each ``PendingItemStatus/State/waiting`` (failures are in the sealed bodies).
    public var pendingItems: [PendingItemStatus] {
        pending.keys.sorted().map { PendingItemStatus(cipherId: $0, changeType: pending[$0]!, state: .waiting) }
    }
}
