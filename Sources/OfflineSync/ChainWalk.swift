import EventLog

/// A fold's check that the user's events are the chain their writer made: every event names
/// the stored MAC of the user's event before it (format 2), and the fold ends where the sealed
/// head record says the user's log ends. A removed, moved or put-back event, a removed tail
/// or a head that names another end is ``EventLogError/chainBroken(userId:sequence:reason:)``:
/// the fold stops, so sync, the resolver and the repository never act on pending state read
/// from a log with gaps (an event that does not authenticate still only quarantines its item).
///
/// The check costs a comparison of 32 bytes per event (the fold reads the header and the MAC
/// anyway); where a fold starts, one point read (the event it resumes after) and, unless it
/// resumes from the projection the store keeps, three more (the log's beginning); at its end,
/// the head record and its HMAC; for a user with no trace of a log, the account record (its
/// log mark).
struct ChainWalk {
    let userId: String
    /// What the next event must name as its previous; nil after an event that did not
    /// authenticate (its stored MAC may be what was damaged: the next link is not judged, as
    /// `verify` reports no chain break right after damage), or before a fold that starts
    /// again from the compaction snapshot.
    var tip: ChainMAC?
    /// Whether the last event walked is chained (format 2 or later): such a user has a head.
    var lastChained = false

    /// The walk of `userId`'s events after `sequence`, which the projection a fold starts from
    /// was brought up to. `checkingBeginning` false: that projection is one this process folded
    /// with its beginning checked already (the store's cached projection).
    static func start(_ reader: LogReader, userId: String, after sequence: UInt64, checkingBeginning: Bool = true) throws -> ChainWalk {
        if checkingBeginning { try checkBeginning(reader, userId: userId) }
        if let tip = try reader.chainValue(userId: userId, at: sequence) { return ChainWalk(userId: userId, tip: tip) }
        // Compacted past it: the fold starts again from the snapshot (``restart(_:at:)``).
        guard try reader.horizon(userId: userId) <= sequence else { return ChainWalk(userId: userId, tip: nil) }
        throw EventLogError.chainBroken(userId: userId, sequence: sequence,
                                        reason: "the user's event \(sequence), which the pending state was last brought up to, is gone")
    }

    /// Checks that the user's first event starts the chain, or follows the compaction snapshot
    /// when the log was compacted: a fold that starts from a checkpoint would not notice the
    /// first events, or the snapshot that replaced them, removed.
    static func checkBeginning(_ reader: LogReader, userId: String) throws {
        guard let first = try reader.firstSequence(userId: userId), let envelope = try reader.envelope(at: first),
              envelope.header.userId == userId, let previous = envelope.header.chainMAC else { return }
        let snapshot = try reader.snapshotInfo(userId: userId)
        guard previous == ChainMAC(snapshot?.chain ?? Envelope.chainStart) else {
            throw EventLogError.chainBroken(userId: userId, sequence: first, reason: snapshot == nil
                ? "the user's first event left does not start the chain: the events before it, or the compaction snapshot that replaced them, were removed"
                : "the user's first event after the compaction snapshot does not follow it: events after the snapshot were removed")
        }
    }

    /// Starts again at the compaction snapshot's horizon (the fold restarts from the snapshot).
    mutating func restart(_ reader: LogReader, at horizon: UInt64) throws {
        tip = try reader.chainValue(userId: userId, at: horizon)
        lastChained = false
    }

    /// Checks that the event of `header` chains onto the tip and moves on to it. `mac`: its
    /// stored MAC; `authenticated`: whether that MAC matched.
    mutating func step(_ header: EventHeader, mac: ChainMAC?, authenticated: Bool) throws {
        try step(sequence: header.sequence, previous: header.chainMAC, mac: mac, authenticated: authenticated)
    }

    /// ``step(_:mac:authenticated:)`` with the two fields of the header it reads (a fold passes
    /// them without copying the header, strings and all).
    mutating func step(sequence: UInt64, previous chainMAC: ChainMAC?, mac: ChainMAC?, authenticated: Bool) throws {
        if authenticated, let tip, let previous = chainMAC, previous != tip {
            throw EventLogError.chainBroken(userId: userId, sequence: sequence, reason:
                "it does not follow the user's event before it in the log (an event between them was removed, or this one was moved or put back)")
        }
        tip = authenticated ? mac : nil
        lastChained = chainMAC != nil
    }

    /// Checks, where a fold of events up to `bound` ended (at the user's event `end`), that the log ends
    /// where the user's head record says (in `reader`'s view, after the fold's reads): not
    /// earlier (a removed tail) and not at another event. A head past the fold's end is fine
    /// when its event is there (an append after the fold read its last batch).
    /// With no `key` (a locked vault's pending count) the head record is read unauthenticated.
    /// `noLog` runs when no trace of the user's log is left (no event, head or snapshot): it
    /// throws when something outside the log says the log was started (the account's mark).
    func finish(_ reader: LogReader, end: UInt64, bound: UInt64, key: SealingKey?, noLog: (LogReader) throws -> Void) throws {
        guard let head = try reader.head(userId: userId, key: key, outcome: "nothing acts on the pending changes") else {
            guard !lastChained, try reader.horizon(userId: userId) == 0 else {
                throw EventLogError.chainBroken(userId: userId, sequence: end, reason: "the user's head record, which names the last event, is gone")
            }
            if try reader.firstSequence(userId: userId) == nil { try noLog(reader) }  // no head, no snapshot, no event
            return
        }
        if head.lastSequence > end {
            // Past the fold's bound (a state as of an earlier sequence), or appended after the
            // fold read its last batch: then its event is there, and the next fold reads it.
            if head.lastSequence > bound { return }
            if let last = try reader.envelope(at: head.lastSequence), last.header.userId == userId { return }
            throw EventLogError.chainBroken(userId: userId, sequence: head.lastSequence, reason:
                "the head record names event \(head.lastSequence) as the user's last, and the log ends at \(end): the events after \(end) were removed")
        }
        guard head.lastSequence == end else {
            throw EventLogError.chainBroken(userId: userId, sequence: end, reason:
                "the log goes on past event \(head.lastSequence), which the head record names as the user's last")
        }
        if let tip, tip != ChainMAC(head.chain) {
            throw EventLogError.chainBroken(userId: userId, sequence: end, reason: "it is not the event the head record names as the user's last")
        }
    }
}
