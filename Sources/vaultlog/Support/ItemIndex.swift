import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultModel

/// Every item the store knows of, per user: the local copies (the vault as the app shows it)
/// and pending items that have none (a delete waiting to reach the server), with their pending
/// change type and, for the unlocked user, their decrypted name. `vaultlog items` lists it and
/// `vaultlog history` finds an item in it by name or id prefix.
struct ItemIndex {
    struct Entry: Encodable {
        var userId: String
        var id: String
        var type: String?
        var name: String?
        var folderId: String?
        var inTrash: Bool
        var revisionDate: String?
        /// `create`, `update`, `softDelete` or `hardDelete` while waiting for the server.
        var pending: String?
        /// False for a pending item whose local copy is gone (a permanent delete, for example).
        var localCopy: Bool
        /// Why the name could not be decrypted (with a key).
        var decryptError: String?

        /// Type, folder and trash state from `cipher` (stored in clear), and its name when
        /// `key` opens it.
        mutating func describe(_ cipher: Cipher, key: SymmetricCryptoKey?) {
            type = cipher.type.description
            folderId = cipher.folderId
            inTrash = cipher.deletedDate != nil
            guard let key else { return }
            do { name = try cipher.decrypt(userKey: key).name } catch { decryptError = "\(error)" }
        }
    }

    var entries: [Entry] = []

    init(store: VaultLogStore, users: [String], unlocked: UnlockedUser?) throws {
        for user in users {
            let pending = try store.pendingFromHeaders(userId: user).pending
            let key = unlocked?.userId == user ? unlocked?.userKey : nil
            var seen: Set<String> = []
            for cipher in try store.localCiphers(userId: user) {
                guard let id = cipher.id else { continue }
                seen.insert(id)
                var entry = Entry(userId: user, id: id, inTrash: false, revisionDate: cipher.revisionDate?.text,
                                  pending: pending[id]?.rawValue, localCopy: true)
                entry.describe(cipher, key: key)
                entries.append(entry)
            }
            // With a key, a pending item without a local copy is described by its newest
            // version in the log.
            let latest = try key.map { _ in try store.projection(userId: user, at: store.log.lastSequence()).pending }
            for (id, type) in pending where !seen.contains(id) {
                var entry = Entry(userId: user, id: id, inTrash: false, pending: type.rawValue, localCopy: false)
                if let key, let cipher = latest?[id]?.latest { entry.describe(cipher, key: key) }
                entries.append(entry)
            }
        }
        entries.sort { ($0.userId, ($0.name ?? "").lowercased(), $0.id) < ($1.userId, ($1.name ?? "").lowercased(), $1.id) }
    }

    /// The items a user means by `query`: an exact id; else the items whose name is `query`
    /// (ignoring case); else those whose id starts with it; else those whose name starts with
    /// it. The first rule that finds anything decides.
    func find(_ query: String) -> [Entry] {
        let lower = query.lowercased()
        let rules: [(Entry) -> Bool] = [
            { $0.id == query },
            { $0.name?.lowercased() == lower },
            { $0.id.hasPrefix(lower) },
            { $0.name?.lowercased().hasPrefix(lower) == true },
        ]
        for rule in rules {
            let found = entries.filter(rule)
            if !found.isEmpty { return found }
        }
        return []
    }

    /// One line: `4f1c2a3b-… "Bank" login, pending update (user u1)`.
    static func line(_ entry: Entry, showUser: Bool) -> String {
        var details: [String] = []
        if let type = entry.type { details.append(type) }
        if let folder = entry.folderId { details.append("folder \(folder)") }
        if entry.inTrash { details.append("in the trash") }
        if let pending = entry.pending { details.append("pending \(pending)") }
        if !entry.localCopy { details.append("no local copy") }
        if let error = entry.decryptError { details.append("does not decrypt (\(error))") }
        if showUser { details.append("user \(entry.userId)") }
        let name = entry.name.map { " \"\($0)\"" } ?? ""
        return "\(entry.id)\(name)" + (details.isEmpty ? "" : " " + details.joined(separator: ", "))
    }
}
