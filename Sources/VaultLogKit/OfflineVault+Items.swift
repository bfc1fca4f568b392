import BitwardenAPI
import Foundation
@_spi(Tools) import OfflineSync
import VaultModel

/// An item as the vault screen lists it: its decrypted content and, when it has changes
/// waiting for the server, where they stand.
///
/// ```swift
/// for item in try vault.items() where item.view.deletedDate == nil {
///     print(item.view.name ?? "", item.pending == nil ? "" : "(not synced yet)")
/// }
/// ```
public struct VaultItem: Sendable, Equatable, Identifiable {
    /// The decrypted item (its `id` is a temporary one until an item created offline reaches the server).
    public var view: CipherView
    /// The item's pending state, or nil when the server has everything.
    public var pending: PendingItemStatus?
    /// The item's id.
    public var id: String { view.id ?? "" }
}

extension OfflineVault {
    // MARK: Items

    /// The account's items on this device (the server's copies, and every change saved here),
    /// trashed ones included (`view.deletedDate`). Reads only: never waits for a save.
    public func items() throws -> [VaultItem] {
        do {
            let userId = try unlockedUser()
            let key = try store.userKey(userId: userId)
            let pending = Dictionary(uniqueKeysWithValues: try store.projection(userId: userId).pendingItems.map { ($0.cipherId, $0) })
            return try store.localCiphers(userId: userId).map { cipher in
                VaultItem(view: try cipher.decrypt(userKey: key), pending: cipher.id.flatMap { pending[$0] })
            }
        } catch {
            throw VaultError.wrapping(error)
        }
    }

    /// Saves an item: a new one when `view.id` is nil, an edit otherwise. Online when the
    /// server answers, durably on the device when it cannot be reached (the result says
    /// which). A server refusal throws ``VaultError/Kind/rejected`` and nothing is saved.
    ///
    /// Beside other callers: durable when it returns, whatever runs meanwhile (a sync never
    /// overwrites it); saving from a view read before another save of the item merges the two
    /// (parts only one changed are both kept; a backup keeps anything else the other changed).
    @discardableResult
    public func save(_ view: CipherView) async throws -> SaveResult {
        try await vaultCall {
            let repository = try repository()
            return view.id == nil ? try await repository.addCipher(view) : try await repository.updateCipher(view)
        }
    }

    /// Moves an item to the trash (online, or saved on the device).
    @discardableResult
    public func trash(_ view: CipherView) async throws -> SaveResult {
        try await vaultCall { try await repository().softDeleteCipher(view) }
    }

    /// Deletes an item permanently (online, or saved on the device).
    @discardableResult
    public func delete(id: String) async throws -> SaveResult {
        try await vaultCall { try await repository().deleteCipher(id: id) }
    }

    /// Restores an item from the trash, with every edit made to it there. Online when the
    /// server answers (the server's copy is stored); offline it is saved on the device and the
    /// server follows at the next sync, as for every other change. An item with changes still
    /// waiting for the server is restored through the resolver at once (the result says what
    /// it did). An item that is not in the trash throws ``VaultError/Kind/notPossible`` and
    /// nothing changes; a server refusal throws ``VaultError/Kind/rejected``.
    @discardableResult
    public func restore(id: String) async throws -> SaveResult {
        try await vaultCall { try await repository().restoreCipher(id: id) }
    }

    /// The id an item has now: a screen that still holds the temporary id of an item created
    /// offline (or the old id of an item re-created after another device deleted it) gets the
    /// server's id once the resolver mapped it.
    public func currentId(of id: String) throws -> String {
        do { return try repository().currentId(id) } catch { throw VaultError.wrapping(error) }
    }

    /// The repository of the unlocked user, sharing the vault's resolver.
    func repository() throws -> VaultRepository {
        VaultRepository(store: store, userId: try unlockedUser(), server: client, resolver: resolver, logger: logger)
    }
}
