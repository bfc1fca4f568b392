import EventLog
import Foundation
import VaultModel

extension VaultLogStore {
    // MARK: Outcomes that cover only what they saw

    /// What ``appendOutcomes(userId:cipherId:coveredThrough:events:localChanges:)`` wrote.
    struct OutcomeAppend: Sendable {
        /// The sequence of each event, in order; nil for one left out.
        var sequences: [UInt64?]
        /// An operation on the item was appended after the covered sequence (a save made while
        /// the resolution ran, in this process or another): the finishing events and the local
        /// changes were left out, and the item stays pending with its newer version.
        var superseded: Bool
    }

    /// Appends a resolver's outcome events for `cipherId` and applies `localChanges`, in one
    /// durable transaction, only as far as they are still true when it commits.
    ///
    /// The resolver decided on the item's versions up to `coveredThrough`. If the log holds an
    /// operation on the item after it (checked inside the write transaction, which LMDB makes
    /// the only one across processes), the events that end the pending state (`resolved`, and
    /// a discard: the user decided on an older version) and the local changes (which would put
    /// the server's copy of an older version over the newer local one) are left out; the other events (what the server did) are still recorded, so
    /// no step is repeated.
    /// `ifCurrent` runs in the same transaction only when nothing was left out (local effects
    /// that, like `localChanges`, hold only for the versions decided on);
    /// `alsoInTransaction` runs in the same transaction whatever was left out (it records what
    /// the server did).
    func appendOutcomes(userId: String, cipherId: String, coveredThrough: UInt64, events: [PlannedEvent],
                        localChanges: [LocalChange],
                        ifCurrent: (@Sendable (LogTransaction) throws -> Void)? = nil,
                        alsoInTransaction: (@Sendable (LogTransaction) throws -> Void)? = nil) async throws -> OutcomeAppend {
        let (keys, newEvents, encodedChanges) = try prepare(userId: userId, events: events, localChanges: localChanges)
        let finishing = events.map { [.resolved, .clearedAfterOnlineSuccess, .changeDiscarded, .folderResolved, .folderChangeDiscarded].contains($0.type) }
        let result = try await log.writeAsync { txn -> OutcomeAppend in
            let superseded = try Self.hasOperation(txn.reader, userId: userId, cipherId: cipherId, after: coveredThrough)
            var kept: [NewEvent] = []
            var positions: [Int] = []
            for (i, event) in newEvents.enumerated() where !(superseded && finishing[i]) {
                kept.append(event)
                positions.append(i)
            }
            if !superseded {
                for change in encodedChanges { try self.apply(change, in: txn) }
                try ifCurrent?(txn)
            }
            try alsoInTransaction?(txn)
            var sequences = [UInt64?](repeating: nil, count: newEvents.count)
            if !kept.isEmpty {
                for (position, sequence) in zip(positions, try self.appendMarked(kept, userId: userId, key: keys.sealing, in: txn)) { sequences[position] = sequence }
            }
            return OutcomeAppend(sequences: sequences, superseded: superseded)
        }
        notifyObservers(userId: userId)
        return result
    }

    /// Whether the log holds an operation (create, edit, trash move, delete; of a folder too) on the item after
    /// `sequence`.
    static func hasOperation(_ reader: LogReader, userId: String, cipherId: String, after sequence: UInt64) throws -> Bool {
        for later in try reader.sequences(userId: userId, cipherId: cipherId, after: sequence) {
            var isOperation = false
            try reader.forEachHeader(from: later, to: later) { header in
                isOperation = VaultEventType(rawValue: header.eventType).map { $0.isOperation || $0.kind == .folderOperation } ?? true
                return false
            }
            if isOperation { return true }
        }
        return false
    }
}
