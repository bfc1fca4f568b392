import LMDB

extension EventLogStore {
    /// The first store format with the user index in `users` (``UserIndex``).
    static let userDatabaseFormatVersion = 6

    /// Moves a format 1–5 store's user entries (`0x01 ‖ userLength ‖ user ‖ sequence` keys of
    /// `index`) into `users`, inside `txn`: the write transaction that also writes the new
    /// format marker, so a crash (or an error) leaves the old layout and marker or the new
    /// ones, never a mix. A key that does not parse stays in `index` (`vaultlog verify` reports
    /// it). Returns how many entries moved.
    static func moveUserEntries(_ txn: Transaction, index: Database, users: Database,
                                interruption: (@Sendable (_ moved: Int) throws -> Void)?) throws -> Int {
        var moved = 0
        try txn.withCursor(users) { target in
            var pendingKey: [UInt8] = []
            var pending: [UInt8] = []
            func flush() throws {
                try pendingKey.withUnsafeBytes { k in try pending.withUnsafeBytes { try UserIndex.put($0, under: k, cursor: target) } }
                pending.removeAll(keepingCapacity: true)
            }
            try txn.withCursor(index) { cursor in
                var next: [UInt8] = [IndexKey.userTag]
                while let entry = try cursor.seek(atOrAfter: next), entry.key.first == IndexKey.userTag {
                    let key = entry.key
                    let length = key.count >= 2 ? Int(key[1]) : -1
                    guard length >= 0, key.count == 2 + length + 8 else {
                        next = Array(key) + [0]   // not an entry: left where it is
                        continue
                    }
                    let userKey = Array(key[1..<(2 + length)])
                    if userKey != pendingKey || pending.count >= 8 * 4096 {
                        try flush()
                        pendingKey = userKey
                    }
                    pending.append(contentsOf: key[(2 + length)...])
                    next = Array(key)
                    try cursor.deleteCurrent()
                    moved += 1
                    try interruption?(moved)
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
