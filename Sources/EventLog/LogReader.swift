import Crypto
import Foundation
import LMDB
import Synchronization
import Logging
import VaultCrypto

/// A read view of the log within one transaction.
public struct LogReader {
    /// The underlying LMDB transaction: the package's own plumbing, never API (the domain
    /// reaches its tables through ``SideTable``).
    package let transaction: Transaction
    let store: EventLogStore

    /// The last sequence ever assigned (0 when empty): the last event's, or the high-water mark
    /// a compaction left when it removed the last events, so no sequence is ever reused.
    public func lastSequence() throws -> UInt64 {
        let last = try transaction.withCursor(store.events) { cursor -> UInt64 in
            guard let last = try cursor.last() else { return 0 }
            guard last.key.count == 8 else {
                throw EnvelopeError.malformed(sequence: nil, reason: "event key of \(last.key.count) bytes")
            }
            return readBE(last.key, at: 0, as: UInt64.self)
        }
        return Swift.max(last, try highWaterMark())
    }

    /// The highest sequence the store gave out that may no longer be an event: the
    /// `meta["lastSequence"]` mark (set when a compaction removes the log's last event, or an
    /// import of a compacted store ends before the exported last sequence) and every user's
    /// head record (its last event, which a removed tail took along). So a sequence is never
    /// given out twice, also after events were removed from the file.
    func highWaterMark() throws -> UInt64 {
        var mark: UInt64 = 0
        if let bytes = try transaction.get(store.meta, key: LogReader.highWaterKey), bytes.count == 8 {
            mark = bytes.reduce(0) { $0 << 8 | UInt64($1) }
        }
        guard let heads = store.heads else { return mark }
        try transaction.scan(heads) { _, value in
            if let last = HeadRecord.lastSequence(raw: value) { mark = Swift.max(mark, last) }
            return true
        }
        return mark
    }

    static let highWaterKey = Array("lastSequence".utf8)
    static let itemIndexedThroughKey = Array("itemIndexedThrough".utf8)

    /// How far the item index goes: every event up to this sequence has its entry under its
    /// user and item; the events after it are found by their headers (see
    /// ``EventLogOptions/itemIndexMergeInterval``). `UInt64.max` in a store of format 3 or older
    /// opened read-only, whose writer indexed every event's item.
    public func itemIndexedThrough() throws -> UInt64 {
        guard let bytes = try transaction.get(store.meta, key: Self.itemIndexedThroughKey) else { return .max }
        guard bytes.count == 8 else {
            throw EventLogError.corruptMetadata("item index mark of \(bytes.count) bytes (expected 8)")
        }
        return bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// How many events the log holds in this snapshot (LMDB keeps the count: no walk).
    public func eventCount() throws -> Int {
        try transaction.count(store.events)
    }

    /// The sequence an `events` key names.
    static func sequence(ofKey key: UnsafeRawBufferPointer) throws -> UInt64 {
        guard key.count == 8 else { throw EnvelopeError.malformed(sequence: nil, reason: "event key of \(key.count) bytes") }
        return readBE(key, at: 0, as: UInt64.self)
    }

    /// Every read checks that an envelope is the event its key names: the MAC binds the header's
    /// sequence, so a valid envelope copied under another key is not that event (and reading it
    /// as one would make a scan go back to an earlier sequence, forever).
    static func checkKey(_ sequence: UInt64, _ header: EventHeader) throws {
        guard header.sequence == sequence else { throw EnvelopeError.keyMismatch(key: sequence, headerSequence: header.sequence) }
    }

    /// An event reached through a user's index entry must be that user's, under its own key.
    static func checkIndexed(_ header: EventHeader, sequence: UInt64, userId: String) throws {
        try checkKey(sequence, header)
        guard header.userId == userId else {
            throw EnvelopeError.malformed(sequence: sequence, reason: "the index lists it under user \(userId) but its header names user \(header.userId)")
        }
    }

    /// The envelope at `sequence`, or nil.
    public func envelope(at sequence: UInt64) throws -> Envelope? {
        guard let bytes = try transaction.get(store.events, key: sequenceKey(sequence)) else { return nil }
        let envelope = try Envelope(bytes: bytes)
        try Self.checkKey(sequence, envelope.header)
        return envelope
    }

    /// Visits envelopes in `from...to` in order while `body` returns true.
    public func forEachEnvelope(from: UInt64, to: UInt64, _ body: (Envelope) throws -> Bool) throws {
        try transaction.scan(store.events, from: sequenceKey(from)) { key, value in
            let sequence = try Self.sequence(ofKey: key)
            guard sequence <= to else { return false }
            let envelope = try Envelope(bytes: Array(value))
            try Self.checkKey(sequence, envelope.header)
            return try body(envelope)
        }
    }

    /// Visits headers in `from...to` without decoding bodies (works while locked).
    public func forEachHeader(from: UInt64 = 1, to: UInt64 = .max, _ body: (EventHeader) throws -> Bool) throws {
        try transaction.scan(store.events, from: sequenceKey(from)) { key, value in
            let sequence = try Self.sequence(ofKey: key)
            guard sequence <= to else { return false }
            let header = try Envelope.parseHeader(raw: value).header
            try Self.checkKey(sequence, header)
            return try body(header)
        }
    }

    /// Sequences of a user's events (or of one cipher's), in order, after `after`. One cipher's
    /// come from the item index up to ``itemIndexedThrough()`` (the entries of a format 1–4
    /// store in `index`, then each merge's in `items`, one seek per merge) and from the headers
    /// of the events after it.
    public func sequences(userId: String, cipherId: String?, after: UInt64 = 0) throws -> [UInt64] {
        guard after < .max else { return [] }
        guard let cipherId else {
            var out: [UInt64] = []
            try forEachUserEntry(userId: userId, after: after) { sequence, _ in out.append(sequence); return true }
            return out
        }
        let indexedThrough = try itemIndexedThrough()
        var out: [UInt64] = []
        try collect(under: IndexKey.cipherPrefix(userId, cipherId), after: after, through: indexedThrough, into: &out)
        for generation in try itemGenerations() {
            try collectItemEntries(under: ItemIndex.key(generation, userId, cipherId), after: after, through: indexedThrough, into: &out)
        }
        if indexedThrough < .max {
            try forEachUnindexedItemEvent(after: Swift.max(after, indexedThrough)) { sequence, user, cipher in
                if cipher.elementsEqual(cipherId.utf8), user.elementsEqual(userId.utf8) { out.append(sequence) }
            }
        }
        return out
    }

    /// Appends the sequences of the index entries `prefix ‖ sequence` in `after + 1 ... through`.
    private func collect(under prefix: [UInt8], after: UInt64, through: UInt64, into out: inout [UInt64]) throws {
        try transaction.scan(store.index, from: prefix + sequenceKey(after + 1)) { key, _ in
            guard key.count == prefix.count + 8, key.starts(with: prefix) else { return false }
            let sequence = readBE(key, at: prefix.count, as: UInt64.self)
            guard sequence <= through else { return false }
            out.append(sequence)
            return true
        }
    }

    /// Calls `body` with the sequence, user id and cipher id (UTF-8, valid during the call) of
    /// each event after `after` that has a cipher id, in order. An event whose header does not
    /// parse is skipped (``EventLogStore/verify(keys:progress:)`` reports it).
    func forEachUnindexedItemEvent(after: UInt64,
                                   _ body: (UInt64, UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void) throws {
        guard after < .max else { return }
        try transaction.scan(store.events, from: sequenceKey(after + 1)) { key, value in
            guard key.count == 8, let ids = Envelope.headerIds(raw: value), ids.cipher.count > 0 else { return true }
            try body(readBE(key, at: 0, as: UInt64.self), ids.user, ids.cipher)
            return true
        }
    }

    /// The sequence of the user's first event (from the index), or nil.
    package func firstSequence(userId: String) throws -> UInt64? {
        try userEntry(userId: userId, last: false)
    }

    /// The sequence of the user's last event (from the index), or nil.
    public func lastSequence(userId: String) throws -> UInt64? {
        try userEntry(userId: userId, last: true)
    }

    /// Whether the index lists an event of `userId` at `sequence`.
    public func hasEvent(userId: String, at sequence: UInt64) throws -> Bool {
        try hasUserEntry(userId: userId, at: sequence)
    }

    /// Visits the headers of a user's events after `after`, in order, through the index and
    /// without copying bodies (no key needed). Stops when `body` returns false.
    public func forEachHeader(userId: String, after: UInt64 = 0, _ body: (EventHeader) throws -> Bool) throws {
        try forEachIndexedEvent(userId: userId, after: after) { sequence, value in
            let header = try Envelope.parseHeader(raw: value, userId: userId).header
            try Self.checkIndexed(header, sequence: sequence, userId: userId)
            return try body(header)
        }
    }

    /// Whether `key` begins with `prefix` (one `memcmp`: the generic `starts(with:)` walked both
    /// byte by byte for every index entry a fold reads).
    static func bytes(_ key: UnsafeRawBufferPointer, startWith prefix: [UInt8]) -> Bool {
        key.count >= prefix.count && prefix.withUnsafeBytes { p in
            p.isEmpty || memcmp(key.baseAddress!, p.baseAddress!, p.count) == 0
        }
    }

    /// Visits the stored bytes of the user's events after `after`, in order, as the index lists
    /// them, while `body` returns true (an index entry without its event is skipped). The
    /// events are looked up through one cursor: an event right after the previous one found is
    /// the cursor's next entry (a user's events are mostly consecutive), and only any other
    /// costs a search from the root (a B-tree lookup per event was about a sixth of a header fold).
    func forEachIndexedEvent(userId: String, after: UInt64,
                             _ body: (_ sequence: UInt64, _ value: UnsafeRawBufferPointer) throws -> Bool) throws {
        guard after < .max else { return }
        try transaction.withCursor(store.events) { events in
            var previous: UInt64?
            try forEachUserEntry(userId: userId, after: after) { sequence, key in
                var entry: Cursor.Entry?
                if let previous, previous &+ 1 == sequence, let next = try events.next(),
                   next.key.count == 8, readBE(next.key, at: 0, as: UInt64.self) == sequence {
                    entry = next
                } else {
                    entry = try events.find(key)
                }
                guard let entry else {
                    previous = nil
                    return true
                }
                previous = sequence
                return try body(sequence, entry.value)
            }
        }
    }

    /// Up to `limit` of a user's envelopes after `after`, in order (a bounded batch for folds
    /// over long logs; call again after the last one's sequence).
    public func envelopes(userId: String, after: UInt64, limit: Int) throws -> [Envelope] {
        var out: [Envelope] = []
        guard limit > 0 else { return out }
        out.reserveCapacity(Swift.min(limit, 4096))
        try forEachIndexedEvent(userId: userId, after: after) { sequence, value in
            let envelope = try Envelope(bytes: Array(value), userId: userId)
            try Self.checkIndexed(envelope.header, sequence: sequence, userId: userId)
            out.append(envelope)
            return out.count < limit
        }
        return out
    }

    /// ``envelopes(userId:after:limit:)`` without copying: each event where LMDB maps it, valid
    /// only inside this read transaction (see ``MappedEvent``); nothing about them is checked
    /// until each is opened. Internal: the domain uses ``mapEventsInPlace(userId:after:limit:key:parallelThreshold:_:)``.
    func mappedEvents(userId: String, after: UInt64, limit: Int) throws -> [MappedEvent] {
        var out: [MappedEvent] = []
        guard limit > 0 else { return out }
        out.reserveCapacity(Swift.min(limit, 4096))
        try forEachIndexedEvent(userId: userId, after: after) { sequence, value in
            out.append(MappedEvent(sequence: sequence, raw: value))
            return out.count < limit
        }
        return out
    }

    /// The user ids that have events (from the index, no key needed).
    public func userIds() throws -> [String] {
        try indexedUserIds()
    }

    /// See ``EventLogStore/latestCheckpoint(userId:atOrBefore:key:)``.
    public func latestCheckpoint(userId: String, atOrBefore sequence: UInt64, key: SealingKey) throws -> (sequence: UInt64, payload: [UInt8])? {
        let prefix = IndexKey.checkpointPrefix(userId)
        var found: (UInt64, [UInt8])?
        try transaction.scan(store.checkpoints, from: IndexKey.checkpoint(userId, sequence), reverse: true) { k, v in
            guard k.count == prefix.count + 8, k.starts(with: prefix) else { return false }
            found = (readBE(k, at: prefix.count, as: UInt64.self), Array(v))
            return false
        }
        guard let (checkpointSequence, sealed) = found else { return nil }
        let headerLength = Checkpoint.header(userId: userId, sequence: checkpointSequence).count
        guard sealed.count >= headerLength + 64, sealed[0..<headerLength].elementsEqual(Checkpoint.header(userId: userId, sequence: checkpointSequence)) else {
            throw EventLogError.checkpoint("checkpoint of \(userId) at \(checkpointSequence) is malformed")
        }
        do {
            let payload = try Envelope.openBody(sealed, headerLength: headerLength, key: key.checkpoints, sequence: checkpointSequence)
            return (checkpointSequence, payload)
        } catch {
            throw EventLogError.checkpoint("checkpoint of \(userId) at \(checkpointSequence) failed authentication (wrong key or tampered file)")
        }
    }

    /// Sequences of all checkpoints of a user.
    public func checkpointSequences(userId: String) throws -> [UInt64] {
        let prefix = IndexKey.checkpointPrefix(userId)
        var out: [UInt64] = []
        try transaction.scan(store.checkpoints, from: prefix) { k, _ in
            guard k.count == prefix.count + 8, k.starts(with: prefix) else { return false }
            out.append(readBE(k, at: prefix.count, as: UInt64.self))
            return true
        }
        return out
    }
}
