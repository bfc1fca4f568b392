import Foundation
@_spi(Tools) import OfflineSync
import VaultModel

extension OfflineVault {
    // MARK: Items that need a decision

    /// Puts items back into automatic retries (all dead letters and items backing off when
    /// `cipherIds` is nil); the next sync sends them.
    public func retry(_ cipherIds: [String]? = nil) async throws {
        try await vaultCall { try await resolver.retryDeadLetters(userId: try unlockedUser(), cipherIds: cipherIds) }
        publishStatus()
    }

    /// Discards the item's waiting change: the server's version replaces it on this device
    /// (an item created here and never confirmed by the server is removed). The discarded
    /// version stays in the item's history and in an export. Needs the server (offline:
    /// ``VaultError/Kind/offline``, nothing changed).
    @discardableResult
    public func discardChange(of cipherId: String) async throws -> DiscardResult {
        let result = try await vaultCall { try await resolver.discardPendingChange(userId: try unlockedUser(), cipherId: cipherId) }
        publishStatus()
        return result
    }

    /// Saves the item's waiting version as a new item (named "… (copy)", online or on the
    /// device) and then discards the waiting change, so the user keeps both their version and
    /// the server's. Only for a waiting create or edit (``VaultError/Kind/notPossible`` for a
    /// trash move or a delete). If the discard fails, the new item is still saved.
    @discardableResult
    public func saveAsNewItem(_ cipherId: String) async throws -> SaveResult {
        let saved = try await vaultCall { () -> SaveResult in
            let userId = try unlockedUser()
            guard let change = try store.projection(userId: userId).pending[cipherId] else {
                throw VaultError(.notPossible, detail: "item \(cipherId) has no change waiting for the server")
            }
            guard change.changeType == .create || change.changeType == .update else {
                throw VaultError(.notPossible, detail: "item \(cipherId) waits for a \(change.changeType.rawValue); only a create or an edit can be saved as a new item")
            }
            let view = try change.latest.decrypt(userKey: store.userKey(userId: userId))
            let copy = view.backupCopy(named: "\(view.name ?? "") (copy)", random: store.dependencies.random)
            return try await repository().addCipher(copy)
        }
        _ = try await discardChange(of: cipherId)
        return saved
    }
}
