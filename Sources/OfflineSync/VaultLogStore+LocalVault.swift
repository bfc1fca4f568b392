import EventLog
import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultJSON
import VaultModel

/// A change to the local vault cache, committed in the same transaction as its event.
public enum LocalChange: Sendable {
    /// Store this version of the item (by its id), replacing any other. (Indirect: a change is
    /// copied as one reference, not as the cipher's dozens of fields, each retained.)
    indirect case upsert(Cipher)
    /// Remove the item's local copy.
    case delete(cipherId: String)
}

extension VaultLogStore {
    // MARK: Local vault cache

    static func cipherKey(_ userId: String, _ cipherId: String) -> [UInt8] {
        let user = Array(userId.utf8)
        return [UInt8(truncatingIfNeeded: user.count)] + user + Array(cipherId.utf8)
    }

    static func userPrefix(_ userId: String) -> [UInt8] {
        let user = Array(userId.utf8)
        return [UInt8(truncatingIfNeeded: user.count)] + user
    }

    /// The local copy of an item, or nil.
    public func localCipher(userId: String, id: String) throws -> Cipher? {
        try log.read { reader in try Self.localCipher(reader, ciphers, userId, id) }
    }

    static func localCipher(_ reader: LogReader, _ db: SideTable, _ userId: String, _ id: String) throws -> Cipher? {
        guard let bytes = try reader.get(db, key: cipherKey(userId, id)) else { return nil }
        do {
            return try JSONTapeDecoder().decode(Cipher.self, from: bytes)
        } catch {
            throw OfflineSyncError.corruptLocalCipher(cipherId: id, reason: "\(error)")
        }
    }

    /// All local items of a user.
    public func localCiphers(userId: String) throws -> [Cipher] {
        try log.read { reader in
            let prefix = Self.userPrefix(userId)
            var out: [Cipher] = []
            try reader.scan(ciphers, from: prefix) { key, value in
                guard key.starts(with: prefix) else { return false }
                out.append(try Self.decodeLocal(value, key: key, prefix: prefix))
                return true
            }
            return out
        }
    }

    private static func decodeLocal(_ value: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, prefix: [UInt8]) throws -> Cipher {
        do {
            return try JSONTapeDecoder().decode(Cipher.self, from: value)
        } catch {
            throw OfflineSyncError.corruptLocalCipher(cipherId: String(decoding: key.dropFirst(prefix.count), as: UTF8.self), reason: "\(error)")
        }
    }

    /// Moves the user's local items that are in any folder of `folderIds` to no folder, as the
    /// servers do with a deleted folder's items, in a write transaction of its own (see the
    /// in-transaction form). Returns how many were moved.
    @discardableResult
    func moveLocalCopies(userId: String, outOf folderIds: Set<String>) async throws -> Int {
        guard !folderIds.isEmpty else { return 0 }
        return try await log.writeAsync { [self] txn in try moveLocalCopies(userId: userId, outOf: folderIds, in: txn) }
    }

    /// The move of ``moveLocalCopies(userId:outOf:)`` inside `txn`: the copies are read and
    /// written in the same write transaction, so an item saved meanwhile (by this process or
    /// another) is moved as saved, never put back to an older copy. The folders are recorded as
    /// deleted (``markFoldersDeleted(userId:_:in:)``) and left out of the kept folders in the
    /// same transaction.
    func moveLocalCopies(userId: String, outOf folderIds: Set<String>, in txn: LogTransaction) throws -> Int {
        try markFoldersDeleted(userId: userId, folderIds, in: txn)
        try changeKeptFolders(.remove(folderIds), userId: userId, in: txn)
        let needles = folderIds.map { Array($0.utf8) }
        let prefix = Self.userPrefix(userId)
        var moved: [Cipher] = []
        try txn.scan(ciphers, from: prefix) { key, value in
            guard key.starts(with: prefix) else { return false }
            // Only a copy that names one of the ids is decoded.
            guard needles.contains(where: { value.firstRange(of: $0) != nil }) else { return true }
            var cipher = try Self.decodeLocal(value, key: key, prefix: prefix)
            if let folderId = cipher.folderId, folderIds.contains(folderId) {
                cipher.folderId = nil
                moved.append(cipher)
            }
            return true
        }
        for cipher in moved { try apply(.upsert(cipher), userId: userId, in: txn) }
        return moved.count
    }

    func apply(_ change: LocalChange, userId: String, in txn: LogTransaction) throws {
        try apply(try Self.encode(change, userId: userId), in: txn)
    }

    /// A local change with its key and JSON made, so that work stays out of the write
    /// transaction (where a group commit would run it on one thread for every saver).
    struct EncodedLocalChange: Sendable {
        let key: [UInt8]
        /// nil: delete.
        let value: [UInt8]?
    }

    static func encode(_ change: LocalChange, userId: String) throws -> EncodedLocalChange {
        switch change {
        case .upsert(let cipher):
            guard let id = cipher.id else { throw OfflineSyncError.missingCipherId }
            return EncodedLocalChange(key: cipherKey(userId, id), value: try VaultEvent.encodeCipher(cipher))
        case .delete(let id):
            return EncodedLocalChange(key: cipherKey(userId, id), value: nil)
        }
    }

    func apply(_ change: EncodedLocalChange, in txn: LogTransaction) throws {
        if let value = change.value {
            try txn.put(ciphers, key: change.key, value: value)
        } else {
            try txn.delete(ciphers, key: change.key)
        }
    }

    /// Applies local changes without an event (the online path, where the server already has them).
    @_spi(Tools) public func applyLocal(_ changes: [LocalChange], userId: String) throws {
        try log.write { txn in for change in changes { try apply(change, userId: userId, in: txn) } }
    }

    /// ``applyLocal(_:userId:)`` from async code, committed on the log's writer thread.
    @_spi(Tools) public func applyLocal(_ changes: [LocalChange], userId: String) async throws {
        try await log.writeAsync { txn in for change in changes { try self.apply(change, userId: userId, in: txn) } }
    }

    /// Replaces a user's local items with a full sync's, keeping the local copy of every item
    /// that is pending (a sync never hides a pending edit). With `ifLastSequence`, does so only
    /// if the log's last sequence still equals it — checked in the same write transaction, so
    /// an edit appended after the caller counted pending changes is never overwritten.
    /// Returns false when that check failed and nothing was changed. With `folders`, the
    /// folders kept on the device are replaced by them in the same transaction.
    @discardableResult
    @_spi(Tools) public func replaceCiphers(userId: String, ciphers serverCiphers: [Cipher], folders: [ServerFolder]? = nil,
                               ifLastSequence expected: UInt64? = nil,
                               appending event: (type: VaultEventType, body: OutcomeBody)? = nil) throws -> Bool {
        let replaced = try log.write(try replacement(userId: userId, ciphers: serverCiphers, folders: folders, ifLastSequence: expected, appending: event))
        if replaced && event != nil { notifyObservers(userId: userId) }
        return replaced
    }

    /// ``replaceCiphers(userId:ciphers:ifLastSequence:appending:)`` from async code: the
    /// transaction commits on the log's writer thread.
    @discardableResult
    @_spi(Tools) public func replaceCiphers(userId: String, ciphers serverCiphers: [Cipher], folders: [ServerFolder]? = nil,
                               ifLastSequence expected: UInt64? = nil,
                               appending event: (type: VaultEventType, body: OutcomeBody)? = nil) async throws -> Bool {
        let replaced = try await log.writeAsync(
            try replacement(userId: userId, ciphers: serverCiphers, folders: folders, ifLastSequence: expected, appending: event))
        if replaced && event != nil { notifyObservers(userId: userId) }
        return replaced
    }

    /// The write transaction of a sync's replace, for either form.
    private func replacement(userId: String, ciphers serverCiphers: [Cipher], folders serverFolders: [ServerFolder]?, ifLastSequence expected: UInt64?,
                             appending event: (type: VaultEventType, body: OutcomeBody)?) throws
        -> @Sendable (LogTransaction) throws -> Bool {
        let keys = event == nil ? nil : try keys(userId)
        // Unlocked: the authenticated projection, brought up to date inside the transaction.
        let session = sessions.withLock { $0[userId] }
        let projected = try session.map { _ in try projection(userId: userId) }
        return { [self] txn -> Bool in
            let reader = txn.reader
            if let expected, try reader.lastSequence() != expected { return false }
            let pendingIds: [String: PendingChangeType]
            // Folders deleted here and not yet on the server: their items are shown in no folder,
            // as the server will have them.
            var deletedFolders: Set<String> = []
            if var current = projected, let session {
                try foldTail(into: &current, reader: reader, key: session.sealing)
                pendingIds = Self.pendingState(of: current).pending
                for folder in (current.folders ?? [:]).values where folder.change == .delete {
                    deletedFolders.insert(folder.folderId)
                    deletedFolders.insert(current.serverFolderId(folder.folderId))
                }
            } else {
                pendingIds = try headerProjection(reader, userId: userId, fromCheckpoint: false).projection.pending
            }
            let prefix = Self.userPrefix(userId)
            for key in try userKeys(ciphers, userId: userId, in: txn) {
                let id = String(decoding: key.dropFirst(prefix.count), as: UTF8.self)
                if pendingIds[id] == nil { try txn.delete(ciphers, key: key) }
            }
            for var cipher in serverCiphers {
                guard let id = cipher.id, pendingIds[id] == nil else { continue }
                if let folderId = cipher.folderId, deletedFolders.contains(folderId) { cipher.folderId = nil }
                try apply(.upsert(cipher), userId: userId, in: txn)
            }
            if let serverFolders { try replaceKeptFolders(serverFolders, userId: userId, in: txn) }
            if let event, let keys {
                _ = try appendMarked([NewEvent(userId: userId, cipherId: "", eventType: event.type.rawValue,
                                               recordedAtMillis: Self.millis(event.body.at.date),
                                               body: VaultEvent.encode(.outcome(event.body)))],
                                     userId: userId, key: keys.sealing, in: txn)
            }
            return true
        }
    }
}
