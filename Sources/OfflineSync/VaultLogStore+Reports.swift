import EventLog
import Foundation
import VaultModel

extension VaultLogStore {
    // MARK: Resolution records

    /// What the resolver did to the user's items after sequence `after`, in log order (one
    /// record per backup, push, dropped delete, ...; see ``ResolutionRecord``). Needs the vault
    /// unlocked. Records are the log's own outcome events, so they survive a relaunch and every
    /// process on the store reads the same ones; a retention policy removes them with the
    /// events they were made from.
    ///
    /// Beside other callers: one read transaction; a resolution running meanwhile (here or in
    /// another process) shows in the next call.
    public func resolutionRecords(userId: String, after: UInt64 = 0) throws -> [ResolutionRecord] {
        let keys = try keys(userId)
        return try log.read { reader in
            var sequences: [UInt64] = []
            try reader.forEachHeader(userId: userId, after: after) { header in
                if ResolutionRecord.reportedTypes.contains(header.eventType) { sequences.append(header.sequence) }
                return true
            }
            return try sequences.compactMap { sequence in
                guard let envelope = try reader.envelope(at: sequence) else { return nil }
                return ResolutionRecord(try VaultEvent(envelope: envelope, key: keys.sealing))
            }
        }
    }

    /// The sequence through which the app marked the user's records as reviewed (0 when it
    /// never did): the highest mark of the ``VaultEventType/reportsReviewed`` events. Needs the
    /// vault unlocked.
    public func reviewedThrough(userId: String) throws -> UInt64 {
        let keys = try keys(userId)
        return try log.read { reader in
            var marks: [UInt64] = []
            try reader.forEachHeader(userId: userId) { header in
                if header.eventType == VaultEventType.reportsReviewed.rawValue { marks.append(header.sequence) }
                return true
            }
            return try marks.compactMap { sequence in
                guard let envelope = try reader.envelope(at: sequence) else { return nil }
                return try VaultEvent(envelope: envelope, key: keys.sealing).outcome?.sourceSequence
            }.max() ?? 0
        }
    }

    /// The records the app has not marked as reviewed yet (after ``reviewedThrough(userId:)``).
    public func unreviewedResolutionRecords(userId: String) throws -> [ResolutionRecord] {
        try resolutionRecords(userId: userId, after: reviewedThrough(userId: userId))
    }

    /// Marks the user's records through `sequence` as reviewed: appends a
    /// ``VaultEventType/reportsReviewed`` event (durable, sealed), so every process on the
    /// store, and this app after a relaunch, agrees on what is new. A mark never moves back:
    /// a `sequence` at or before the current mark appends nothing.
    ///
    /// Beside other callers: two marks at once both append; the higher one wins.
    public func markResolutionRecordsReviewed(userId: String, through sequence: UInt64) async throws {
        guard sequence > (try reviewedThrough(userId: userId)) else { return }
        try await append(userId: userId, cipherId: "", type: .reportsReviewed, body: .outcome(OutcomeBody(
            at: BitwardenDate(dependencies.now()), reason: "resolution records reviewed", sourceSequence: sequence)))
    }
}
