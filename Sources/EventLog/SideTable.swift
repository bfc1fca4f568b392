import LMDB

/// A table of the domain's own beside the log, in the same LMDB environment (the local item
/// cache, accounts, pending checkpoints): written in the same transaction as the events that
/// explain it, so a crash never separates the two. Keys and values are bytes; the domain owns
/// their layout. Open one with ``EventLogStore/openSideTable(_:)``.
public struct SideTable: Sendable, Hashable {
    let database: Database

    /// The table's name in the environment.
    public var name: String { database.name }
}

extension EventLogStore {
    /// Opens (creating, unless the store is read-only) the side table `name`. The log's own
    /// names (`events`, `index`, `checkpoints`, `meta`, `heads`) are refused.
    public func openSideTable(_ name: String) throws -> SideTable {
        SideTable(database: try openDatabase(name))
    }
}

extension LogReader {
    /// The value stored under `key`, or nil.
    public func get(_ table: SideTable, key: [UInt8]) throws -> [UInt8]? {
        try transaction.get(table.database, key: key)
    }

    /// Visits entries in key order from `start` (the first key when nil) while `body` returns
    /// true. Keys and values are valid only during the call.
    public func scan(_ table: SideTable, from start: [UInt8]? = nil,
                     _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool) throws {
        try transaction.scan(table.database, from: start, body)
    }
}

extension LogTransaction {
    /// The value stored under `key`, or nil (this transaction's writes included).
    public func get(_ table: SideTable, key: [UInt8]) throws -> [UInt8]? {
        try reader.get(table, key: key)
    }

    /// Visits entries in key order (see ``LogReader/scan(_:from:_:)``).
    public func scan(_ table: SideTable, from start: [UInt8]? = nil,
                     _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool) throws {
        try reader.scan(table, from: start, body)
    }

    /// Stores `value` under `key`, replacing any value.
    public func put(_ table: SideTable, key: [UInt8], value: [UInt8]) throws {
        try transaction.put(table.database, key: key, value: value)
    }

    /// Removes `key`; false when it was absent.
    @discardableResult
    public func delete(_ table: SideTable, key: [UInt8]) throws -> Bool {
        try transaction.delete(table.database, key: key)
    }
}

/// The sizes of `data.mdb` before and after ``EventLogStore/compactFile(at:)``.
public typealias FileCompaction = Environment.Compaction

extension EventLogStore {
    /// Whether the store was opened read-only.
    public var isReadOnly: Bool { environment.options.readOnly }

    /// Closes the store's environment (also done when it is released).
    public func close() { environment.close() }

    /// Rewrites the closed store at `path` without free pages, atomically (LMDB's compacting
    /// copy and a rename): deleted records no longer linger in `data.mdb`. Takes the store's
    /// lock exclusively for the whole rewrite, without waiting: refused before anything is
    /// written (`StoreInUseError`) while any other open of the store exists, in this process or
    /// another; an open that begins meanwhile waits for the new file.
    @discardableResult
    public static func compactFile(at path: String) throws -> FileCompaction {
        try Environment.compactFile(at: path)
    }
}
