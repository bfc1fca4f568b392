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
        Array(user.utf8).withUnsafeBytes { u in
            Array(cipher.utf8).withUnsafeBytes { c in key(head: generationKey(generation), user: u, cipher: c) }
        }
    }

    /// `head` (a merge's ``generationKey(_:)``) then the user and cipher ids, length-prefixed:
    /// the key of one merge's entries of one item, from the ids' bytes (a merge builds its keys
    /// with ``ItemPrefixTable``, from the headers where LMDB maps them).
    static func key(head: [UInt8], user: UnsafeRawBufferPointer, cipher: UnsafeRawBufferPointer) -> [UInt8] {
        var out = head
        out.reserveCapacity(head.count + 2 + user.count + cipher.count)
        out.append(UInt8(truncatingIfNeeded: user.count))
        out.append(contentsOf: user)
        out.append(UInt8(truncatingIfNeeded: cipher.count))
        out.append(contentsOf: cipher)
        return out
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

    /// Whether the item index lists `sequence` under the item and the merge that covered it
    /// (the last of `generations`, ``itemGenerations()``, at or before it).
    func hasItemEntry(userId: String, cipherId: String, at sequence: UInt64, generations: [UInt64]) throws -> Bool {
        guard let generation = IndexKey.generation(of: sequence, in: generations) else { return false }
        return try transaction.contains(store.items, key: ItemIndex.key(generation, userId, cipherId), value: sequenceKey(sequence))
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
