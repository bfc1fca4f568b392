import CLMDB

/// Databases whose keys each hold a sorted set of fixed-size values (`MDB_DUPSORT |
/// MDB_DUPFIXED`). LMDB keeps a key's values in a tree of their own once they outgrow a page,
/// packed without a per-value header, so values put in increasing order with
/// ``PutFlags/appendDuplicate`` fill each page before the next one is started, whatever the
/// other keys of the database do.
extension PutFlags {
    /// The value sorts after every value the key already holds: appended to the key's own
    /// tree without page splits (`MDB_APPENDDUP`). An out-of-order value fails with `MDB_KEYEXIST`.
    public static let appendDuplicate = PutFlags(rawValue: UInt32(MDB_APPENDDUP))
}

extension Transaction {
    /// Opens a named database of sorted fixed-size values per key (see the extension's
    /// comment); with `create`, creates it (write transactions only). Every value put into it
    /// must have the same size.
    public func openDatabase(_ name: String, create: Bool, fixedSizeDuplicates: Bool) throws -> Database {
        guard fixedSizeDuplicates else { return try openDatabase(name, create: create) }
        var dbi: MDB_dbi = 0
        let flags = UInt32(MDB_DUPSORT | MDB_DUPFIXED) | (create ? UInt32(MDB_CREATE) : 0)
        try check(mdb_dbi_open(raw, name, flags, &dbi), "mdb_dbi_open \(name)")
        if create { recorder?.open(name, flags: UInt32(MDB_DUPSORT | MDB_DUPFIXED)) }
        return Database(dbi: dbi, name: name)
    }

    /// Removes `db` from the environment, its entries and its name (`mdb_drop` with `del`);
    /// its handle is invalid afterwards. Undone with the rest if the transaction aborts.
    public func dropDatabase(_ db: Database) throws {
        let flags = recorder.map { _ in JournalRecorder.flags(raw, db) }  // read before the handle goes
        try check(mdb_drop(raw, db.dbi, 1), "mdb_drop \(db.name)")
        if let flags { recorder?.drop(db, dbFlags: flags) }
    }

    /// Whether `key` holds `value` (`MDB_GET_BOTH`).
    public func contains(_ db: Database, key: [UInt8], value: [UInt8]) throws -> Bool {
        try withCursor(db) { cursor in
            try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try cursor.seek(key: k, value: v, exact: true) != nil } }
        }
    }

    /// Deletes one value of `key`; false when the key does not hold it.
    @discardableResult
    public func delete(_ db: Database, key: [UInt8], value: [UInt8]) throws -> Bool {
        try key.withUnsafeBytes { key in
            try value.withUnsafeBytes { value in
                var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
                var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
                let rc = mdb_del(raw, db.dbi, &k, &v)
                if rc == MDB_NOTFOUND { return false }
                try check(rc, "mdb_del \(db.name)")
                recorder?.delete(db, in: raw, key: key, value: value)
                return true
            }
        }
    }
}

extension Cursor {
    /// The entry of `key` whose value is `value` (`exact`) or the first at or after it, nil when
    /// there is none under `key` (`MDB_GET_BOTH` / `MDB_GET_BOTH_RANGE`).
    public func seek(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, exact: Bool = false) throws -> Entry? {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
        let rc = mdb_cursor_get(raw, &k, &v, exact ? MDB_GET_BOTH : MDB_GET_BOTH_RANGE)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc, "mdb_cursor_get \(db.name)")
        return (UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size),
                UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size))
    }

    /// The current key's next value, nil after its last (`MDB_NEXT_DUP`).
    public func nextDuplicate() throws -> Entry? { try get(MDB_NEXT_DUP) }
    /// The current key's first value (`MDB_FIRST_DUP`).
    public func firstDuplicate() throws -> Entry? { try get(MDB_FIRST_DUP) }
    /// The current key's last value (`MDB_LAST_DUP`).
    public func lastDuplicate() throws -> Entry? { try get(MDB_LAST_DUP) }
    /// The first value of the next key (`MDB_NEXT_NODUP`).
    public func nextKey() throws -> Entry? { try get(MDB_NEXT_NODUP) }

    /// Puts `count` values of `size` bytes each, back to back in `values` and in increasing
    /// order, under `key` in one call (`MDB_MULTIPLE`); with ``PutFlags/appendDuplicate`` each
    /// goes at the end of the key's values. A value the key already holds is left as it is.
    public func putDuplicates(key: UnsafeRawBufferPointer, values: UnsafeRawBufferPointer, size: Int, flags: PutFlags = []) throws {
        precondition(size > 0 && values.count % size == 0, "values are whole multiples of their size")
        guard values.count > 0 else { return }
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var data = (MDB_val(mv_size: size, mv_data: UnsafeMutableRawPointer(mutating: values.baseAddress)),
                    MDB_val(mv_size: values.count / size, mv_data: nil))
        let rc = withUnsafeMutablePointer(to: &data) { pair in
            pair.withMemoryRebound(to: MDB_val.self, capacity: 2) { mdb_cursor_put(raw, &k, $0, flags.rawValue | UInt32(MDB_MULTIPLE)) }
        }
        if rc == MDB_SUCCESS, let recorder {
            for index in 0..<min(data.1.mv_size, values.count / size) {
                recorder.put(db, in: txn, key: key, value: UnsafeRawBufferPointer(rebasing: values[index * size..<(index + 1) * size]),
                             flags: flags.rawValue)
            }
        }
        try check(rc, "mdb_cursor_put \(db.name) (\(values.count / size) values)")
        // LMDB stops at the first value it could not put and says how many it put.
        guard data.1.mv_size == values.count / size else {
            throw LMDBError(code: MDB_KEYEXIST, operation: "mdb_cursor_put \(db.name): put \(data.1.mv_size) of \(values.count / size) values")
        }
    }

    /// Deletes the current key with all its values (`MDB_NODUPDATA`).
    public func deleteCurrentKey() throws {
        try recordDeletion(everyValue: true)
        try check(mdb_cursor_del(raw, UInt32(MDB_NODUPDATA)), "mdb_cursor_del \(db.name)")
    }
}
