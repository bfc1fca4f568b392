import CLMDB

/// Flags for ``Transaction/put(_:key:value:flags:)``.
public struct PutFlags: OptionSet, Sendable {
    /// The LMDB `mdb_put` flag bits.
    public let rawValue: UInt32
    /// Flags from raw `mdb_put` flag bits.
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// Fail with `MDB_KEYEXIST` rather than overwrite.
    public static let noOverwrite = PutFlags(rawValue: UInt32(MDB_NOOVERWRITE))
    /// The key sorts after every existing key: append without page splits (a log's fast path).
    /// An out-of-order key fails with `MDB_KEYEXIST`.
    public static let append = PutFlags(rawValue: UInt32(MDB_APPEND))
}

/// A transaction handed to the closures of ``Environment/read(_:)`` and
/// ``Environment/write(_:)``. It must not escape the closure, and the buffers it returns are
/// valid only until the closure returns (they point into the memory map).
public struct Transaction {
    let raw: OpaquePointer
    /// True inside ``Environment/read(_:)``.
    public let isReadOnly: Bool
    /// Where a journaled write transaction records its changes (nil: not journaled).
    let recorder: JournalRecorder?

    init(raw: OpaquePointer, readOnly: Bool, recorder: JournalRecorder? = nil) {
        self.raw = raw
        self.isReadOnly = readOnly
        self.recorder = recorder
    }

    /// The transaction's id (`mdb_txn_id`): in a read transaction, the id of the newest commit
    /// it sees, made by any process. Every commit of the environment, in any process, makes it
    /// larger, so a reader that finds it unchanged knows nothing was committed meanwhile.
    public var id: UInt64 { UInt64(mdb_txn_id(raw)) }

    /// Opens a named database; with `create`, creates it (write transactions only).
    public func openDatabase(_ name: String, create: Bool) throws -> Database {
        var dbi: MDB_dbi = 0
        try check(mdb_dbi_open(raw, name, create ? UInt32(MDB_CREATE) : 0, &dbi), "mdb_dbi_open \(name)")
        if create { recorder?.open(name, flags: 0) }
        return Database(dbi: dbi, name: name)
    }

    /// The value for `key`, without copying (valid inside the transaction's closure), or nil.
    public func getRaw(_ db: Database, key: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val()
        let rc = mdb_get(raw, db.dbi, &k, &v)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc, "mdb_get \(db.name)")
        return UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)
    }

    /// The value for `key`, copied, or nil.
    public func get(_ db: Database, key: [UInt8]) throws -> [UInt8]? {
        try key.withUnsafeBytes { try getRaw(db, key: $0).map { Array($0) } }
    }

    /// Stores `value` under `key`.
    public func put(_ db: Database, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, flags: PutFlags = []) throws {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
        try check(mdb_put(raw, db.dbi, &k, &v, flags.rawValue), "mdb_put \(db.name)")
        recorder?.put(db, in: raw, key: key, value: value, flags: flags.rawValue)
    }

    /// Stores `value` under `key`.
    public func put(_ db: Database, key: [UInt8], value: [UInt8], flags: PutFlags = []) throws {
        try key.withUnsafeBytes { k in
            try value.withUnsafeBytes { v in try put(db, key: k, value: v, flags: flags) }
        }
    }

    /// Deletes `key`; returns whether it existed.
    @discardableResult
    public func delete(_ db: Database, key: [UInt8]) throws -> Bool {
        try key.withUnsafeBytes { key in
            var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
            let rc = mdb_del(raw, db.dbi, &k, nil)
            if rc == MDB_NOTFOUND { return false }
            try check(rc, "mdb_del \(db.name)")
            recorder?.delete(db, in: raw, key: key, value: nil)
            return true
        }
    }

    /// Removes every entry of `db` (the database itself stays).
    public func clear(_ db: Database) throws {
        try check(mdb_drop(raw, db.dbi, 0), "mdb_drop \(db.name)")
        recorder?.clear(db, dbFlags: JournalRecorder.flags(raw, db))
    }

    /// Number of entries in `db`.
    public func count(_ db: Database) throws -> Int {
        var stat = MDB_stat()
        try check(mdb_stat(raw, db.dbi, &stat), "mdb_stat \(db.name)")
        return stat.ms_entries
    }

    /// Runs `body` with a cursor on `db`, closing it afterwards.
    public func withCursor<T>(_ db: Database, _ body: (Cursor) throws -> T) throws -> T {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(raw, db.dbi, &cursor), "mdb_cursor_open \(db.name)")
        defer { mdb_cursor_close(cursor) }
        return try body(Cursor(raw: cursor!, db: db, txn: raw, recorder: recorder))
    }

    /// Visits entries of `db` in key order (or reverse order) from `start` (inclusive; the
    /// first/last key when nil) while `body` returns true. Keys and values are valid only
    /// during the call.
    public func scan(
        _ db: Database, from start: [UInt8]? = nil, reverse: Bool = false,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        try withCursor(db) { cursor in
            var entry: Cursor.Entry?
            if let start {
                entry = try cursor.seek(atOrAfter: start)
                if reverse {
                    if let found = entry {
                        if !found.key.elementsEqual(start) { entry = try cursor.previous() }
                    } else {
                        entry = try cursor.last()
                    }
                }
            } else {
                entry = reverse ? try cursor.last() : try cursor.first()
            }
            while let current = entry {
                guard try body(current.key, current.value) else { return }
                entry = reverse ? try cursor.previous() : try cursor.next()
            }
        }
    }
}

/// A cursor over one database, from ``Transaction/withCursor(_:_:)``.
public struct Cursor {
    /// A key/value pair pointing into the map (valid while the transaction is open).
    public typealias Entry = (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)

    let raw: OpaquePointer
    let db: Database
    /// The cursor's transaction and its recorder, for a journaled write.
    let txn: OpaquePointer
    let recorder: JournalRecorder?

    func get(_ op: MDB_cursor_op, key: UnsafeRawBufferPointer? = nil) throws -> Entry? {
        var k = MDB_val(mv_size: key?.count ?? 0, mv_data: UnsafeMutableRawPointer(mutating: key?.baseAddress))
        var v = MDB_val()
        let rc = mdb_cursor_get(raw, &k, &v, op)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc, "mdb_cursor_get \(db.name)")
        return (UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size),
                UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size))
    }

    /// The first entry.
    public func first() throws -> Entry? { try get(MDB_FIRST) }
    /// The last entry.
    public func last() throws -> Entry? { try get(MDB_LAST) }
    /// The entry after the current one.
    public func next() throws -> Entry? { try get(MDB_NEXT) }
    /// The entry before the current one.
    public func previous() throws -> Entry? { try get(MDB_PREV) }
    /// The first entry whose key is ≥ `key`.
    public func seek(atOrAfter key: [UInt8]) throws -> Entry? {
        try key.withUnsafeBytes { try get(MDB_SET_RANGE, key: $0) }
    }

    /// The entry whose key is `key`, or nil (the cursor's position is then undefined).
    public func find(_ key: UnsafeRawBufferPointer) throws -> Entry? {
        try get(MDB_SET_KEY, key: key)
    }

    /// Puts through the cursor; with ``PutFlags/append`` this is LMDB's bulk-append path.
    public func put(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, flags: PutFlags = []) throws {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
        try check(mdb_cursor_put(raw, &k, &v, flags.rawValue), "mdb_cursor_put \(db.name)")
        recorder?.put(db, in: txn, key: key, value: value, flags: flags.rawValue)
    }

    /// Deletes the entry under the cursor.
    public func deleteCurrent() throws {
        try recordDeletion(everyValue: false)
        try check(mdb_cursor_del(raw, 0), "mdb_cursor_del \(db.name)")
    }

    /// Records the deletion of the current entry (its value only, or every value of its key)
    /// before it is made; a failed deletion throws and its transaction is not committed.
    func recordDeletion(everyValue: Bool) throws {
        guard let recorder, !recorder.overflowed, let current = try get(MDB_GET_CURRENT) else { return }
        recorder.delete(db, in: txn, key: current.key, value: everyValue ? nil : current.value)
    }
}

/// Asks the CPU to start loading the first `bytes` bytes at `address`, a value in the map read
/// soon (one cache line at a time); it does not wait, and never faults.
public func prefetch(_ address: UnsafeRawPointer, bytes: Int) {
    var offset = 0
    while offset < bytes {
        vaultlog_prefetch(address + offset)
        offset += 64
    }
}
