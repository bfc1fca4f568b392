import Foundation
@_spi(Tools) import OfflineSync

/// What a vault screen shows about syncing: one value an app renders, delivered by
/// ``OfflineVault/statusUpdates()`` whenever it changes.
///
/// ```swift
/// for await status in vault.statusUpdates() {
///     switch status.phase {
///     case .syncing: banner.show("Syncing…")
///     case .waitingForNetwork: banner.show("Offline – \(status.pendingCount) changes saved on this device")
///     case .needsLogin: presentLogin()
///     case .blocked: banner.show("\(status.deadLetters.count) items need your decision")
///     case .idle, .locked: banner.hide()
///     }
/// }
/// ```
public struct SyncStatus: Sendable, Equatable {
    /// What the vault is doing, or why it is not syncing.
    public enum Phase: Sendable, Equatable {
        /// No account is unlocked: nothing can be read, saved or synced.
        case locked
        /// Nothing running; the last sync (if any) went through.
        case idle
        /// A sync is running, at this step.
        case syncing(SyncStep)
        /// The last sync could not reach the server; edits are saved on the device and go out
        /// with the next sync.
        case waitingForNetwork
        /// The server ended the session: log in again (edits saved on the device are kept).
        case needsLogin
        /// Items need the user's decision (``SyncStatus/deadLetters``): retry, discard, or save
        /// as a new item. Every other item syncs as usual.
        case blocked
    }

    /// A step of a running sync.
    public enum SyncStep: Sendable, Equatable {
        /// Sending this many changes saved on the device.
        case sendingChanges(count: Int)
        /// Fetching the server's items and applying them.
        case fetching
    }

    /// What the vault is doing.
    public var phase: Phase
    /// Items waiting for the server (dead letters included), from every process on the store.
    public var pendingCount: Int
    /// Folder changes (creates, renames, deletes) saved on this device and waiting for the
    /// server; not counted in ``pendingCount``.
    public var pendingFolderCount: Int = 0
    /// Items that need the user's decision.
    public var deadLetters: [PendingItemStatus]
    /// When the server's items were last applied on this device (by any process).
    public var lastSyncedAt: Date?

    /// Creates a status.
    public init(phase: Phase, pendingCount: Int = 0, pendingFolderCount: Int = 0, deadLetters: [PendingItemStatus] = [],
                lastSyncedAt: Date? = nil) {
        self.phase = phase
        self.pendingCount = pendingCount
        self.pendingFolderCount = pendingFolderCount
        self.deadLetters = deadLetters
        self.lastSyncedAt = lastSyncedAt
    }
}

extension SyncStatus.Phase: CustomStringConvertible {
    /// A short English description ("syncing: sending 2 changes"), for logs.
    public var description: String {
        switch self {
        case .locked: "locked"
        case .idle: "idle"
        case .syncing(.sendingChanges(let count)): "syncing: sending \(count) change\(count == 1 ? "" : "s")"
        case .syncing(.fetching): "syncing: fetching the server's items"
        case .waitingForNetwork: "waiting for the network"
        case .needsLogin: "needs login"
        case .blocked: "blocked: items need a decision"
        }
    }
}
