import Foundation
import VaultCrypto
import VaultModel

extension Cipher {
    /// Whether `other` is the same local version: the same content and the same server
    /// revision and trash date (what a save's base is compared with).
    func isSameVersion(as other: Cipher) -> Bool {
        sameContent(as: other) && revisionDate == other.revisionDate && deletedDate == other.deletedDate
    }
}

extension VaultRepository {
    // MARK: Saves from a stale view

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
