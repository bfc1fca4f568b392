import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultModel

/// `vaultlog-bench profile-save [N] [--cpu] [--shape]`: a loop to run under a profiler: `N`
/// offline saves of one item into a fresh store. `--cpu` opens the store without flushes
/// (`.noSync`), so what is left is the engine's own work and LMDB's page writes in memory;
/// `--shape` runs ``CommitShapeFloor``'s commit instead of the save (the floor the save is
/// measured against). Prints the mean time per save on stderr.
func runProfileSave(arguments: [String]) throws {
    let count = arguments.first.flatMap { Int($0) } ?? 2000
    let cpu = arguments.contains("--cpu"), shapeOnly = arguments.contains("--shape")
    try withScratchDirectory("profile-save") { dir in
        let key = SymmetricCryptoKey.generate()
        let userId = "5e1f0c3a-7d42-4b8e-9f10-aa0000000001"
        let versions = try loginVersions(name: "Bank account 1", n: 1, key: key)
        let start: ContinuousClock.Instant
        if shapeOnly {
            let shape = try CommitShapeFloor(directory: dir + "/shape", userId: userId, durability: cpu ? .noSync : .full,
                                             eventSizes: [900], items: [(versions[0].id!, Array(try JSONEncoder().encode(versions[0])))])
            start = .now
            for n in 0..<count { try shape.commit(n) }
            shape.close()
        } else {
            var options = VaultLogStoreOptions()
            if cpu { options.eventLog.environment.durability = .noSync }
            let store = try VaultLogStore(path: dir + "/vaultlog", options: options)
            store.unlock(userId: userId, userKey: key)
            start = .now
            for n in 0..<count {
                let cipher = versions[n % 2]
                try store.append(userId: userId, cipherId: cipher.id!, type: .updated,
                                 body: .operation(OperationBody(cipher: cipher, passwordChanged: true,
                                                                baseRevisionDate: cipher.revisionDate, at: BitwardenDate(Date()))),
                                 localChanges: [.upsert(cipher)])
            }
            store.close()
        }
        let perSave = seconds(ContinuousClock.now - start) / Double(count) * 1e6
        progress(String(format: "%@: %.1f µs per save over %d", shapeOnly ? "lmdb_commit_same_shape" : "durable_save", perSave, count))
    }
}
