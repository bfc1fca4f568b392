import EventLog
import Foundation
import LMDB
import VaultCrypto

/// `vaultlog-bench log [--events N] [--batch N] [--body BYTES]`: sealed batched append and
/// sequential read + open throughput of the event log, on a real synced LMDB store in a temp dir.
func runLogBench(arguments: [String]) throws {
    func value(_ name: String, _ fallback: Int) -> Int {
        guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count, let v = Int(arguments[i + 1]) else { return fallback }
        return v
    }
    let total = value("--events", 1_000_000)
    let batch = value("--batch", 10_000)
    let bodySize = value("--body", 600)
    let dir = NSTemporaryDirectory() + "/vaultlog-bench-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: dir) }

    var options = EventLogOptions()
    options.environment.mapSize = 1 << 30
    let store = try EventLogStore(path: dir, options: options)
    let key = SealingKey(userKey: SymmetricCryptoKey.generate())
    // A body the size of a typical encrypted login snapshot.
    let body = [UInt8](repeating: 0x7B, count: bodySize)
    let events = (0..<batch).map { i in
        NewEvent(userId: "8a1b3c4d-0000-4000-8000-00000000000\(i % 10)", cipherId: "c0ffee00-0000-4000-8000-\(String(format: "%012d", i % 1000))",
                 eventType: 2, recordedAtMillis: 1_700_000_000_000 + Int64(i), body: body)
    }

    let appendStart = ContinuousClock.now
    var appended = 0
    while appended < total {
        let n = min(batch, total - appended)
        try store.append(n == batch ? events : Array(events[0..<n]), key: key)
        appended += n
    }
    let appendSeconds = seconds(ContinuousClock.now - appendStart)

    if arguments.contains("--append-only") {
        print("{\"bench\": \"sealed_batched_append\", \"metric\": \"throughput\", \"unit\": \"events/s\", \"value\": \(Int(Double(total) / appendSeconds))}")
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
    let info = try store.environment.info()

    print("""
    {"bench": "sealed_batched_append", "metric": "throughput", "unit": "events/s", "value": \(Int(Double(total) / appendSeconds)), "events": \(total), "batch": \(batch), "body_bytes": \(bodySize), "seconds": \(String(format: "%.3f", appendSeconds)), "target": 300000}
    {"bench": "sequential_read_open", "metric": "throughput", "unit": "events/s", "value": \(Int(Double(total) / readSeconds)), "events": \(total), "seconds": \(String(format: "%.3f", readSeconds))}
    {"bench": "store_size", "metric": "bytes", "unit": "bytes", "value": \(info.usedBytes), "map_size": \(info.mapSize)}
    """)
}

func seconds(_ duration: Duration) -> Double {
    let (s, attoseconds) = duration.components
    return Double(s) + Double(attoseconds) / 1e18
}

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "log":
    try runLogBench(arguments: Array(arguments.dropFirst()))
case "breakdown":
    try runBreakdownBench(arguments: Array(arguments.dropFirst()))
case "resolver":
    try await runResolverBench(arguments: Array(arguments.dropFirst()))
default:
    FileHandle.standardError.write(Data("""
        usage: vaultlog-bench log [--events N] [--batch N] [--body BYTES] [--append-only]
               vaultlog-bench resolver [--items N] [--latency MS] [--concurrency C] [--creates] [--rounds R]

        """.utf8))
    exit(2)
}
