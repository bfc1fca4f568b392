import Foundation
import LMDB
import VaultCrypto

/// The reads behind each user's chain: what an append chains onto, what a fold checks its
/// links and its end against, the head records.
extension LogReader {
    /// The MAC a user's next event chains onto: the sealed head record's chain value (checked
    /// with `key`), or, for a user whose last event is of format 1 (a store upcast from it),
    /// that event's MAC; 32 zero bytes for a user with no event. Following the head rather
    /// than the last event keeps a deleted tail detectable after later appends (the next event
    /// names the missing one as its previous). A user whose last event is chained (format 2)
    /// has a head record, written with every append: without one the head was removed, perhaps
    /// with the events after it, and chaining onto what is left would hide that, so the append
    /// is refused.
    func chainTip(userId: String, key: SealingKey) throws -> [UInt8] {
        if let head = try head(userId: userId, key: key, outcome: "nothing was written") { return head.chain }
        guard let last = try lastSequence(userId: userId), let envelope = try envelope(at: last) else {
            return Envelope.chainStart
        }
        try Self.checkIndexed(envelope.header, sequence: last, userId: userId)
        if envelope.header.formatVersion >= 2, store.heads != nil {
            throw EventLogError.headRecord("user \(userId) has chained events (the last one left is \(last)) but no head record: the head record, and perhaps events after \(last), were removed from the file; nothing was written: run 'vaultlog verify' for a full report")
        }
        return Array(envelope.mac)
    }

    /// The value an event of `userId` after `sequence` chains onto, for a reader that checks a
    /// fold's links from `sequence` on: the chain's start at 0, the compaction snapshot's chain
    /// value at its horizon, else the stored MAC of the user's event at `sequence`. Nil when
    /// none of those is there (the event was removed, or is another user's).
    package func chainValue(userId: String, at sequence: UInt64) throws -> ChainMAC? {
        if sequence == 0 { return ChainMAC(Envelope.chainStart) }
        if let snapshot = try snapshotInfo(userId: userId), snapshot.horizon == sequence { return ChainMAC(snapshot.chain) }
        guard let envelope = try envelope(at: sequence), envelope.header.userId == userId else { return nil }
        return envelope.chainValue
    }

    /// The user's head record, authenticated with `key`: the sequence of the user's last event
    /// and its chain value; nil when the user has none (no event yet, or a store whose events
    /// are all of format 1). Throws when it is there but malformed or does not authenticate.
    /// `outcome` is said in the error (what the caller did not do). With no key (a locked
    /// vault) the record is read without its MAC checked.
    package func head(userId: String, key: SealingKey?, outcome: String) throws -> (lastSequence: UInt64, chain: [UInt8])? {
        guard let db = store.heads, let bytes = try transaction.get(db, key: IndexKey.checkpointPrefix(userId)) else { return nil }
        guard let head = HeadRecord(bytes: bytes), head.userId == userId else {
            throw EventLogError.headRecord("the head record of user \(userId) is malformed; \(outcome): run 'vaultlog verify' for a full report")
        }
        guard let key else { return (head.lastSequence, head.chain) }
        guard head.authenticate(bytes, key: key) else {
            throw EventLogError.headRecord("the head record of user \(userId) failed authentication (wrong key or tampered file); \(outcome): run 'vaultlog verify' for a full report")
        }
        return (head.lastSequence, head.chain)
    }

    /// What a batch of `users`' events appended now is sealed against: the last sequence and
    /// each user's chain tip.
    func sealingBase(for users: [String], key: SealingKey) throws -> SealingBase {
        var tips: [String: [UInt8]] = [:]
        for user in users { tips[user] = try chainTip(userId: user, key: key) }
        return SealingBase(lastSequence: try lastSequence(), tips: tips)
    }

    /// Every stored head record, by user id, as stored (sealed; for `vaultlog export`).
    public func sealedHeads() throws -> [String: [UInt8]] {
        guard let db = store.heads else { return [:] }
        var out: [String: [UInt8]] = [:]
        try transaction.scan(db) { _, value in
            let bytes = Array(value)
            if let head = HeadRecord(bytes: bytes) { out[head.userId] = bytes }
            return true
        }
        return out
    }

    /// ``forEachHeader(userId:after:_:)`` with each event's stored MAC, the chain value the
    /// user's next event names (not checked: that needs the key).
    package func forEachHeaderAndMAC(userId: String, after: UInt64 = 0, _ body: (EventHeader, ChainMAC) throws -> Bool) throws {
        try forEachIndexedEvent(userId: userId, after: after) { sequence, value in
            let (header, headerLength) = try Envelope.parseHeader(raw: value, userId: userId)
            try Self.checkIndexed(header, sequence: sequence, userId: userId)
            try Envelope.checkBody(count: value.count, headerLength: headerLength, version: header.formatVersion, sequence: sequence)
            return try body(header, Envelope.storedMAC(raw: value, headerLength: headerLength))
        }
    }
}
