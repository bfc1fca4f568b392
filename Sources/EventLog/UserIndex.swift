import LMDB

/// The user index (store format 6): the `users` database, one key per user
/// (`userLength ‖ user`) holding the big-endian sequences of the user's events as a sorted
/// set of 8-byte values (LMDB `MDB_DUPSORT | MDB_DUPFIXED`).
///
/// Until format 5 each entry was a key of its own in `index` (`0x01 ‖ userLength ‖ user ‖
/// sequence`). A user's new entries went after that user's last, but the next user's entries
/// and the item entries followed them, so every append landed in the middle of the database
/// and LMDB split the leaf it filled in half: the leaves stayed about half full, and each entry
/// repeated the user id. Here LMDB keeps each user's sequences in a tree of their own, packed
/// 8 bytes each with no per-entry header, and an append puts them at the end of that tree with
/// `MDB_APPENDDUP`, which fills a page before it starts the next.
enum UserIndex {
    /// The database's name.
    static let databaseName = "users"

    /// A user's key: the id's UTF-8 length, then its bytes (never empty, as LMDB needs).
    static func key(_ user: String) -> [UInt8] {
        let u = Array(user.utf8)
        return [UInt8(truncatingIfNeeded: u.count)] + u
    }

    /// Puts `values` (8-byte big-endian sequences back to back, increasing) under `key` through
    /// `cursor` (on `users`): at the end of the key's values (`MDB_APPENDDUP`, which fills each
    /// page) when they sort after its last one, as new sequences do; in place otherwise (a
    /// damaged index holding a later one).
    static func put(_ values: UnsafeRawBufferPointer, under key: UnsafeRawBufferPointer, cursor: Cursor) throws {
        guard values.count >= 8 else { return }
        let last = try cursor.find(key).flatMap { _ in try cursor.lastDuplicate() }
        let atEnd = last.map { $0.value.count == 8 && $0.value.lexicographicallyPrecedes(values.prefix(8)) } ?? true
        assert(LogTransaction.isIncreasing(values), "a user's entries are put in increasing order")
        try cursor.putDuplicates(key: key, values: values, size: 8, flags: atEnd ? .appendDuplicate : [])
    }

    /// The user a key names, nil when it does not parse.
    static func user(ofKey key: UnsafeRawBufferPointer) -> String? {
        guard key.count >= 1, Int(key[0]) == key.count - 1 else { return nil }
        return String(validating: key[1...], as: UTF8.self)
    }
}

extension LogReader {
    /// Calls `body` with each sequence the user index lists for `userId` after `after`, in
    /// order, as a number and as its 8 stored big-endian bytes (an `events` key, valid during
    /// the call), while `body` returns true.
    func forEachUserEntry(userId: String, after: UInt64,
                          _ body: (_ sequence: UInt64, _ key: UnsafeRawBufferPointer) throws -> Bool) throws {
        guard after < .max else { return }
        let key = UserIndex.key(userId), start = sequenceKey(after + 1)
        try transaction.withCursor(store.users) { cursor in
            var entry = try key.withUnsafeBytes { k in try start.withUnsafeBytes { try cursor.seek(key: k, value: $0) } }
            while let current = entry {
                guard current.value.count == 8 else {
                    throw EventLogError.corruptMetadata("user index value of \(current.value.count) bytes under user \(userId) (expected an 8-byte sequence)")
                }
                guard try body(readBE(current.value, at: 0, as: UInt64.self), current.value) else { return }
                entry = try cursor.nextDuplicate()
            }
        }
    }

    /// The first (or, with `last`, the last) sequence the user index lists for `userId`.
    func userEntry(userId: String, last: Bool) throws -> UInt64? {
        let key = UserIndex.key(userId)
        return try transaction.withCursor(store.users) { cursor in
            guard try key.withUnsafeBytes({ try cursor.find($0) }) != nil,
                  let entry = try last ? cursor.lastDuplicate() : cursor.firstDuplicate(), entry.value.count == 8 else { return nil }
            return readBE(entry.value, at: 0, as: UInt64.self)
        }
    }

    /// Whether the user index lists `sequence` under `userId`.
    func hasUserEntry(userId: String, at sequence: UInt64) throws -> Bool {
        try transaction.contains(store.users, key: UserIndex.key(userId), value: sequenceKey(sequence))
    }

    /// The users the user index lists, in key order (one step per user, not per entry).
    func indexedUserIds() throws -> [String] {
        try transaction.withCursor(store.users) { cursor in
            var users: [String] = []
            var entry = try cursor.first()
            while let current = entry {
                if let user = UserIndex.user(ofKey: current.key) { users.append(user) }
                entry = try cursor.nextKey()
            }
            return users
        }
    }

    /// Calls `body` with every entry of the user index (its user, nil when the key does not
    /// parse, and its value's bytes), in key order, while `body` returns true (`verify`).
    func forEachUserIndexEntry(_ body: (_ user: String?, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool) throws {
        try transaction.scan(store.users) { key, value in try body(UserIndex.user(ofKey: key), key, value) }
    }
}

extension LogTransaction {
    /// Puts a batch's user entries (``BatchIndexEntries``; `first`: the batch's first
    /// sequence), each user's in one call. They go at the end of each user's values
    /// (`MDB_APPENDDUP`) when they sort after its last one, as new sequences do; a damaged
    /// index holding a later one gets them put in place instead.
    func putUserEntries(_ entries: BatchIndexEntries, first: UInt64) throws {
        try transaction.withCursor(store.users) { cursor in
            try entries.entries.forEachGroup(adding: first) { key, values in try UserIndex.put(values, under: key, cursor: cursor) }
        }
    }

    /// Puts one user entry (an imported event's).
    func putUserEntry(userId: String, sequence: UInt64) throws {
        let key = UserIndex.key(userId), value = sequenceKey(sequence)
        try transaction.withCursor(store.users) { cursor in
            try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try UserIndex.put(v, under: k, cursor: cursor) } }
        }
    }

    /// Removes every user entry of `userId` (logout).
    func deleteUserEntries(userId: String) throws {
        let key = UserIndex.key(userId)
        try transaction.withCursor(store.users) { cursor in
            if try key.withUnsafeBytes({ try cursor.find($0) }) != nil { try cursor.deleteCurrentKey() }
        }
    }

    /// Removes the user entry of `sequence` under `userId`; false when there was none.
    func deleteUserEntry(userId: String, sequence: UInt64) throws -> Bool {
        try transaction.delete(store.users, key: UserIndex.key(userId), value: sequenceKey(sequence))
    }

    /// Whether `values` (8-byte big-endian sequences back to back) increase strictly.
    static func isIncreasing(_ values: UnsafeRawBufferPointer) -> Bool {
        stride(from: 8, to: values.count, by: 8).allSatisfy { i in
            UnsafeRawBufferPointer(rebasing: values[(i - 8)..<i]).lexicographicallyPrecedes(UnsafeRawBufferPointer(rebasing: values[i..<(i + 8)]))
        }
    }
}

extension GroupedIndexEntries {
    /// Calls `body` with each group's prefix and its values, `offset` added, as 8-byte
    /// big-endian sequences back to back (valid during the call), groups in key order.
    func forEachGroup(adding offset: UInt64, _ body: (_ prefix: UnsafeRawBufferPointer, _ values: UnsafeRawBufferPointer) throws -> Void) rethrows {
        var buffer = [UInt64](repeating: 0, count: values.count)
        for (g, prefix) in prefixes.enumerated() {
            let range = starts[g]..<starts[g + 1]
            for entry in range { buffer[entry] = (offset + values[entry]).bigEndian }
            try prefix.withUnsafeBytes { p in
                try buffer.withUnsafeBytes { all in try body(p, UnsafeRawBufferPointer(rebasing: all[(8 * range.lowerBound)..<(8 * range.upperBound)])) }
            }
        }
    }
}
