import Crypto
import Foundation
import LMDB
import Synchronization
import Logging
import VaultCrypto

/// Why a store cannot be opened or used.
public enum EventLogError: Error, Sendable, CustomStringConvertible {
    /// The store was written by a newer VaultLog.
    case newerStoreFormat(found: Int, supported: Int)
    /// The store at `path` was written by an older VaultLog (format `found`) and was opened
    /// read-only, so it cannot be upcast to `current`.
    case olderStoreFormat(path: String, found: Int, current: Int)
    /// The store's format marker is unreadable.
    case corruptMetadata(String)
    /// A checkpoint failed authentication or is malformed.
    case checkpoint(String)
    /// A head record (a user's last sequence and chain value) failed authentication or is malformed.
    case headRecord(String)
    /// A compaction snapshot failed authentication, is malformed, or a compaction was refused.
    case snapshot(String)
    /// A user's events do not form the chain their writer made: an event was removed, moved
    /// or put back (at `sequence`, the first event whose link is wrong, or the head record
    /// naming an event the log does not end with).
    case chainBroken(userId: String, sequence: UInt64, reason: String)
    /// The underlying LMDB error, with the store path.
    case storage(path: String, LMDBError)
    /// No sequence is left after `last` (the log holds an event at sequence 2^64 − 1, which
    /// only an imported or crafted file can do): nothing more can be appended.
    case sequenceSpaceExhausted(last: UInt64)

    /// What is wrong with the store and, for most cases, what to do about it (upgrade,
    /// run `vaultlog verify`, or restore from a backup).
    public var description: String {
        switch self {
        case .newerStoreFormat(let found, let supported):
            return "store format v\(found) is newer than this build supports (v\(supported)); upgrade VaultLog to read it (nothing was changed)"
        case .olderStoreFormat(let path, let found, let current):
            return "\(path): store format v\(found) was written by an older VaultLog; this build reads v\(current), and a read-only open cannot upcast it (nothing was changed). Upcast it in place once with 'vaultlog upgrade \(path)' (one transaction: a crash leaves the old store), then read it again"
        case .corruptMetadata(let what):
            return "store metadata is corrupt (\(what)); run 'vaultlog verify' for a full report"
        case .checkpoint(let what):
            return "checkpoint: \(what)"
        case .headRecord(let what), .snapshot(let what):
            return what
        case .chainBroken(let userId, let sequence, let reason):
            return "the log of user \(userId) is broken at event \(sequence): \(reason). Events were removed or moved in the file, so the pending changes cannot be trusted and nothing acts on them (nothing was written); restore the store from a backup, or log out and in again to start from the server's vault"

        case .sequenceSpaceExhausted(let last):
            return "the log's last sequence is \(last), the largest there is: no event can be appended after it (nothing was written); export the events you need and start a new store"
        case .storage(let path, let error):
            if error.isInvalidFile {
                return "\(path): not a VaultLog store (\(error.message)); check the path, or restore the directory from a backup"
            }
            return "\(path): \(error)"
        }
    }
}
