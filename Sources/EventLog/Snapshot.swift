import Crypto
import LMDB
import VaultCrypto

/// What a user's compaction snapshot says without a key: where the retained log starts and
/// how it links to what was removed. The sealed payload (the domain's projection at the
/// horizon) needs the key; see ``LogReader/snapshot(userId:key:)``.
public struct SnapshotInfo: Sendable, Equatable {
    /// The user.
    public let userId: String
    /// The horizon: the sequence of the user's last removed event. The state right after it is
    /// in the snapshot; states before it are gone ("compacted before sequence `horizon`").
    public let horizon: UInt64
    /// The MAC of the event at the horizon: the chain value the user's first retained event
    /// names as its previous.
    public let chain: [UInt8]
    /// Events of this user removed by every compaction so far.
    public let removedEvents: UInt64
    /// How many per-item records (kept versions) this snapshot has.
    public let itemCount: Int
    /// What the domain keeps in the clear with the snapshot (covered by its MAC): the state
    /// a locked vault needs at the horizon, computed from plaintext headers only.
    public let state: [UInt8]
}

/// Counts of one compaction's write, from ``LogTransaction/compact(userId:through:payload:state:items:key:)``.
public struct CompactionCounts: Sendable, Equatable {
    /// Events removed.
    public var removedEvents = 0
    /// Index entries removed (by user and by item).
    public var removedIndexEntries = 0
    /// Checkpoints at or before the horizon removed.
    public var removedCheckpoints = 0

    /// No records removed.
    public init() {}
}

/// The bytes of snapshot records, in the `snapshots` database:
///
/// - key `0x01 ‖ userIdLength ‖ userId` → `"VLSN" ‖ 0x01 ‖ userIdLength ‖ userId ‖ horizon(8) ‖
///   chain(32) ‖ removedEvents(8) ‖ itemCount(4) ‖ stateLength(4) ‖ state ‖ IV(16) ‖ MAC(32) ‖ ciphertext`
/// - key `0x02 ‖ userIdLength ‖ userId ‖ cipherIdLength ‖ cipherId` → `"VLSI" ‖ 0x01 ‖
///   userIdLength ‖ userId ‖ cipherIdLength ‖ cipherId ‖ horizon(8) ‖ IV(16) ‖ MAC(32) ‖ ciphertext`
///
/// Both sealed under the snapshot key, the MAC covering the header. Every compaction rewrites
/// all item records of the user with its own horizon, so an item record from an earlier
/// compaction (or another user) does not verify against the current snapshot.
enum SnapshotRecord {
    static let snapshotTag: UInt8 = 0x01
    static let itemTag: UInt8 = 0x02
    static let snapshotMagic = Array("VLSN".utf8)
    static let itemMagic = Array("VLSI".utf8)

    static func key(userId: String) -> [UInt8] { [snapshotTag] + IndexKey.checkpointPrefix(userId) }
    static func itemPrefix(userId: String) -> [UInt8] { [itemTag] + IndexKey.checkpointPrefix(userId) }
    static func itemKey(userId: String, cipherId: String) -> [UInt8] {
        let c = Array(cipherId.utf8.prefix(Envelope.maxIdLength))
        return itemPrefix(userId: userId) + [UInt8(c.count)] + c
    }

    static func header(_ info: SnapshotInfo) -> [UInt8] {
        var out = snapshotMagic + [1]
        let user = Array(info.userId.utf8.prefix(Envelope.maxIdLength))
        out.append(UInt8(user.count))
        out.append(contentsOf: user)
        appendBE(info.horizon, to: &out)
        out.append(contentsOf: info.chain)
        appendBE(info.removedEvents, to: &out)
        appendBE(UInt32(clamping: info.itemCount), to: &out)
        appendBE(UInt32(clamping: info.state.count), to: &out)
        out.append(contentsOf: info.state)
        return out
    }

    /// The plaintext header of a stored snapshot record and its length (nil when it does not parse).
    static func parse(_ bytes: [UInt8]) -> (info: SnapshotInfo, headerLength: Int)? {
        guard bytes.count >= 6, bytes.starts(with: snapshotMagic), bytes[4] == 1 else { return nil }
        let length = Int(bytes[5])
        let fixedLength = 6 + length + 8 + 32 + 8 + 4 + 4
        guard bytes.count >= fixedLength else { return nil }
        let stateLength = Int(bytes[(fixedLength - 4)..<fixedLength].reduce(0) { $0 << 8 | UInt32($1) })
        let headerLength = fixedLength + stateLength
        guard bytes.count >= headerLength + Envelope.ivBytes + Envelope.macBytes + 16,
              (bytes.count - headerLength - Envelope.ivBytes - Envelope.macBytes) % 16 == 0,
              let user = String(validating: bytes[6..<6 + length], as: UTF8.self) else { return nil }
        var offset = 6 + length
        func next(_ n: Int) -> ArraySlice<UInt8> { defer { offset += n }; return bytes[offset..<offset + n] }
        let horizon = next(8).reduce(0) { $0 << 8 | UInt64($1) }
        let chain = Array(next(32))
        let removed = next(8).reduce(0) { $0 << 8 | UInt64($1) }
        let items = next(4).reduce(0) { $0 << 8 | UInt32($1) }
        offset += 4
        let state = Array(bytes[offset..<headerLength])
        return (SnapshotInfo(userId: user, horizon: horizon, chain: chain, removedEvents: removed, itemCount: Int(items), state: state), headerLength)
    }

    static func itemHeader(userId: String, cipherId: String, horizon: UInt64) -> [UInt8] {
        var out = itemMagic + [1]
        let user = Array(userId.utf8.prefix(Envelope.maxIdLength))
        out.append(UInt8(user.count))
        out.append(contentsOf: user)
        let cipher = Array(cipherId.utf8.prefix(Envelope.maxIdLength))
        out.append(UInt8(cipher.count))
        out.append(contentsOf: cipher)
        appendBE(horizon, to: &out)
        return out
    }

    /// User, item and horizon of a stored item record, and its header length (nil when it does not parse).
    static func parseItem(_ bytes: [UInt8]) -> (userId: String, cipherId: String, horizon: UInt64, headerLength: Int)? {
        guard bytes.count >= 7, bytes.starts(with: itemMagic), bytes[4] == 1 else { return nil }
        let userLength = Int(bytes[5])
        guard bytes.count > 6 + userLength else { return nil }
        let cipherLength = Int(bytes[6 + userLength])
        let headerLength = 7 + userLength + cipherLength + 8
        guard bytes.count >= headerLength + Envelope.ivBytes + Envelope.macBytes + 16,
              (bytes.count - headerLength - Envelope.ivBytes - Envelope.macBytes) % 16 == 0,
              let user = String(validating: bytes[6..<6 + userLength], as: UTF8.self),
              let cipher = String(validating: bytes[(7 + userLength)..<(7 + userLength + cipherLength)], as: UTF8.self)
        else { return nil }
        let horizon = bytes[(headerLength - 8)..<headerLength].reduce(0) { $0 << 8 | UInt64($1) }
        return (user, cipher, horizon, headerLength)
    }
}

extension LogReader {
    /// The user's compaction snapshot as stored, unauthenticated (no key needed: for counts,
    /// `vaultlog info` and the chain check); nil when the user's log was never compacted.
    /// Throws when a record is there but does not parse.
    public func snapshotInfo(userId: String) throws -> SnapshotInfo? {
        guard let db = store.snapshots, let bytes = try transaction.get(db, key: SnapshotRecord.key(userId: userId)) else { return nil }
        guard let (info, _) = SnapshotRecord.parse(bytes), info.userId == userId else {
            throw EventLogError.snapshot("the compaction snapshot of user \(userId) is malformed; its events before the snapshot are gone, so restore the store from a backup or an export (run 'vaultlog verify' for a full report)")
        }
        return info
    }

    /// The user's horizon (0 when the log was never compacted): states before it are gone.
    public func horizon(userId: String) throws -> UInt64 {
        try snapshotInfo(userId: userId)?.horizon ?? 0
    }

    /// The user's snapshot, authenticated with `key`, and its opened payload; nil when the
    /// user's log was never compacted.
    public func snapshot(userId: String, key: SealingKey) throws -> (info: SnapshotInfo, payload: [UInt8])? {
        guard let db = store.snapshots, let bytes = try transaction.get(db, key: SnapshotRecord.key(userId: userId)) else { return nil }
        guard let (info, headerLength) = SnapshotRecord.parse(bytes), info.userId == userId else {
            throw EventLogError.snapshot("the compaction snapshot of user \(userId) is malformed; restore the store from a backup or an export (run 'vaultlog verify' for a full report)")
        }
        do {
            return (info, try Envelope.openBody(bytes, headerLength: headerLength, key: key.snapshots, sequence: info.horizon))
        } catch {
            throw EventLogError.snapshot("the compaction snapshot of user \(userId) (horizon \(info.horizon)) failed authentication (wrong key or tampered file); run 'vaultlog verify' for a full report")
        }
    }

    /// The opened per-item record of `cipherId` in the user's snapshot (the versions kept for it
    /// at the horizon), or nil. It must carry the snapshot's horizon.
    public func snapshotItem(userId: String, cipherId: String, key: SealingKey) throws -> [UInt8]? {
        guard let db = store.snapshots,
              let bytes = try transaction.get(db, key: SnapshotRecord.itemKey(userId: userId, cipherId: cipherId)) else { return nil }
        let horizon = try horizon(userId: userId)
        guard let item = SnapshotRecord.parseItem(bytes), item.userId == userId, item.cipherId == cipherId, item.horizon == horizon else {
            throw EventLogError.snapshot("the kept versions of item \(cipherId) (user \(userId)) are malformed or from another compaction; run 'vaultlog verify' for a full report")
        }
        do {
            return try Envelope.openBody(bytes, headerLength: item.headerLength, key: key.snapshots, sequence: horizon)
        } catch {
            throw EventLogError.snapshot("the kept versions of item \(cipherId) (user \(userId)) failed authentication (wrong key or tampered file)")
        }
    }

    /// The items with a per-item record in the user's snapshot, in key order.
    public func snapshotItemIds(userId: String) throws -> [String] {
        guard let db = store.snapshots else { return [] }
        let prefix = SnapshotRecord.itemPrefix(userId: userId)
        var out: [String] = []
        try transaction.scan(db, from: prefix) { key, value in
            guard key.starts(with: prefix) else { return false }
            if let item = SnapshotRecord.parseItem(Array(value)) { out.append(item.cipherId) }
            return true
        }
        return out
    }

    /// The users with a compaction snapshot (some may have no event left), in key order.
    public func compactedUserIds() throws -> [String] {
        guard let db = store.snapshots else { return [] }
        var out: [String] = []
        try transaction.scan(db, from: [SnapshotRecord.snapshotTag]) { key, value in
            guard key.first == SnapshotRecord.snapshotTag else { return false }
            if let (info, _) = SnapshotRecord.parse(Array(value)) { out.append(info.userId) }
            return true
        }
        return out
    }

    /// Every snapshot and item record as stored (sealed; for `vaultlog export`), in key order.
    public func sealedSnapshotRecords() throws -> [[UInt8]] {
        guard let db = store.snapshots else { return [] }
        var out: [[UInt8]] = []
        try transaction.scan(db) { _, value in
            out.append(Array(value))
            return true
        }
        return out
    }
}

extension LogTransaction {
    /// Replaces the user's events up to and including `horizon` with a sealed snapshot: removes
    /// those events, their index entries and the checkpoints at or before `horizon`, rewrites
    /// the user's per-item records from `items` (cipher id → payload), and stores `payload`
    /// (the projection at `horizon`) sealed with the chain value at the horizon, and `state`
    /// in the clear under the same MAC (what a locked vault needs there). One write transaction:
    /// a crash leaves the old log or the compacted one.
    ///
    /// `horizon` must be one of the user's events, after the current horizon. Sequences are
    /// never reused: the log's last sequence stays where it is.
    @discardableResult
    public func compact(userId: String, through horizon: UInt64, payload: [UInt8], state: [UInt8] = [], items: [String: [UInt8]],
                        key: SealingKey) throws -> CompactionCounts {
        guard let db = store.snapshots else {
            throw EventLogError.snapshot("the store was opened read-only; compaction needs a writable store")
        }
        let reader = self.reader
        let previous = try reader.snapshot(userId: userId, key: key)?.info
        if let previous, horizon <= previous.horizon {
            throw EventLogError.snapshot("user \(userId) is already compacted through sequence \(previous.horizon); a new horizon must be after it (nothing was written)")
        }
        guard try reader.hasEvent(userId: userId, at: horizon), let last = try reader.envelope(at: horizon) else {
            throw EventLogError.snapshot("sequence \(horizon) is not an event of user \(userId); nothing was written")
        }
        try LogReader.checkIndexed(last.header, sequence: horizon, userId: userId)
        guard last.authenticate(key: key) else {
            throw EventLogError.snapshot("event \(horizon) of user \(userId) failed authentication; run 'vaultlog verify' (nothing was written)")
        }
        var counts = CompactionCounts()
        // Sequences are never reused, also when the log's last events go.
        try raiseLastSequence(to: try reader.lastSequence())
        // Events and their index entries, walking the user's index up to the horizon.
        var removed: [(sequence: UInt64, cipherId: String)] = []
        try reader.forEachUserEntry(userId: userId, after: 0) { sequence, k in
            guard sequence <= horizon else { return false }
            var cipher = ""
            if let raw = try transaction.getRaw(store.events, key: k) {
                cipher = try Envelope.parseHeader(raw: raw).header.cipherId
            }
            removed.append((sequence, cipher))
            return true
        }
        // An item entry is a merge's (under the generation that covered it) or, from a format
        // 1–4 store, one without a generation.
        let generations = try reader.itemGenerations()
        for (sequence, cipher) in removed {
            if try transaction.delete(store.events, key: sequenceKey(sequence)) { counts.removedEvents += 1 }
            if try deleteUserEntry(userId: userId, sequence: sequence) { counts.removedIndexEntries += 1 }
            guard !cipher.isEmpty else { continue }
            if let generation = IndexKey.generation(of: sequence, in: generations),
               try deleteItemEntry(generation: generation, userId: userId, cipherId: cipher, sequence: sequence) {
                counts.removedIndexEntries += 1
            } else if try transaction.delete(store.index, key: IndexKey.cipher(userId, cipher, sequence)) {
                counts.removedIndexEntries += 1
            }
        }
        for sequence in try reader.checkpointSequences(userId: userId) where sequence <= horizon {
            if try transaction.delete(store.checkpoints, key: IndexKey.checkpoint(userId, sequence)) { counts.removedCheckpoints += 1 }
        }
        // The per-item records: all rewritten under this horizon.
        let itemPrefix = SnapshotRecord.itemPrefix(userId: userId)
        var stale: [[UInt8]] = []
        try transaction.scan(db, from: itemPrefix) { k, _ in
            guard k.starts(with: itemPrefix) else { return false }
            stale.append(Array(k))
            return true
        }
        for k in stale { try transaction.delete(db, key: k) }
        let ivs = store.random.bytes(16 * (items.count + 1))
        for (i, (cipherId, itemPayload)) in items.sorted(by: { $0.key < $1.key }).enumerated() {
            var sealed = SnapshotRecord.itemHeader(userId: userId, cipherId: cipherId, horizon: horizon)
            try Envelope.sealBody(itemPayload, appendingTo: &sealed, key: key.snapshots, iv: ivs[16 * (i + 1)..<16 * (i + 2)])
            try transaction.put(db, key: SnapshotRecord.itemKey(userId: userId, cipherId: cipherId), value: sealed)
        }
        let info = SnapshotInfo(userId: userId, horizon: horizon, chain: Array(last.mac),
                                removedEvents: (previous?.removedEvents ?? 0) + UInt64(counts.removedEvents), itemCount: items.count,
                                state: state)
        var sealed = SnapshotRecord.header(info)
        try Envelope.sealBody(payload, appendingTo: &sealed, key: key.snapshots, iv: ivs[0..<16])
        try transaction.put(db, key: SnapshotRecord.key(userId: userId), value: sealed)
        return counts
    }

    /// Makes sure no sequence up to `sequence` is assigned again, whatever events remain
    /// (`meta["lastSequence"]`, only written when it moves up).
    public func raiseLastSequence(to sequence: UInt64) throws {
        guard try reader.highWaterMark() < sequence else { return }
        try transaction.put(store.meta, key: LogReader.highWaterKey, value: sequenceKey(sequence))
    }

    /// Stores a snapshot or item record sealed elsewhere, byte for byte (`vaultlog import` of an
    /// export of a compacted store). It must parse; its MAC is checked by `verify` with the key.
    public func putSealedSnapshotRecord(_ bytes: [UInt8]) throws {
        guard let db = store.snapshots else { return }
        if let (info, _) = SnapshotRecord.parse(bytes) {
            try transaction.put(db, key: SnapshotRecord.key(userId: info.userId), value: bytes)
        } else if let item = SnapshotRecord.parseItem(bytes) {
            try transaction.put(db, key: SnapshotRecord.itemKey(userId: item.userId, cipherId: item.cipherId), value: bytes)
        } else {
            throw EventLogError.snapshot("a snapshot record (\(bytes.count) bytes) does not parse")
        }
    }
}

/// Checks of the sealed records an export carries beside its events (head records, snapshot
/// and per-item records), for an import that has the user's key before it commits anything.
package enum SealedRecordCheck {
    /// Whether `bytes` is a head record of `userId` whose MAC `key` confirms.
    package static func head(_ bytes: [UInt8], userId: String, key: SealingKey) -> Bool {
        guard let head = HeadRecord(bytes: bytes), head.userId == userId else { return false }
        return head.authenticate(bytes, key: key)
    }

    /// The user a snapshot or per-item record belongs to (nil when it parses as neither).
    package static func user(ofSnapshotRecord bytes: [UInt8]) -> String? {
        SnapshotRecord.parse(bytes)?.info.userId ?? SnapshotRecord.parseItem(bytes)?.userId
    }

    /// Whether `bytes`, a snapshot or per-item record, opens with `key`.
    package static func snapshotRecord(_ bytes: [UInt8], key: SealingKey) -> Bool {
        if let (info, headerLength) = SnapshotRecord.parse(bytes) {
            return (try? Envelope.openBody(bytes, headerLength: headerLength, key: key.snapshots, sequence: info.horizon)) != nil
        }
        if let item = SnapshotRecord.parseItem(bytes) {
            return (try? Envelope.openBody(bytes, headerLength: item.headerLength, key: key.snapshots, sequence: item.horizon)) != nil
        }
        return false
    }
}
