import LMDB

extension EventLogStore {
    /// The first store format with the user index in `users` (``UserIndex``).
    static let userDatabaseFormatVersion = 6

    /// Moves a format 1–5 store's user entries (`0x01 ‖ userLength ‖ user ‖ sequence` keys of
    /// `index`) into `users` (see ``moveEntries(_:from:tag:into:movedBefore:interruption:split:put:)``).
    static func moveUserEntries(_ txn: Transaction, index: Database, users: Database,
                                interruption: (@Sendable (_ moved: Int) throws -> Void)?) throws -> Int {
        try moveEntries(txn, from: index, tag: IndexKey.userTag, into: users, movedBefore: 0, interruption: interruption) { key in
            let length = key.count >= 2 ? Int(key[1]) : -1
            guard length >= 0, key.count == 2 + length + 8 else { return nil }
            return 1..<(2 + length)
        } put: { key, values, target in
            try UserIndex.put(values, under: key, cursor: target)
        }
    }

    /// Moves a format 5–7 store's item entries (`0x03 ‖ generation ‖ userLength ‖ user ‖
    /// cipherLength ‖ cipher ‖ sequence` keys of `index`) into `items`, one key per merge and
    /// item (see ``moveEntries(_:from:tag:into:movedBefore:interruption:split:put:)``).
    static func moveItemEntries(_ txn: Transaction, index: Database, items: Database, movedBefore: Int,
                                interruption: (@Sendable (_ moved: Int) throws -> Void)?) throws -> Int {
        try moveEntries(txn, from: index, tag: IndexKey.itemTag, into: items, movedBefore: movedBefore, interruption: interruption) { key in
            IndexKey.parse(key) == nil ? nil : 1..<(key.count - 8)
        } put: { key, values, target in
            try target.putDuplicates(key: key, values: values, size: 8)
        }
    }

    /// Moves the `index` entries whose keys start with `tag` (each `tag ‖ new key ‖ sequence(8)`)
    /// into `target`, a database of sorted 8-byte values per key, inside `txn`: the write
    /// transaction that also writes the new format marker, so a crash (or an error) leaves the
    /// old layout and marker or the new ones, never a mix. `split` gives where an entry's new
    /// key lies in its key, nil for a key that does not parse, which stays in `index` (`vaultlog
    /// verify` reports it). Entries come in key order, so one key's sequences come together and
    /// increasing: `put` gets them a key at a time (at most 4,096 a call). Returns how many
    /// entries moved; `interruption` is called with the count so far (`movedBefore` plus this move's).
    static func moveEntries(_ txn: Transaction, from index: Database, tag: UInt8, into target: Database, movedBefore: Int,
                            interruption: (@Sendable (_ moved: Int) throws -> Void)?,
                            split: (UnsafeRawBufferPointer) -> Range<Int>?,
                            put: (_ key: UnsafeRawBufferPointer, _ values: UnsafeRawBufferPointer, _ target: Cursor) throws -> Void) throws -> Int {
        var moved = 0
        try txn.withCursor(target) { target in
            var pendingKey: [UInt8] = []
            var pending: [UInt8] = []
            func flush() throws {
                guard !pending.isEmpty else { return }
                try pendingKey.withUnsafeBytes { k in try pending.withUnsafeBytes { try put(k, $0, target) } }
                pending.removeAll(keepingCapacity: true)
            }
            try txn.withCursor(index) { cursor in
                var next: [UInt8] = [tag]
                while let entry = try cursor.seek(atOrAfter: next), entry.key.first == tag {
                    let key = entry.key
                    guard let newKey = split(key) else {
                        next = Array(key) + [0]   // not an entry: left where it is
                        continue
                    }
                    if !key[newKey].elementsEqual(pendingKey) || pending.count >= 8 * 4096 {
                        try flush()
                        pendingKey = Array(key[newKey])
                    }
                    pending.append(contentsOf: key[newKey.upperBound...])
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

    /// Refuses a read-only open of a store older than ``ItemIndex/formatVersion``: it has no
    /// `items` database (nor, before format 6, `users`), and a read-only open cannot make it.
    static func checkReadable(path: String, stored: Int?) throws {
        if let stored, stored < ItemIndex.formatVersion {
            throw EventLogError.olderStoreFormat(path: path, found: stored, current: storeFormatVersion)
        }
    }
}
