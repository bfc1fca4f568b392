import EventLog
import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultModel

/// What the store keeps about an account so the vault can be unlocked offline with the master
/// password (the encrypted user key, never the password or any plaintext key).
public struct StoredAccount: Codable, Sendable, Equatable {
    /// The server's user id (the access token's `sub`).
    public var userId: String
    /// The login email (the default master-password salt).
    public var email: String
    /// The KDF settings the server named at prelogin.
    public var kdf: KdfConfig
    /// The user key wrapped by the stretched master key (`Key` of the token response).
    public var protectedUserKey: EncString
    /// The master-password salt the server named at prelogin, when it named one; nil (absent in
    /// records written before it existed) means the email.
    public var salt: String?
    /// The sealed mark that this user's log was started (written with the user's first event;
    /// nil before). It outlives no logout, and ``VaultLogStore/saveAccount(_:)`` keeps it
    /// when a later login saves the account again: with it, a log removed from the file as a
    /// whole is reported by the next fold or append instead of looking never started.
    public var logMark: LogMark?

    /// An account record, usually from a login's result (`BitwardenClient.login`).
    public init(userId: String, email: String, kdf: KdfConfig, protectedUserKey: EncString, salt: String? = nil) {
        self.logMark = nil
        self.userId = userId
        self.email = email
        self.kdf = kdf
        self.protectedUserKey = protectedUserKey
        self.salt = salt
    }
}

extension VaultLogStore {
    // MARK: Accounts

    /// Remembers what unlocking `account.userId` with the master password needs (email, KDF,
    /// protected user key: all safe at rest, as Bitwarden clients store them). Replaces an
    /// earlier record of the same user, keeping its log mark (``StoredAccount/logMark``) when
    /// `account` has none. One write transaction: beside other callers, in this process or
    /// another, the last save wins and a mark is never lost.
    public func saveAccount(_ account: StoredAccount) throws {
        try log.write { txn in
            var record = account
            if record.logMark == nil {
                // An unreadable earlier record is what a new login replaces: no mark to keep.
                record.logMark = try? storedAccount(userId: account.userId, in: txn.reader)?.logMark
            }
            try txn.put(accounts, key: Array(account.userId.utf8), value: try Self.encode(record))
        }
    }

    /// Every stored account, by user id order.
    public func storedAccounts() throws -> [StoredAccount] {
        try log.read { reader in
            var out: [StoredAccount] = []
            try reader.scan(accounts) { key, value in  // from the first key: LMDB rejects an empty seek key
                do {
                    out.append(try JSONDecoder().decode(StoredAccount.self, from: Data(value)))
                } catch {
                    throw OfflineSyncError.corruptAccount(userId: String(decoding: key, as: UTF8.self), reason: "\(error)")
                }
                return true
            }
            return out
        }
    }

    /// Unlocks the stored account of `email` with its master password and returns its user
    /// id. Throws ``OfflineSyncError/unknownAccount(_:)`` when no account of that email is
    /// stored, and `VaultCryptoError.authenticationFailed` for a wrong password.
    ///
    /// The key derivation (PBKDF2 or Argon2id, up to a second or more on a phone) runs on a
    /// thread of its own, never on the caller's; ``unlockBlocking(email:masterPassword:)`` is
    /// the same on the caller's thread.
    @discardableResult
    public func unlock(email: String, masterPassword: String) async throws -> String {
        try await Self.offThread { try self.unlockBlocking(email: email, masterPassword: masterPassword) }
    }

    /// ``unlock(email:masterPassword:)`` on the caller's thread, which the key derivation
    /// blocks (a command-line tool, synchronous code).
    @discardableResult
    public func unlockBlocking(email: String, masterPassword: String) throws -> String {
        let normalized = email.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        guard let account = try storedAccounts().first(where: { $0.email.lowercased() == normalized }) else {
            throw OfflineSyncError.unknownAccount(email)
        }
        try unlock(userId: account.userId, email: account.email, masterPassword: masterPassword,
                   kdf: account.kdf, protectedUserKey: account.protectedUserKey, salt: account.salt)
        return account.userId
    }

    /// Whether `userId` is unlocked.
    public func isUnlocked(userId: String) -> Bool { sessions.withLock { $0[userId] != nil } }

    func keys(_ userId: String) throws -> UnlockedKeys {
        guard let keys = sessions.withLock({ $0[userId] }) else { throw OfflineSyncError.vaultLocked(userId: userId) }
        return keys
    }

    /// The user key of an unlocked user.
    public func userKey(userId: String) throws -> SymmetricCryptoKey { try keys(userId).userKey }

    /// The key that seals an unlocked user's events (for `EventLogStore.verify(keys:)`).
    @_spi(Tools) public func sealingKey(userId: String) throws -> SealingKey { try keys(userId).sealing }
}
