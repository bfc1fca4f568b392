import EventLog
import Foundation
import VaultCrypto

/// Where a user's log ended when the app last looked: the sequence of the user's last event
/// and its chain value, read from the sealed head record. The store alone cannot tell its file
/// was put back to an older copy of itself (or that one user's records were: an older tail
/// with that user's older head is consistent and sealed). An app that keeps the position
/// outside the store (the keychain) and compares it when the vault is unlocked can:
/// ``VaultLogStore/checkLogPosition(userId:remembered:)``.
public struct LogPosition: Codable, Sendable, Equatable, CustomStringConvertible {
    /// The sequence of the user's last event.
    public let lastSequence: UInt64
    /// That event's chain value (its stored MAC), base64: the position names one event, not
    /// only a number (a different log that reached the same sequence is not this one).
    public let chain: String

    /// A position (usually from ``VaultLogStore/logPosition(userId:)`` or the app's keychain).
    public init(lastSequence: UInt64, chain: String) {
        self.lastSequence = lastSequence
        self.chain = chain
    }

    /// `"event <sequence>"`.
    public var description: String { "event \(lastSequence)" }
}

extension VaultLogStore {
    // MARK: The position an app keeps outside the store

    /// Where `userId`'s log ends now, from its head record authenticated with the user's key;
    /// nil for a user with no event yet. The user must be unlocked. One read transaction: beside
    /// saves in this process or another it gives the position of the last commit it sees.
    public func logPosition(userId: String) throws -> LogPosition? {
        let key = try keys(userId).sealing
        return try log.read { reader in
            try reader.head(userId: userId, key: key, outcome: "no position was read").map {
                LogPosition(lastSequence: $0.lastSequence, chain: Data($0.chain).base64EncodedString())
            }
        }
    }

    /// Checks that `userId`'s log still holds the position an app remembered: it ends at it or
    /// goes on from it (the event at `remembered` is still the one it was, unless compaction
    /// has replaced it by a snapshot). Throws ``OfflineSyncError/rolledBack(userId:reason:)``
    /// when the log ends before it, or at or past it with another event there: the store, or
    /// this user's records in it, were put back to an older copy, and edits saved since are
    /// gone. The user must be unlocked; nothing is written.
    public func checkLogPosition(userId: String, remembered: LogPosition) throws {
        let key = try keys(userId).sealing
        guard let chain = Data(base64Encoded: remembered.chain), chain.count == 32 else {
            throw OfflineSyncError.rolledBack(userId: userId, reason: "the remembered position \(remembered) has no valid chain value: it was not made by this library")
        }
        let remembered = (sequence: remembered.lastSequence, chain: ChainMAC(Array(chain)))
        try log.read { reader in
            guard let head = try reader.head(userId: userId, key: key, outcome: "the position was not checked") else {
                throw OfflineSyncError.rolledBack(userId: userId, reason: "the app remembers the log at event \(remembered.sequence), and the store holds no event of the user")
            }
            guard head.lastSequence >= remembered.sequence else {
                throw OfflineSyncError.rolledBack(userId: userId, reason: "the app remembers the log at event \(remembered.sequence), and the store's log ends at event \(head.lastSequence)")
            }
            if head.lastSequence == remembered.sequence {
                guard ChainMAC(head.chain) == remembered.chain else {
                    throw OfflineSyncError.rolledBack(userId: userId, reason: "the store's log ends at event \(head.lastSequence), as the app remembers, but with another event")
                }
                return
            }
            if let there = try reader.chainValue(userId: userId, at: remembered.sequence) {
                guard there == remembered.chain else {
                    throw OfflineSyncError.rolledBack(userId: userId, reason: "the event at \(remembered.sequence), where the app remembers the log, is another one: the log was replaced")
                }
            } else if try reader.horizon(userId: userId) < remembered.sequence {
                throw OfflineSyncError.rolledBack(userId: userId, reason: "the event at \(remembered.sequence), where the app remembers the log, is gone")
            }
        }
    }
}
