import EventLog
import Foundation
import VaultCrypto

/// Export and import of a whole store as JSON Lines (``ExportFormat``): what `vaultlog export`
/// and `vaultlog import` run, and what an app can run to hand a support engineer its log.
extension VaultLogStore {
    /// Writes the whole store as an export: the metadata line, then one line per sealed
    /// envelope in sequence order, all from one consistent snapshot. The envelopes stay sealed:
    /// an export holds no plaintext and needs no key.
    ///
    /// - Parameters:
    ///   - write: receives the export in order, in chunks of about 1 MiB (the last one smaller).
    ///   - progress: called with (events written, events in the export) every 4,096 events
    ///     and once at the end. An error it throws stops the export and is rethrown (how a
    ///     caller cancels).
    /// - Returns: the number of events written.
    @discardableResult
    public func writeExport(_ write: (UnsafeRawBufferPointer) throws -> Void,
                            progress: ((_ written: Int, _ total: Int) throws -> Void)? = nil) throws -> Int {
        let accounts = try storedAccounts()
        return try log.read { reader -> Int in
            let total = try reader.eventCount()
            let metadata = ExportFormat.Metadata(
                format: ExportFormat.name, version: ExportFormat.version,
                storeFormatVersion: EventLogStore.storeFormatVersion, envelopeFormatVersion: Envelope.currentFormatVersion,
                eventCount: total, lastSequence: try reader.lastSequence(), accounts: accounts,
                heads: try reader.sealedHeads().mapValues { Base64.encode($0) },
                snapshots: try reader.sealedSnapshotRecords().map { Base64.encode($0) }.nilIfEmpty)
            var buffer = [UInt8]()
            buffer.reserveCapacity(1 << 20 + 1 << 16)
            buffer.append(contentsOf: try ExportFormat.encode(metadata).utf8)
            buffer.append(UInt8(ascii: "\n"))
            var written = 0
            try reader.forEachEnvelope(from: 1, to: .max) { envelope in
                ExportFormat.appendLine(for: envelope, to: &buffer)
                buffer.append(UInt8(ascii: "\n"))
                written += 1
                if buffer.count >= 1 << 20 {
                    try buffer.withUnsafeBytes(write)
                    buffer.removeAll(keepingCapacity: true)
                }
                if written % 4096 == 0 { try progress?(written, total) }
                return true
            }
            try buffer.withUnsafeBytes(write)
            try progress?(written, total)
            return written
        }
    }

    /// Writes every envelope of an export into this store, with its original sequences and
    /// bytes (so they still verify under the original keys), in one transaction: all or
    /// nothing. Every line is checked as it is written (a bad one throws an
    /// ``ExportFile/Problem`` and nothing is committed), so `file` may be opened with
    /// `checkingEveryLine: false` for a single pass. Then saves its accounts, so the copy
    /// unlocks with the master password too.
    ///
    /// The store must hold no events (``OfflineSyncError/storeNotEmpty(lastSequence:)`` otherwise;
    /// nothing is changed). Open it with a map size of at least
    /// ``ExportFile/suggestedMapSize`` so the transaction never has to grow the map.
    ///
    /// - Parameters:
    ///   - file: the export, checked when it was opened.
    ///   - progress: called with (events written, events in the file) every 4,096 events and
    ///     once at the end. An error it throws stops the import before anything is committed,
    ///     and is rethrown (how a caller cancels).
    public func importEvents(from file: ExportFile, progress: ((_ written: Int, _ total: Int) throws -> Void)? = nil) throws {
        let total = file.metadata.eventCount
        // The closure runs again if the map has to grow, so it reads the file again.
        try log.write { txn in
            let existing = try txn.lastSequence()
            guard existing == 0 else { throw OfflineSyncError.storeNotEmpty(lastSequence: existing) }
            var written = 0
            try file.forEachEnvelope { envelope, _ in
                try txn.appendSealed(envelope)
                written += 1
                if written % 4096 == 0 { try progress?(written, total) }
            }
            for record in file.snapshots { try txn.putSealedSnapshotRecord(record) }
            if !file.snapshots.isEmpty { try txn.raiseLastSequence(to: file.metadata.lastSequence) }
            for (user, head) in file.heads { try txn.putSealedHead(userId: user, bytes: head) }
            try progress?(written, total)
        }
        for account in file.metadata.accounts { try saveAccount(account) }
    }
}

extension Array {
    /// nil for an empty array (an optional field left out of JSON).
    var nilIfEmpty: Self? { isEmpty ? nil : self }
}
