import Crypto
import Foundation
import VaultCrypto

/// The sealed mark that a user's log exists: written once, with the user's first event (or,
/// for a log older than the mark, with the first append after it), into a record that lives
/// apart from the log (the app's account record). Removing every event, index entry,
/// checkpoint, snapshot and the head of a user leaves a log that looks never started; the
/// mark says otherwise, so reads and appends report the removal instead of starting again.
///
/// `"VLMK" ‖ 0x01 ‖ userIdLength ‖ userId ‖ firstSequence(8, BE)`, HMAC-SHA256 under the
/// user's head key (the head record's, which starts `"VLHD"`: the two cannot be swapped).
public struct LogMark: Codable, Sendable, Equatable {
    /// The sequence the user's log started at (informative; the mark's presence is what counts).
    public let firstSequence: UInt64
    /// The HMAC over the mark's bytes, base64.
    public let mac: String

    static let magic = Array("VLMK".utf8)

    /// The mark of `userId`'s log, started at `firstSequence`, sealed with `key`.
    public init(userId: String, firstSequence: UInt64, key: SealingKey) {
        self.firstSequence = firstSequence
        mac = Data(Self.mac(userId: userId, firstSequence: firstSequence, key: key)).base64EncodedString()
    }

    /// Whether the mark was sealed for `userId` with `key` (false for another user's mark, a
    /// changed sequence, a damaged MAC or another key).
    public func authenticates(userId: String, key: SealingKey) -> Bool {
        guard let stored = Data(base64Encoded: mac), stored.count == 32 else { return false }
        return constantTimeEquals(Self.mac(userId: userId, firstSequence: firstSequence, key: key), Array(stored))
    }

    private static func mac(userId: String, firstSequence: UInt64, key: SealingKey) -> [UInt8] {
        var bytes = magic + [1]
        let user = Array(userId.utf8.prefix(Envelope.maxIdLength))
        bytes.append(UInt8(user.count))
        bytes.append(contentsOf: user)
        appendBE(firstSequence, to: &bytes)
        var hmac = key.heads.hmac
        hmac.update(data: bytes)
        return Array(hmac.finalize())
    }
}

extension LogReader {
    /// Whether `userId` has no trace of a log in the store: no event, no head record and no
    /// compaction snapshot (a user who never appended, or one whose whole log was removed).
    package func hasNoLog(userId: String) throws -> Bool {
        try head(userId: userId, key: nil, outcome: "nothing was read") == nil
            && firstSequence(userId: userId) == nil && snapshotInfo(userId: userId) == nil
    }
}
