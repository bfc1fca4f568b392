import CLMDB
import Foundation

/// An LMDB failure, carrying LMDB's own text (`mdb_strerror`) and what we were doing.
public struct LMDBError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The LMDB (or errno) return code.
    public let code: Int32
    /// `mdb_strerror(code)`.
    public let message: String
    /// The operation that failed, e.g. `"mdb_env_open /var/db/vault"`.
    public let operation: String

    /// The error of LMDB return code `code` (its `mdb_strerror` text becomes ``message``) in `operation`.
    public init(code: Int32, operation: String) {
        self.code = code
        self.operation = operation
        self.message = String(cString: mdb_strerror(code))
    }

    /// The operation, LMDB's message and the numeric code, e.g.
    /// `"mdb_put log: MDB_MAP_FULL: Environment mapsize limit reached (code -30792)"`.
    public var description: String { "\(operation): \(message) (code \(code))" }

    /// The map is full; the environment grows it and retries, so callers rarely see this.
    public var isMapFull: Bool { code == MDB_MAP_FULL }
    /// A key already exists (or `MDB_APPEND` was given a key out of order).
    public var isKeyExists: Bool { code == MDB_KEYEXIST }
    /// The file is not an LMDB environment, or its version does not match.
    public var isInvalidFile: Bool { code == MDB_INVALID || code == MDB_VERSION_MISMATCH }
    /// A page was found corrupted.
    public var isCorrupted: Bool { code == MDB_CORRUPTED || code == MDB_PAGE_NOTFOUND }
}

@inline(__always)
func check(_ code: Int32, _ operation: @autoclosure () -> String) throws {
    if code != MDB_SUCCESS { throw LMDBError(code: code, operation: operation()) }
}

extension LMDBError: LocalizedError {
    /// The same text as ``description`` (without it, Apple platforms and Foundation show
    /// "The operation couldn't be completed. (LMDB.LMDBError error 1.)").
    public var errorDescription: String? { description }
}
