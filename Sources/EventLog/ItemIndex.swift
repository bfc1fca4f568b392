import LMDB

/// The item index (store format 8): the `items` database, one key per merge and (user, item)
/// (`generation(8, BE) ‖ userLength ‖ user ‖ cipherLength ‖ cipher`) holding the big-endian
/// sequences of that item's events the merge covered, as a sorted set of 8-byte values (LMDB
/// `MDB_DUPSORT | MDB_DUPFIXED`).
///
/// A merge (``LogTransaction/mergeItemIndexIfDue(last:)``) covers the events after the mark;
/// its generation is the first sequence it covers, so each merge's keys sort after every
/// earlier merge's and go at the end of the database, and LMDB fills each leaf before it starts
/// the next. Until format 7 each event had a key of its own in `index` (`0x03 ‖ generation ‖
/// user ‖ item ‖ sequence`), which repeated the generation, the user id and the item id for
/// every event: about 105 bytes per event of a 200,000-event store. Here one key holds all of a
/// merge's events of one item (a merge of 32,768 events over 1,000 items: about 11 bytes each).
enum ItemIndex {
    /// The database's name.
    static let databaseName = "items"

    /// The first store format with the item index in `items`.
    static let formatVersion = 8

    /// What every key of one merge starts with: its generation.
    static func generationKey(_ generation: UInt64) -> [UInt8] { sequenceKey(generation) }

    /// The key of one merge's entries of `user`'s events: the generation, then the user id.
    static func userPrefix(_ generation: UInt64, _ user: String) -> [UInt8] {
        let u = Array(user.utf8)
        return generationKey(generation) + [UInt8(truncatingIfNeeded: u.count)] + u
    }

    /// The key of one merge's entries of one item.
    static func key(_ generation: UInt64, _ user: String, _ cipher: String) -> [UInt8] {
        let c = Array(cipher.utf8)
        return userPrefix(generation, user) + [UInt8(truncatingIfNeeded: c.count)] + c
    }

    /// The generation, user and cipher a key names; nil when it does not parse.
    static func parse(_ key: UnsafeRawBufferPointer) -> (generation: UInt64, user: String, cipher: String)? {
        guard key.count >= 8 + 2 else { return nil }
        let userLength = Int(key[8])
        let cipherAt = 9 + userLength
        guard cipherAt < key.count, cipherAt + 1 + Int(key[cipherAt]) == key.count else { return nil }
        return (readBE(key, at: 0, as: UInt64.self), String(decoding: key[9..<cipherAt], as: UTF8.self),
                String(decoding: key[(cipherAt + 1)...], as: UTF8.self))
    }
}

extension LogReader {
    /// The generations of the item index's merges that have entries, in order: one seek per merge.
    func itemGenerations() throws -> [UInt64] {
        var out: [UInt64] = []
        try transaction.withCursor(store.items) { cursor in
            var next: UInt64 = 0
            while let entry = try cursor.seek(atOrAfter: ItemIndex.generationKey(next)), entry.key.count >= 8 {
                let generation = readBE(entry.key, at: 0, as: UInt64.self)
                out.append(generation)
                guard generation < .max else { break }
                next = generation + 1
            }
        }
        return out
    }

    /// Appends the sequences the item index lists under `key` in `after + 1 ... through`.
    func collectItemEntries(under key: [UInt8], after: UInt64, through: UInt64, into out: inout [UInt64]) throws {
        guard after < through else { return }
        let start = sequenceKey(after + 1)
        try transaction.withCursor(store.items) { cursor in
            var entry = try key.withUnsafeBytes { k in try start.withUnsafeBytes { try cursor.seek(key: k, value: $0) } }
            while let current = entry, current.value.count == 8 {
                let sequence = readBE(current.value, at: 0, as: UInt64.self)
                guard sequence <= through else { return }
                out.append(sequence)
                entry = try cursor.nextDuplicate()
            }
        }
    }

    /// Whether the item index lists `sequence` under the merge `generation` and the item.
    func hasItemEntry(generation: UInt64, userId: String, cipherId: String, at sequence: UInt64) throws -> Bool {
        try transaction.contains(store.items, key: ItemIndex.key(generation, userId, cipherId), value: sequenceKey(sequence))
    }

    /// Calls `body` with every entry of the item index (its key's parts, nil when the key does
    /// not parse, the key's and the value's bytes), in key order, while `body` returns true (`verify`).
    func forEachItemIndexEntry(_ body: (_ parts: (generation: UInt64, user: String, cipher: String)?,
                                        _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool) throws {
        try transaction.scan(store.items) { key, value in try body(ItemIndex.parse(key), key, value) }
    }
}

extension LogTransaction {
    /// Puts a merge's entries (keys ``ItemIndex/key(_:_:_:)`` in key order, each with its
    /// sequences), one call per key. With `atEnd` (nothing in `items` sorts after the first key,
    /// as a new generation's keys never do) each key goes at the database's end (`MDB_APPEND`);
    /// otherwise (a damaged file holding a later key) in place.
    func putItemEntries(_ entries: GroupedIndexEntries, atEnd: Bool) throws {
        try transaction.withCursor(store.items) { cursor in
            try entries.forEachGroup(adding: 0) { key, values in
                assert(Self.isIncreasing(values), "an item's entries are put in increasing order")
                try cursor.putDuplicates(key: key, values: values, size: 8, flags: atEnd ? .append : [])
            }
        }
    }

    /// Removes every item entry of `userId` (logout), merge by merge.
    func deleteItemEntries(userId: String, generations: [UInt64]) throws {
        try transaction.withCursor(store.items) { cursor in
            for generation in generations {
                let prefix = ItemIndex.userPrefix(generation, userId)
                while let entry = try cursor.seek(atOrAfter: prefix), entry.key.starts(with: prefix) {
                    try cursor.deleteCurrentKey()
                }
            }
        }
    }

    /// Removes the item entry of `sequence` (under the merge that covered it); false when there was none.
    func deleteItemEntry(generation: UInt64, userId: String, cipherId: String, sequence: UInt64) throws -> Bool {
        try transaction.delete(store.items, key: ItemIndex.key(generation, userId, cipherId), value: sequenceKey(sequence))
    }
}

extension EventLogStore {
    /// Moves a format 5–7 store's item entries (`0x03 ‖ generation ‖ userLength ‖ user ‖
    /// cipherLength ‖ cipher ‖ sequence` keys of `index`) into `items`, inside `txn`: the write
    /// transaction that also writes the new format marker, so a crash (or an error) leaves the
    /// old layout and marker or the new ones, never a mix. A key that does not parse stays in
    /// `index` (`vaultlog verify` reports it). Returns how many entries moved; `interruption`
    /// is called with the count so far (`movedBefore` plus this move's).
    static func moveItemEntries(_ txn: Transaction, index: Database, items: Database, movedBefore: Int,
                                interruption: (@Sendable (_ moved: Int) throws -> Void)?) throws -> Int {
        var moved = 0
        try txn.withCursor(items) { target in
            var pendingKey: [UInt8] = []
            var pending: [UInt8] = []
            func flush() throws {
                guard !pending.isEmpty else { return }
                try pendingKey.withUnsafeBytes { k in try pending.withUnsafeBytes { try target.putDuplicates(key: k, values: $0, size: 8) } }
                pending.removeAll(keepingCapacity: true)
            }
            try txn.withCursor(index) { cursor in
                var next: [UInt8] = [IndexKey.itemTag]
                while let entry = try cursor.seek(atOrAfter: next), entry.key.first == IndexKey.itemTag {
                    let key = entry.key
                    guard IndexKey.parse(key) != nil else {
                        next = Array(key) + [0]   // not an entry: left where it is
                        continue
                    }
                    let itemKey = Array(key[1..<(key.count - 8)])
                    if itemKey != pendingKey || pending.count >= 8 * 4096 {
                        try flush()
                        pendingKey = itemKey
                    }
                    pending.append(contentsOf: key[(key.count - 8)...])
                    next = Array(key)
                    try cursor.deleteCurrent()
                    moved += 1
                    try interruption?(movedBefore + moved)
                }
            }
            try flush()
        }
        return moved
    }
}
