import EventLog
import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultModel

/// The keys of an unlocked user.
struct UnlockedKeys: Sendable {
    let userKey: SymmetricCryptoKey
    let sealing: SealingKey
}

extension VaultLogStore {
    // MARK: Sessions

    /// Unlocks `userId` with its user key.
    public func unlock(userId: String, userKey: SymmetricCryptoKey) {
        sessions.withLock { $0[userId] = UnlockedKeys(userKey: userKey, sealing: SealingKey(userKey: userKey)) }
    }

    /// Unlocks with the master password: derives the master key, unwraps the protected user key.
    /// A wrong password fails with `VaultCryptoError.authenticationFailed` and changes nothing;
    /// KDF settings out of Bitwarden's ranges fail with `VaultCryptoError.invalidKdfParameters`
    /// before any derivation.
    @discardableResult
    public func unlock(userId: String, email: String, masterPassword: String, kdf: KdfConfig,
                       protectedUserKey: EncString, salt: String? = nil) throws -> SymmetricCryptoKey {
        let master = try MasterKey.derive(password: masterPassword, salt: MasterKey.salt(email: email, preloginSalt: salt), kdf: kdf)
        let userKey = try master.decryptUserKey(protectedUserKey)
        unlock(userId: userId, userKey: userKey)
        return userKey
    }

    /// Locks `userId`: its keys and decrypted projection leave memory (best effort: Swift
    /// cannot guarantee no copy survives elsewhere in the heap).
    public func lock(userId: String) {
        _ = sessions.withLock { $0.removeValue(forKey: userId) }
        _ = projections.withLock { $0.removeValue(forKey: userId) }
    }
}
