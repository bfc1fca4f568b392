import Foundation
@_spi(Tools) import OfflineSync
import Synchronization

/// Where an app keeps, outside the store, the position the account's log had reached (on Apple
/// platforms: the keychain, which a restored or copied-back store file does not roll back
/// with it). ``OfflineVault`` writes it after the store's commits and compares it when the vault
/// is unlocked: a store older than the position (the file, or this account's records in it,
/// put back to an earlier copy, so edits saved since are gone) fails the unlock with
/// ``VaultError/Kind/corruptStore`` instead of syncing as if nothing had happened.
///
/// ```swift
/// struct KeychainAnchors: LogAnchorStore {
///     func anchor(userId: String) async throws -> LogPosition? {
///         try keychain.data(for: "vault.anchor.\(userId)").map { try JSONDecoder().decode(LogPosition.self, from: $0) }
///     }
///     func setAnchor(_ position: LogPosition?, userId: String) async throws {
///         try keychain.set(position.map { try JSONEncoder().encode($0) }, for: "vault.anchor.\(userId)")
///     }
/// }
/// ```
///
/// The position is not a secret (a sequence number and a MAC). An app and its extension on one
/// store share it (a shared keychain group): each writes only positions that move forward, so a
/// write that comes late never moves it back far enough to raise a false alarm. What it cannot
/// see: a rollback to a copy taken after the last position was written.
public protocol LogAnchorStore: Sendable {
    /// The position saved for `userId`, or nil.
    func anchor(userId: String) async throws -> LogPosition?
    /// Saves the position of `userId`, or forgets it (nil, at logout).
    func setAnchor(_ position: LogPosition?, userId: String) async throws
}

/// A ``LogAnchorStore`` in memory (tests, examples): it notices a rollback of the store within
/// one run of the app only.
public final class InMemoryLogAnchorStore: LogAnchorStore {
    private let saved = Mutex<[String: LogPosition]>([:])

    /// An empty store.
    public init() {}

    /// The position saved for `userId`.
    public func anchor(userId: String) async throws -> LogPosition? { saved.withLock { $0[userId] } }

    /// Saves or forgets the position of `userId`.
    public func setAnchor(_ position: LogPosition?, userId: String) async throws { saved.withLock { $0[userId] = position } }
}

extension OfflineVault {
    /// Compares the unlocked store with the anchor store's position (no anchor store, or no
    /// position yet: nothing to compare). On a rollback the vault is locked again and the
    /// error thrown.
    func checkAnchor(userId: String) async throws {
        guard let anchors = anchorStore, let remembered = try await anchors.anchor(userId: userId) else { return }
        do {
            try store.checkLogPosition(userId: userId, remembered: remembered)
        } catch {
            store.lock(userId: userId)
            throw error
        }
    }

    /// Saves the store's position of the unlocked account in the anchor store now, when it is
    /// past the one saved there (the vault also does this after every commit it sees, in the
    /// background; an app may call it when it goes to the background).
    public func saveLogAnchor() async throws {
        try await vaultCall {
            let userId = try unlockedUser()
            try await rememberPosition(userId: userId)
        }
    }

    func rememberPosition(userId: String) async throws {
        guard let anchors = anchorStore, store.isUnlocked(userId: userId),
              let position = try whileOpen({ try store.logPosition(userId: userId) }) ?? nil else { return }
        if let saved = try await anchors.anchor(userId: userId), saved.lastSequence >= position.lastSequence { return }
        try await anchors.setAnchor(position, userId: userId)
    }
}
