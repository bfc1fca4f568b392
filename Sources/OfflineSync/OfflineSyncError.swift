import Foundation

/// Errors of the offline-sync domain, each saying what to do.
public enum OfflineSyncError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The operation needs the user's keys and the vault is locked.
    case vaultLocked(userId: String)
    /// A stored event could not be decoded.
    case corruptEvent(sequence: UInt64, reason: String)
    /// The item has no id where one is required.
    case missingCipherId
    /// A stored local item could not be decoded.
    case corruptLocalCipher(cipherId: String, reason: String)
    /// A projection checkpoint could not be decoded.
    case corruptCheckpoint(String)
    /// No account of this email is stored on this device.
    case unknownAccount(String)
    /// A stored account record could not be decoded.
    case corruptAccount(userId: String, reason: String)
    /// Offline saving is turned off (a feature flag) and the item still has changes saved
    /// offline earlier that could not be resolved now, so the new change was not saved.
    case pendingChangesNotResolved(cipherId: String, reason: String)
    /// The store location is not a local directory (for example a remote URL).
    case notAFileLocation(String)
    /// An import needs a store without events, and this one holds some.
    case storeNotEmpty(lastSequence: UInt64)
    /// The state asked for is before the user's compaction horizon: the events that led to it
    /// were replaced by a snapshot.
    case compacted(userId: String, sequence: UInt64, horizon: UInt64)
    /// The lock file that keeps resolutions of one user from running at once could not be
    /// created or locked.
    case resolutionLock(path: String, reason: String)
    /// The user's log is older than the position the app kept outside the store (see
    /// `VaultLogStore.checkLogPosition(userId:remembered:)`): the file was put back.
    case rolledBack(userId: String, reason: String)
    /// A restore from the trash of an item that is not in the trash on this device (or not on
    /// it at all); nothing was written.
    case cannotRestore(cipherId: String, reason: String)

    /// What went wrong, the user or item it concerns when there is one, and what to do next.
    public var description: String {
        switch self {
        case .vaultLocked(let userId):
            return "the vault of user \(userId) is locked: unlock it (master password or user key) and try again"
        case .corruptEvent(let sequence, let reason):
            return "event \(sequence) is corrupt (\(reason)); the store file was damaged: an integrity check (VaultLogStore.verify) gives a full report"
        case .missingCipherId:
            return "the item has no id; save it first"
        case .corruptLocalCipher(let cipherId, let reason):
            return "local copy of item \(cipherId) is corrupt (\(reason)); a full sync will replace it"
        case .unknownAccount(let email):
            return "no account for \(email) is stored here: log in online once on this device (or unlock with the user key)"
        case .corruptAccount(let userId, let reason):
            return "the stored account of user \(userId) is unreadable (\(reason)); log in online again to replace it"
        case .pendingChangesNotResolved(let cipherId, let reason):
            return "item \(cipherId) has changes saved offline that could not be sent (\(reason)); offline saving is turned off, so this change was not saved: sync when the server is reachable, then try again"
        case .notAFileLocation(let location):
            return "\(location) is not a local directory: open the store with a file URL or a path"
        case .storeNotEmpty(let lastSequence):
            return "the store already holds events (up to sequence \(lastSequence)); import only into a new or empty store (nothing was changed)"
        case .compacted(let userId, let sequence, let horizon):
            return "the log of user \(userId) is compacted before sequence \(horizon): the state at sequence \(sequence) is no longer kept (a retention policy replaced the events up to \(horizon) with a snapshot); ask for sequence \(horizon) or later"
        case .resolutionLock(let path, let reason):
            return "cannot lock \(path) (\(reason)), which keeps two resolutions of one account from running at once; check that the store's directory is writable (nothing was sent or changed)"
        case .rolledBack(let userId, let reason):
            return "the log of user \(userId) is older than the app last saw it (\(reason)): the store file, or this user's records in it, were put back to an older copy, and edits saved since are not in it; restore the newest copy of the store, or sync and accept that the edits since are lost (nothing was changed)"
        case .cannotRestore(let cipherId, let reason):
            return "item \(cipherId) cannot be restored from the trash: \(reason) (nothing was changed)"
        case .corruptCheckpoint(let reason):
            return "projection checkpoint is unreadable (\(reason)); it will be rebuilt from the log"
        }
    }
}
