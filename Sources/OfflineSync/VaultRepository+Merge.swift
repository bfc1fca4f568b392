import Foundation
import VaultCrypto
import VaultModel

extension Cipher {
    /// Whether `other` is the same local version: the same content and the same server
    /// revision and trash date (what a save's base is compared with).
    func isSameVersion(as other: Cipher) -> Bool {
        sameContent(as: other) && revisionDate == other.revisionDate && deletedDate == other.deletedDate
    }

    /// Whether `other` is this version but for its folder.
    func isSameVersionButFolder(as other: Cipher) -> Bool {
        var copy = self
        copy.folderId = other.folderId
        return copy.isSameVersion(as: other)
    }
}

extension VaultRepository {
    // MARK: Saves from a stale view

    /// Whether a save based on `base` comes from a stale view: another save of the item came in
    /// since it was read (`previous`, the version the save replaces, is not `base`). A view of
    /// the local copy is not stale when that copy differs from `previous` only in its folder: a
    /// folder delete moves the local copy of an item with pending changes to no folder at once,
    /// while its pending snapshot (in the log) keeps the folder; the resolver sends it with no
    /// folder too. Merging there would see the folder changed on both sides and back up a
    /// version nobody else wrote.
    func isStaleSave(base: Cipher, previous: Cipher, cipherId: String) throws -> Bool {
        guard !base.isSameVersion(as: previous) else { return false }
        guard let local = try store.localCipher(userId: userId, id: cipherId) else { return true }
        return !(base.isSameVersion(as: local) && local.isSameVersionButFolder(as: previous))
    }

    /// A save made from a view of `base` while the item is at `current` (another save came in
    /// since): the three-way merge. When both changed a part other than the password, `current`
    /// is first saved as a backup item, so the merged save (which keeps this save's value) loses
    /// nothing; the backup is an ordinary new item, created online or saved offline like any.
    func mergeStaleSave(_ view: CipherView, base: Cipher, current: CipherView, cipherId: String,
                        userKey: SymmetricCryptoKey) async throws -> CipherView {
        let merge = view.merged(base: try base.decrypt(userKey: userKey), current: current)
        logger.info("save from an earlier view of the item: merged with the newer local version",
                    metadata: ["cipher": "\(cipherId)", "conflicts": "\(merge.conflicts)"])
        guard !merge.conflicts.isEmpty else { return merge.merged }
        let losingSince = try store.projection(userId: userId).pending[cipherId]?.updatedAt ?? current.revisionDate ?? now
        var backup = current.backupCopy(named: BackupName.conflict(current.name, at: losingSince), random: store.dependencies.random)
        backup.deletedDate = nil
        _ = try await addCipher(backup)
        return merge.merged
    }
}
