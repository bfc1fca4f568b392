import EventLog
import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultModel

extension VaultLogStore {
    // MARK: Events

    /// Appends one event and applies `localChanges` in the same durable write transaction:
    /// both commit or neither does. Blocks until the commit is durable (for synchronous
    /// callers; async code uses the `async` form of the same name).
    @discardableResult
    @_spi(Tools) public func append(userId: String, cipherId: String, type: VaultEventType, body: VaultEvent.Body,
                       localChanges: [LocalChange] = []) throws -> UInt64 {
        try append(userId: userId, events: [PlannedEvent(cipherId: cipherId, type: type, body: body)],
                   localChanges: localChanges, beforeCommit: nil).last!
    }

    /// An event to append with `append(userId:events:localChanges:)`.
    public struct PlannedEvent: Sendable {
        /// The item the event is about.
        public var cipherId: String
        /// The event type.
        public var type: VaultEventType
        /// The body, sealed when the event is appended.
        public var body: VaultEvent.Body

        /// An event for `cipherId`.
        public init(cipherId: String, type: VaultEventType, body: VaultEvent.Body) {
            self.cipherId = cipherId
            self.type = type
            self.body = body
        }
    }

    /// Appends several events and applies `localChanges`, all in one durable transaction
    /// (blocking; see the single-event form).
    @discardableResult
    @_spi(Tools) public func append(userId: String, events: [PlannedEvent], localChanges: [LocalChange] = []) throws -> [UInt64] {
        try append(userId: userId, events: events, localChanges: localChanges, beforeCommit: nil)
    }

    /// The blocking append with a hook that runs inside the transaction after the writes and
    /// before the commit (tests throw there to prove that nothing of a failed commit stays).
    /// Package plumbing, not part of the library's API.
    @discardableResult
    package func append(userId: String, events: [PlannedEvent], localChanges: [LocalChange],
                        beforeCommit: ((LogTransaction) throws -> Void)?) throws -> [UInt64] {
        // Grouped: saves from several threads (the app, an extension, the resolver's outcomes)
        // share a commit and its device flushes; each returns once its own save is durable.
        // Announced before it is prepared, so a commit about to start can wait for it.
        let sequences = try log.announcingWrite {
            let (keys, newEvents, encodedChanges) = try prepare(userId: userId, events: events, localChanges: localChanges)
            return try log.writeGrouped { txn -> [UInt64] in
                for change in encodedChanges { try apply(change, in: txn) }
                let sequences = try appendMarked(newEvents, userId: userId, key: keys.sealing, in: txn)
                try beforeCommit?(txn)
                return sequences
            }
        }
        notifyObservers(userId: userId)
        if let last = sequences.last { saveDueCheckpoints(userId: userId, lastSequence: last) }
        return sequences
    }

    /// Appends one event and applies `localChanges` in one durable transaction, from async
    /// code: the commit and its flushes run on the log's writer thread, so no Swift
    /// concurrency thread blocks on them. (The same name without `await` is the blocking form,
    /// for synchronous callers; in async code the compiler picks this one.)
    @discardableResult
    @_spi(Tools) public func append(userId: String, cipherId: String, type: VaultEventType, body: VaultEvent.Body,
                       localChanges: [LocalChange] = []) async throws -> UInt64 {
        try await append(userId: userId, events: [PlannedEvent(cipherId: cipherId, type: type, body: body)],
                         localChanges: localChanges).last!
    }

    /// Appends several events and applies `localChanges` in one durable transaction, from async
    /// code, on the log's writer thread (see the single-event form).
    @discardableResult
    @_spi(Tools) public func append(userId: String, events: [PlannedEvent], localChanges: [LocalChange] = []) async throws -> [UInt64] {
        try await append(userId: userId, events: events, localChanges: localChanges, alsoInTransaction: nil)
    }

    /// The async append with `alsoInTransaction` run in the same write transaction after the
    /// local changes (a write that must read the store as it is at the commit).
    func append(userId: String, events: [PlannedEvent], localChanges: [LocalChange],
                alsoInTransaction: (@Sendable (LogTransaction) throws -> Void)?) async throws -> [UInt64] {
        let (keys, newEvents, encodedChanges) = try prepare(userId: userId, events: events, localChanges: localChanges)
        let sequences = try await log.writeAsync { txn -> [UInt64] in
            for change in encodedChanges { try self.apply(change, in: txn) }
            try alsoInTransaction?(txn)
            return try self.appendMarked(newEvents, userId: userId, key: keys.sealing, in: txn)
        }
        notifyObservers(userId: userId)
        if let last = sequences.last { await saveDueCheckpoints(userId: userId, lastSequence: last) }
        return sequences
    }

    /// The events to append and the local changes, encoded outside the write transaction. An
    /// operation whose cipher is also a local upsert of the same save (the usual offline edit)
    /// reuses that upsert's JSON.
    func prepare(userId: String, events: [PlannedEvent],
                         localChanges: [LocalChange]) throws -> (UnlockedKeys, [NewEvent], [EncodedLocalChange]) {
        let keys = try keys(userId)
        let encodedChanges = try localChanges.map { try Self.encode($0, userId: userId) }
        let newEvents = try events.map { event -> NewEvent in
            let at: Date
            let body: [UInt8]
            switch event.body {
            case .operation(let op):
                at = op.at.date
                let shared = zip(localChanges, encodedChanges).first { change, _ in
                    if case .upsert(let cipher) = change { return cipher == op.cipher }
                    return false
                }
                body = try VaultEvent.encodeOperation(op, cipherJSON: shared?.1.value ?? VaultEvent.encodeCipher(op.cipher))
            case .outcome(let outcome):
                at = outcome.at.date
                body = try VaultEvent.encode(event.body)
            }
            return NewEvent(userId: userId, cipherId: event.cipherId, eventType: event.type.rawValue,
                            recordedAtMillis: Self.millis(at), body: body)
        }
        return (keys, newEvents, encodedChanges)
    }

    /// Milliseconds since 1970 for an envelope header; a date outside Int64's range (only a
    /// crafted clock can make one) is clamped instead of trapping.
    static func millis(_ date: Date) -> Int64 {
        let millis = (date.timeIntervalSince1970 * 1000).rounded()
        guard millis.isFinite else { return millis > 0 ? .max : .min }
        return Int64(exactly: millis) ?? (millis > 0 ? .max : .min)
    }

    /// Decoded events of a user (optionally one item), in order. Needs the key.
    @_spi(Tools) public func events(userId: String, cipherId: String? = nil, after: UInt64 = 0) throws -> [VaultEvent] {
        let keys = try keys(userId)
        return try log.envelopes(userId: userId, cipherId: cipherId, after: after).map { try VaultEvent(envelope: $0, key: keys.sealing) }
    }

    /// One decoded event by sequence (e.g. an intermediate version of an item).
    @_spi(Tools) public func event(at sequence: UInt64, userId: String) throws -> VaultEvent? {
        let keys = try keys(userId)
        guard let envelope = try log.envelope(at: sequence) else {
            // Compacted: an event of a change pending at the horizon is carried in the snapshot.
            guard sequence <= (try horizon(userId: userId)) else { return nil }
            return try carriedEvent(at: sequence, userId: userId, key: keys.sealing)
        }
        guard envelope.header.userId == userId else { return nil }
        return try VaultEvent(envelope: envelope, key: keys.sealing)
    }
}
