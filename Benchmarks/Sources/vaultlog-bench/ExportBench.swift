import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultModel
import VaultLogTesting

/// Group "export": `vaultlog export` and `vaultlog import` as the library runs them
/// (`VaultLogStore.writeExport`, `ExportFile` + `VaultLogStore.importEvents`), on a store of
/// 100,000 events (20,000 quick) whose bodies are a sealed login snapshot of about 1 KB, as an
/// app's log holds. Export writes the file (no fsync); import is `vaultlog import` without a
/// key: the metadata line, then one pass that checks every line as it writes it, in one
/// durable transaction.
func runExportBench(quick: Bool, results: Results) throws {
    let rounds = quick ? 3 : 5
    let events = quick ? 20_000 : 100_000
    progress("export/import: \(rounds) rounds over a store of \(events) events")
    try withScratchDirectory("export") { dir in
        let userId = "8a1b3c4d-0000-4000-8000-000000000001"
        let userKey = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 1))
        var options = VaultLogStoreOptions()
        options.eventLog.environment.mapSize = 1 << 30
        let store = try VaultLogStore(path: dir + "/source", options: options)
        defer { store.close() }
        store.unlock(userId: userId, userKey: userKey)
        let view = CipherView(type: .login, name: "Bank", notes: String(repeating: "n", count: 300),
                              login: LoginView(username: "alice@example.com", password: "correct horse battery staple",
                                               uris: [LoginUriView(uri: "https://bank.example.com/login")]))
        let cipher = try view.encrypt(userKey: userKey, random: SeededRandomSource(seed: 2))
        for batch in stride(from: 0, to: events, by: 10_000) {
            let planned = (batch..<min(events, batch + 10_000)).map { i -> VaultLogStore.PlannedEvent in
                var item = cipher
                item.id = "c0ffee00-0000-4000-8000-\(String(format: "%012d", i % 5_000))"
                return .init(cipherId: item.id!, type: .updated,
                             body: .operation(OperationBody(cipher: item, passwordChanged: i % 3 == 0, baseRevisionDate: nil,
                                                            at: BitwardenDate(Date(timeIntervalSince1970: 1_700_000_000 + Double(i))))))
            }
            try store.append(userId: userId, events: planned)
        }

        let file = dir + "/store.jsonl"
        var round = 0
        let stats = try interleave(rounds: rounds, [
            ("export", {
                _ = FileManager.default.createFile(atPath: file, contents: nil)
                let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: file))
                defer { try? handle.close() }
                let seconds = try time { _ = try store.writeExport({ try handle.write(contentsOf: $0) }) }
                return Double(events) / seconds
            }),
            ("import", {
                round += 1
                var copyOptions = VaultLogStoreOptions()
                copyOptions.eventLog.environment.mapSize = 1 << 30
                var export: ExportFile?
                let scan = try time { export = try ExportFile(path: file, checkingEveryLine: false) }
                let load = try time {
                    let copy = try VaultLogStore(path: dir + "/copy-\(round)", options: copyOptions)
                    defer { copy.close() }
                    try copy.importEvents(from: export!)
                }
                let seconds = scan + load
                progress(String(format: "import round %d: metadata %.3f s, checking and writing pass %.2f s", round, scan, load))
                try? FileManager.default.removeItem(atPath: dir + "/copy-\(round)")
                return Double(events) / seconds
            }),
        ])
        let size = ((try? FileManager.default.attributesOfItem(atPath: file)[.size]) as? Int) ?? 0
        let extra = ["events": "\(events)", "file_bytes": "\(size)"]
        results.add(Figure(group: "export", bench: "export", metric: "throughput", unit: "events/s", value: stats["export"]!,
                           target: .atLeast(50_000), extra: extra))
        results.add(Figure(group: "export", bench: "import", metric: "throughput", unit: "events/s", value: stats["import"]!,
                           target: .atLeast(50_000), extra: extra))
    }
}
