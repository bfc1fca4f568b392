import EventLog
import Foundation
import LMDB
@_spi(Tools) import OfflineSync

/// Opening a store for the reading commands: read-only, never creating anything.
enum StoreAccess {
    /// Checks that `path` is a store directory (so a mistyped path is an error, not a new
    /// empty store) and opens it read-only.
    static func openForReading(_ path: String) throws -> VaultLogStore {
        try requireStore(at: path)
        var options = VaultLogStoreOptions()
        options.eventLog.environment.readOnly = true
        options.eventLog.environment.createDirectory = false
        // A directory this user can read but not write (a copy from another account, a
        // read-only mount): LMDB needs write access to lock.mdb even to read, so read without it.
        let lock = (path as NSString).appendingPathComponent("lock.mdb")
        if !FileManager.default.isWritableFile(atPath: path)
            || (FileManager.default.fileExists(atPath: lock) && !FileManager.default.isWritableFile(atPath: lock)) {
            options.eventLog.environment.noLock = true
        }
        options.eventLog.logger = Console.logger("vaultlog.eventlog")
        options.logger = Console.logger("vaultlog.offlinesync")
        return try VaultLogStore(path: path, options: options)
    }

    /// Throws "no VaultLog store at PATH" unless `path` is a directory with a `data.mdb`.
    static func requireStore(at path: String) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw CLIError.storage("no VaultLog store at \(path) (no such directory); check the path")
        }
        guard isDirectory.boolValue else {
            throw CLIError.storage("no VaultLog store at \(path) (it is a file; give the store's directory)")
        }
        guard FileManager.default.isReadableFile(atPath: path), FileManager.default.isExecutableFile(atPath: path) else {
            throw CLIError.storage("\(path): directory not readable by this user (permissions); run as the store's owner")
        }
        let data = (path as NSString).appendingPathComponent("data.mdb")
        guard FileManager.default.fileExists(atPath: data) else {
            throw CLIError.storage("no VaultLog store at \(path) (no data.mdb in it); check the path")
        }
        guard FileManager.default.isReadableFile(atPath: data) else {
            throw CLIError.storage("\(data): not readable (permissions); run as the store's owner")
        }
    }

    /// Every user of the store: those with events, a compaction snapshot or a stored account, sorted.
    static func userIds(_ store: VaultLogStore) throws -> [String] {
        let withEvents = try store.log.read { try Set($0.userIds()).union($0.compactedUserIds()) }
        let withAccounts = try store.storedAccounts().map(\.userId)
        return Array(Set(withEvents).union(withAccounts)).sorted()
    }
}
