import EventLog
import Foundation
import LMDB
@_spi(Tools) import OfflineSync
import VaultJSON
import VaultModel
import VaultCrypto

/// `vaultlog-bench log [--events N] [--batch N] [--body BYTES] [--items N] [--merge-interval N] [--calls] [--append-only]`:
/// sealed batched append and sequential read + open throughput of the event log, on a real
/// synced LMDB store in a temp dir. A batch's events go round-robin over 10 users and `--items`
/// items (default 1,000, as in the suite's append group). `--users N` (default 10) spreads them
/// over N users instead; `--keep DIR` writes the store to DIR (which must not exist) and leaves
/// it there, for `mdb_stat` of its pages.
func runLogBench(arguments: [String]) throws {
    let total = intOption("--events", in: arguments, default: 1_000_000)
    let batch = intOption("--batch", in: arguments, default: 10_000)
    let bodySize = intOption("--body", in: arguments, default: 600)
    let items = intOption("--items", in: arguments, default: 1000)
    let users = intOption("--users", in: arguments, default: 10)
    let kept = arguments.firstIndex(of: "--keep").flatMap { arguments.indices.contains($0 + 1) ? arguments[$0 + 1] : nil }
    if let kept, FileManager.default.fileExists(atPath: kept) {
        FileHandle.standardError.write(Data("error: --keep \(kept): it exists; give a new directory for the store\n".utf8))
        exit(2)
    }
    let dir = kept ?? NSTemporaryDirectory() + "/vaultlog-bench-\(UUID().uuidString)"
    defer { if kept == nil { try? FileManager.default.removeItem(atPath: dir) } }

    var options = EventLogOptions()
    options.environment.mapSize = 1 << 30
    options.itemIndexMergeInterval = intOption("--merge-interval", in: arguments, default: options.itemIndexMergeInterval)
    let store = try EventLogStore(path: dir, options: options)
    let key = SealingKey(userKey: SymmetricCryptoKey.generate())
    // A body the size of a typical encrypted login snapshot.
    let body = [UInt8](repeating: 0x7B, count: bodySize)
    let events = (0..<batch).map { i in
        NewEvent(userId: "8a1b3c4d-0000-4000-8000-\(String(format: "%012d", i % users))", cipherId: "c0ffee00-0000-4000-8000-\(String(format: "%012d", i % items))",
                 eventType: 2, recordedAtMillis: 1_700_000_000_000 + Int64(i), body: body)
    }

    // Batches of `batch` events, the last one shorter: by default through the bulk append (the
    // next batch sealed while the current one commits), with --calls one `append` call each.
    let batches = stride(from: 0, to: total, by: batch).lazy.map { start in
        total - start >= batch ? events : Array(events[0..<(total - start)])
    }
    let writtenBefore = bytesWritten(), storageBefore = bytesToStorage()
    let appendStart = ContinuousClock.now
    if arguments.contains("--calls") {
        for events in batches { try store.append(events, key: key) }
    } else {
        try store.append(batches: batches, key: key)
    }
    let appendSeconds = seconds(ContinuousClock.now - appendStart)
    let writtenPerEvent = Double(bytesWritten() - writtenBefore) / Double(total)
    let storagePerEvent = Int(Double(bytesToStorage() - storageBefore) / Double(total))

    if arguments.contains("--append-only") {
        print("{\"bench\": \"sealed_batched_append\", \"metric\": \"throughput\", \"unit\": \"events/s\", \"value\": \(Int(Double(total) / appendSeconds)), \"items\": \(items), \"merge_interval\": \(options.itemIndexMergeInterval), \"bytes_written_per_event\": \(Int(writtenPerEvent)), \"bytes_to_storage_per_event\": \(storagePerEvent)}")
        return
    }
    let readStart = ContinuousClock.now
    var opened = 0
    var checksum = 0
    try store.forEachEnvelope(batchSize: 10_000) { envelope in
        checksum &+= try envelope.open(key: key).count
        opened += 1
        return true
    }
    let readSeconds = seconds(ContinuousClock.now - readStart)
    precondition(opened == total && checksum == total * bodySize, "read back \(opened) events")
    let info = try store.sizes()

    print("""
    {"bench": "sealed_batched_append", "metric": "throughput", "unit": "events/s", "value": \(Int(Double(total) / appendSeconds)), "events": \(total), "batch": \(batch), "body_bytes": \(bodySize), "items": \(items), "bytes_written_per_event": \(Int(writtenPerEvent)), "bytes_to_storage_per_event": \(storagePerEvent), "seconds": \(String(format: "%.3f", appendSeconds)), "target": 300000}
    {"bench": "sequential_read_open", "metric": "throughput", "unit": "events/s", "value": \(Int(Double(total) / readSeconds)), "events": \(total), "seconds": \(String(format: "%.3f", readSeconds))}
    {"bench": "store_size", "metric": "bytes", "unit": "bytes", "value": \(info.usedBytes), "map_size": \(info.mapSize)}
    """)
}

let arguments = Array(CommandLine.arguments.dropFirst())
/// A subcommand's error (a missing directory, an unknown option value, a store that cannot be
/// read) ends the run with its message and exit status 1, not a crash report.
do {
    switch arguments.first {
    case "suite":
        do {
            try await runSuite(arguments: Array(arguments.dropFirst()))
        } catch {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            exit(1)
        }
    case "log":
        try runLogBench(arguments: Array(arguments.dropFirst()))
    case "profile-crypto":
        // A loop to run under a profiler: EncString encrypt + serialize + parse + decrypt of 4 KiB.
        let key = SymmetricCryptoKey.generate()
        let block = [UInt8](repeating: 0x42, count: 4096)
        for _ in 0..<(Int(arguments.dropFirst().first ?? "") ?? 20_000) {
            let bytes = EncString.encrypt(block, key: key).serializedBytes
            _ = try EncString(parsing: bytes).decrypt(key: key)
        }
    case "profile-json":
        // A loop to run under a profiler: a login cipher's stored JSON (`SortedJSONEncoder`).
        let key = SymmetricCryptoKey.generate()
        let view = CipherView(type: .login, name: "Bank account", notes: "Security questions: first pet Rex, street Elm",
                              login: LoginView(username: "user@example.com", password: "correct horse battery staple",
                                               uris: [LoginUriView(uri: "https://bank.example.com/login")]))
        let cipher = try view.encrypt(userKey: key)
        for _ in 0..<(Int(arguments.dropFirst().first ?? "") ?? 200_000) { _ = try SortedJSONEncoder().encode(cipher) }
    case "profile-save":
        try runProfileSave(arguments: Array(arguments.dropFirst()))
    case "profile-fold":
        try runProfileFold(arguments: Array(arguments.dropFirst()))
    case "save-worker":
        try runSaveWorker(arguments: Array(arguments.dropFirst()))
    case "breakdown":
        try runBreakdownBench(arguments: Array(arguments.dropFirst()))
    case "resolver":
        try await runResolverBench(arguments: Array(arguments.dropFirst()))
    default:
        FileHandle.standardError.write(Data("""
            usage: vaultlog-bench suite [--quick] [--groups save,concurrency,append,projection,resolver,crypto,export,compaction] [--report PATH] [--analysis PATH]
                   vaultlog-bench log [--events N] [--batch N] [--body BYTES] [--items N] [--users N] [--merge-interval N] [--append-only] [--calls] [--keep DIR]
                   vaultlog-bench breakdown [--events N]
                   vaultlog-bench profile-save [N] [--cpu] [--shape]
                   vaultlog-bench profile-fold DIR [--events N] [--headers | --floor [--mac]] [--rounds R]
                   vaultlog-bench resolver [--items N] [--latency MS] [--concurrency C] [--creates] [--rounds R]
                   vaultlog-bench save-worker DIR --key BASE64 --user ID --worker W --saves N   (the concurrency group's child process)

            """.utf8))
        exit(2)
    }
} catch {
    FileHandle.standardError.write(Data("vaultlog-bench: \(error)\n".utf8))
    exit(1)
}

/// `vaultlog-bench suite`: the eight comparison groups; one JSON object per figure on stdout,
/// progress on stderr, and with `--report` the Markdown report and its chart.
func runSuite(arguments: [String]) async throws {
    func option(_ name: String) -> String? {
        guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
        return arguments[i + 1]
    }
    let quick = arguments.contains("--quick")
    let all = ["save", "concurrency", "append", "projection", "resolver", "crypto", "export", "compaction"]
    let groups = option("--groups")?.split(separator: ",").map(String.init) ?? all
    if let unknown = groups.first(where: { !all.contains($0) }) {
        throw BenchError("unknown group '\(unknown)'; the groups are \(all.joined(separator: ", "))")
    }
    let results = Results()
    let start = ContinuousClock.now
    for group in groups {
        switch group {
        case "save": try runSaveBench(quick: quick, results: results)
        case "concurrency": try runConcurrencyBench(quick: quick, results: results)
        case "append": try runAppendBench(quick: quick, results: results)
        case "projection": try runProjectionBench(quick: quick, results: results)
        case "resolver": try await runResolverGroup(quick: quick, results: results)
        case "export": try runExportBench(quick: quick, results: results)
        case "compaction": try runCompactionBench(quick: quick, results: results)
        default: try runCryptoBench(quick: quick, results: results)
        }
    }
    progress(String(format: "%d figures in %.0f s", results.figures.count, seconds(ContinuousClock.now - start)))
    if let report = option("--report") {
        let command = option("--command") ?? "vaultlog-bench suite \(arguments.joined(separator: " "))"
        try writeReport(results, path: report, command: command, quick: quick, analysisPath: option("--analysis"))
    }
}
