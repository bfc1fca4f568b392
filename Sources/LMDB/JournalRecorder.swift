import CLMDB

/// What one write transaction changed, written as operations a replay repeats in order: the
/// body of a journal record (see ``Journal``). Recorded by ``Transaction`` and ``Cursor`` as
/// each change succeeds; a nested transaction records into a recorder of its own, appended to
/// its parent's when it commits and dropped when it aborts.
///
/// Encoding, all integers little-endian: per operation a tag byte, the database's name (one
/// length byte, UTF-8) and its flags (`UInt32`), then per tag: `put` the put flags (`UInt32`),
/// key and value (each a `UInt32` length and the bytes); `delete` the key, then the value or
/// the length `0xFFFF_FFFF` for "every value of the key"; `open`, `clear`, `drop` nothing more.
final class JournalRecorder {
    enum Tag: UInt8 {
        case open = 1, put = 2, delete = 3, clear = 4, drop = 5
    }

    /// Recorded operations, encoded.
    private(set) var bytes: [UInt8] = []
    /// More than ``limit`` bytes were recorded: the record is dropped and the commit is made
    /// durable without one (see ``Environment``'s journal), so a bulk write stops paying for it.
    private(set) var overflowed = false
    /// The largest record the journal takes.
    let limit: Int

    init(limit: Int) {
        self.limit = limit
        bytes.reserveCapacity(4096)
    }

    var isEmpty: Bool { bytes.isEmpty && !overflowed }

    /// The flags of `db` in `txn` (`mdb_dbi_flags`), recorded so a replay opens it as it was.
    static func flags(_ txn: OpaquePointer, _ db: Database) -> UInt32 {
        var flags: UInt32 = 0
        _ = mdb_dbi_flags(txn, db.dbi, &flags)
        return flags
    }

    func open(_ name: String, flags: UInt32) {
        begin(.open, name, flags)
    }

    func put(_ db: Database, in txn: OpaquePointer, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, flags: UInt32) {
        guard !overflowed else { return }
        begin(.put, db.name, Self.flags(txn, db))
        append(flags)
        append(key)
        append(value)
        checkLimit()
    }

    func delete(_ db: Database, in txn: OpaquePointer, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer?) {
        guard !overflowed else { return }
        begin(.delete, db.name, Self.flags(txn, db))
        append(key)
        if let value { append(value) } else { append(UInt32.max) }
        checkLimit()
    }

    func clear(_ db: Database, dbFlags: UInt32) { begin(.clear, db.name, dbFlags) }

    func drop(_ db: Database, dbFlags: UInt32) { begin(.drop, db.name, dbFlags) }

    /// A committed nested transaction's operations, after this transaction's own.
    func absorb(_ child: JournalRecorder) {
        guard !overflowed else { return }
        if child.overflowed {
            overflowed = true
            bytes = []
            return
        }
        bytes.append(contentsOf: child.bytes)
        checkLimit()
    }

    private func begin(_ tag: Tag, _ name: String, _ dbFlags: UInt32) {
        guard !overflowed else { return }
        bytes.append(tag.rawValue)
        let utf8 = Array(name.utf8.prefix(255))
        bytes.append(UInt8(utf8.count))
        bytes.append(contentsOf: utf8)
        append(dbFlags)
    }

    private func append(_ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    private func append(_ buffer: UnsafeRawBufferPointer) {
        append(UInt32(buffer.count))
        bytes.append(contentsOf: buffer)
    }

    private func checkLimit() {
        if bytes.count > limit {
            overflowed = true
            bytes = []
        }
    }
}

/// Applies a journal record's operations (``JournalRecorder``'s encoding) in `txn`.
/// Throws ``JournalError`` on bytes that do not decode, LMDB's error when an operation fails.
func replayJournalOperations(_ body: UnsafeRawBufferPointer, in txn: OpaquePointer, journal: String) throws {
    var reader = ByteReader(body: body, journal: journal)
    var handles: [String: MDB_dbi] = [:]
    func handle(_ name: String, _ flags: UInt32, create: Bool) throws -> MDB_dbi {
        if !create, let known = handles[name] { return known }
        var dbi: MDB_dbi = 0
        let persistent = flags & UInt32(MDB_REVERSEKEY | MDB_DUPSORT | MDB_INTEGERKEY | MDB_DUPFIXED | MDB_INTEGERDUP | MDB_REVERSEDUP)
        try check(mdb_dbi_open(txn, name.isEmpty ? nil : name, persistent | (create ? UInt32(MDB_CREATE) : 0), &dbi),
                  "replay \(journal): mdb_dbi_open \(name)")
        handles[name] = dbi
        return dbi
    }
    while !reader.atEnd {
        let rawTag = try reader.byte()
        guard let tag = JournalRecorder.Tag(rawValue: rawTag) else {
            throw JournalError.damagedRecord(journal: journal, detail: "unknown operation \(rawTag)")
        }
        let name = try reader.name()
        let dbFlags = try reader.word()
        switch tag {
        case .open:
            _ = try handle(name, dbFlags, create: true)
        case .put:
            let dbi = try handle(name, dbFlags, create: false)
            let flags = try reader.word()
            var key = try reader.value()
            var value = try reader.value()
            try check(mdb_put(txn, dbi, &key, &value, flags), "replay \(journal): mdb_put \(name)")
        case .delete:
            let dbi = try handle(name, dbFlags, create: false)
            var key = try reader.value()
            let all = try reader.peekWord() == UInt32.max
            if all {
                _ = try reader.word()
                try check(mdb_del(txn, dbi, &key, nil), "replay \(journal): mdb_del \(name)")
            } else {
                var value = try reader.value()
                try check(mdb_del(txn, dbi, &key, &value), "replay \(journal): mdb_del \(name)")
            }
        case .clear:
            try check(mdb_drop(txn, try handle(name, dbFlags, create: false), 0), "replay \(journal): mdb_drop \(name)")
        case .drop:
            try check(mdb_drop(txn, try handle(name, dbFlags, create: false), 1), "replay \(journal): mdb_drop \(name) (delete)")
            handles[name] = nil
        }
    }
}

/// Reads a record body, each read checked against its end.
private struct ByteReader {
    let body: UnsafeRawBufferPointer
    let journal: String
    var offset = 0

    var atEnd: Bool { offset >= body.count }

    mutating func take(_ count: Int) throws -> UnsafeRawBufferPointer {
        guard count >= 0, body.count - offset >= count else {
            throw JournalError.damagedRecord(journal: journal, detail: "an operation runs past the record's end")
        }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: body[offset..<offset + count])
    }

    mutating func byte() throws -> UInt8 { try take(1)[0] }

    mutating func word() throws -> UInt32 {
        UInt32(littleEndian: try take(4).loadUnaligned(as: UInt32.self))
    }

    func peekWord() throws -> UInt32 {
        var copy = self
        return try copy.word()
    }

    mutating func name() throws -> String {
        let count = Int(try byte())
        return String(decoding: try take(count), as: UTF8.self)
    }

    mutating func value() throws -> MDB_val {
        let bytes = try take(Int(try word()))
        return MDB_val(mv_size: bytes.count, mv_data: UnsafeMutableRawPointer(mutating: bytes.baseAddress))
    }
}
