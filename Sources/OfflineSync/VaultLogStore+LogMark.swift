import EventLog
import Foundation
import VaultCrypto

extension VaultLogStore {
    // MARK: The mark that a user's log exists

    /// The stored account of `userId` in `reader`'s view, or nil.
    func storedAccount(userId: String, in reader: LogReader) throws -> StoredAccount? {
        guard let bytes = try reader.get(accounts, key: Array(userId.utf8)) else { return nil }
        do {
            return try JSONDecoder().decode(StoredAccount.self, from: Data(bytes))
        } catch {
            throw OfflineSyncError.corruptAccount(userId: userId, reason: "\(error)")
        }
    }

    /// Checked in an append's transaction before its events are added: refuses to start the
    /// log of a user whose account record says it was started already (the whole log was
    /// removed from the file). Returns the account to rewrite with a mark once the events are
    /// in (a user's first event, or the first append to a log older than the mark), nil when
    /// there is nothing to write. One point read when the user has a head record and this
    /// process has seen the mark; more only on a user's first append.
    func accountToMark(userId: String, key: SealingKey, in txn: LogTransaction) throws -> StoredAccount? {
        let reader = txn.reader
        let noLog = try reader.hasNoLog(userId: userId)
        if !noLog, markedUsers.withLock({ $0.contains(userId) }) { return nil }
        guard let account = try storedAccount(userId: userId, in: reader) else { return nil }
        if let mark = account.logMark {
            if noLog { throw try Self.removedLog(userId: userId, mark: mark, key: key) }
            markedUsers.withLock { _ = $0.insert(userId) }
            return nil
        }
        return account
    }

    /// `txn.append(events, key:)` of `userId`'s events with the log mark kept: refused for a
    /// user whose whole log was removed, and the mark written with the user's first event.
    func appendMarked(_ events: [NewEvent], userId: String, key: SealingKey, in txn: LogTransaction) throws -> [UInt64] {
        let unmarked = try accountToMark(userId: userId, key: key, in: txn)
        let sequences = try txn.append(events, key: key)
        if let unmarked { try mark(unmarked, key: key, in: txn) }
        return sequences
    }

    /// Writes the mark into `account` (the user's log now starts at its first event, or at the
    /// compaction horizon when its first events were compacted away).
    func mark(_ account: StoredAccount, key: SealingKey, in txn: LogTransaction) throws {
        let reader = txn.reader
        let first = try reader.firstSequence(userId: account.userId) ?? reader.horizon(userId: account.userId)
        var marked = account
        marked.logMark = LogMark(userId: account.userId, firstSequence: first, key: key)
        try txn.put(accounts, key: Array(account.userId.utf8), value: try Self.encode(marked))
    }

    /// Checked where a fold finds no trace of the user's log (no event, head or snapshot):
    /// throws when the user's account record carries a log mark, which says the log was
    /// started. With no `key` (a locked vault's pending count) the mark's presence is enough.
    func checkNoLogMark(userId: String, in reader: LogReader, key: SealingKey?) throws {
        guard let mark = try storedAccount(userId: userId, in: reader)?.logMark else { return }
        guard let key else {
            throw EventLogError.chainBroken(userId: userId, sequence: mark.firstSequence, reason: Self.removedLogReason(mark))
        }
        throw try Self.removedLog(userId: userId, mark: mark, key: key)
    }

    /// The error for a log mark with no log: the removal, or a mark that does not authenticate.
    private static func removedLog(userId: String, mark: LogMark, key: SealingKey) throws -> Error {
        guard mark.authenticates(userId: userId, key: key) else {
            return OfflineSyncError.corruptAccount(userId: userId, reason: "its log mark failed authentication (wrong key or tampered file); nothing was written: run 'vaultlog verify' for a full report")
        }
        return EventLogError.chainBroken(userId: userId, sequence: mark.firstSequence, reason: removedLogReason(mark))
    }

    private static func removedLogReason(_ mark: LogMark) -> String {
        "the account record says the user's log started at event \(mark.firstSequence), and no event, head record or compaction snapshot of the user is left: the whole log was removed from the file"
    }

    static func encode(_ account: StoredAccount) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(account))
    }

    /// The `verify` part for log marks: a stored account whose mark says its log started while
    /// no trace of the log is left (with the user's key in `keys`, a mark that does not
    /// authenticate too).
    func verifyLogMarks(keys: [String: SealingKey]) throws -> [VerifyProblem] {
        try storedAccounts().compactMap { account -> VerifyProblem? in
            guard let mark = account.logMark else { return nil }
            if let key = keys[account.userId], !mark.authenticates(userId: account.userId, key: key) {
                return VerifyProblem(sequence: nil, kind: .headAuthenticationFailed,
                                     message: "the log mark in the account record of user \(account.userId) failed authentication (wrong key or tampered file)")
            }
            guard try log.read({ try $0.hasNoLog(userId: account.userId) }) else { return nil }
            return VerifyProblem(sequence: nil, kind: .truncated,
                                 message: "user \(account.userId): " + Self.removedLogReason(mark))
        }
    }
}
