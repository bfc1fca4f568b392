import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultModel

/// Part of group "concurrency": two processes saving into one store (an app and its autofill
/// extension on one account), each one thread of durable saves of items of its own, against one
/// such process alone. Each process is this binary's `save-worker`: it opens the store, encrypts
/// its versions, says `ready`, waits for `go` on stdin, saves, and prints its latencies. Rounds
/// alternate one process alone and two at once; the value is saves per second over the
/// processes (from the first `go` to the last exit, so the fork and the store's opening are not
/// counted), the median of the rounds.
func runTwoProcessSaves(quick: Bool, results: Results) throws {
    let saves = quick ? 100 : 300
    let rounds = quick ? 3 : 5
    progress("concurrency: two processes on one store, \(rounds) rounds × \(saves) durable saves per process, against one process")
    let keyBytes = SystemRandomSource().bytes(64)
    let keyText = Data(keyBytes).base64EncodedString()
    let userId = "5e1f0c3a-7d42-4b8e-9f10-aa0000000002"
    try withScratchDirectory("two-process") { dir in
        let store = dir + "/vaultlog"
        var single: [Double] = [], pair: [Double] = [], pairLatencies: [Double] = [], singleLatencies: [Double] = []
        for round in 0..<rounds {
            for processes in [1, 2] {
                let run = try runSaveWorkers(count: processes, store: store, key: keyText, userId: userId, saves: saves, round: round)
                if processes == 1 {
                    single.append(run.rate)
                    singleLatencies += run.latencies
                } else {
                    pair.append(run.rate)
                    pairLatencies += run.latencies
                }
            }
        }
        let two = Stats(values: pair), one = Stats(values: single)
        let p50 = percentile(pairLatencies, 0.5), p99 = percentile(pairLatencies, 0.99)
        results.add(Figure(group: "concurrency", bench: "durable_save_two_processes", metric: "throughput", unit: "ops/s", value: two,
                           baseline: "one_process", baselineValue: one, ratio: two.median / one.median, target: .ratioAtLeast(0.8),
                           extra: ["saves_per_process_per_round": "\(saves)", "p50_ms": json(p50 * 1000), "p99_ms": json(p99 * 1000),
                                   "one_process_p50_ms": json(percentile(singleLatencies, 0.5) * 1000)]))
        results.add(Figure(group: "concurrency", bench: "durable_save_two_processes_p99", metric: "latency_p99", unit: "ms",
                           value: Stats(values: [p99 * 1000]), baseline: "two_processes_p50", baselineValue: Stats(values: [p50 * 1000]),
                           ratio: p99 / p50, target: .ratioAtMost(3),
                           extra: ["p95_ms": json(percentile(pairLatencies, 0.95) * 1000),
                                   "p999_ms": json(percentile(pairLatencies, 0.999) * 1000),
                                   "max_ms": json(percentile(pairLatencies, 1) * 1000),
                                   "one_process_p99_ms": json(percentile(singleLatencies, 0.99) * 1000)]))
    }
}

/// Starts `count` save workers on `store`, lets them go at once, and returns their saves per
/// second together and every save's latency (seconds).
private func runSaveWorkers(count: Int, store: String, key: String, userId: String, saves: Int,
                            round: Int) throws -> (rate: Double, latencies: [Double]) {
    let binary = CommandLine.arguments[0]
    var workers: [(process: Process, input: Pipe, output: Pipe)] = []
    for w in 0..<count {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["save-worker", store, "--key", key, "--user", userId, "--worker", "\(round * 2 + w)", "--saves", "\(saves)"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        workers.append((process, input, output))
    }
    for worker in workers {
        guard readLine(worker.output.fileHandleForReading) == "ready" else { throw BenchError("a save worker did not start") }
    }
    let start = ContinuousClock.now
    for worker in workers { worker.input.fileHandleForWriting.write(Data("go\n".utf8)) }
    var latencies: [Double] = []
    for worker in workers {
        let line = readLine(worker.output.fileHandleForReading) ?? ""
        worker.process.waitUntilExit()
        guard worker.process.terminationStatus == 0, let data = line.data(using: .utf8),
              let values = try? JSONDecoder().decode([Double].self, from: data), values.count == saves else {
            throw BenchError("a save worker failed (exit \(worker.process.terminationStatus)): \(line)")
        }
        latencies += values
    }
    let elapsed = seconds(ContinuousClock.now - start)
    return (Double(count * saves) / elapsed, latencies)
}

/// One line from `handle` (without its newline), or nil at the end.
private func readLine(_ handle: FileHandle) -> String? {
    var bytes: [UInt8] = []
    while let byte = try? handle.read(upToCount: 1), let first = byte.first {
        if first == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
        bytes.append(first)
    }
    return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
}

/// `vaultlog-bench save-worker DIR --key BASE64 --user ID --worker W --saves N`: the child of
/// ``runTwoProcessSaves(quick:results:)``. Edits 10 items of its own (ids from `W`), two
/// versions each, encrypted before it says `ready`; after `go`, N durable saves; prints the
/// latencies in seconds as one JSON array.
func runSaveWorker(arguments: [String]) throws {
    func option(_ name: String) throws -> String {
        guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { throw BenchError("save-worker needs \(name)") }
        return arguments[i + 1]
    }
    guard let dir = arguments.first, !dir.hasPrefix("--") else { throw BenchError("save-worker needs a directory") }
    guard let keyBytes = Data(base64Encoded: try option("--key")) else { throw BenchError("save-worker: --key is not base64") }
    let key = try SymmetricCryptoKey(bytes: Array(keyBytes))
    let userId = try option("--user")
    guard let worker = Int(try option("--worker")), let saves = Int(try option("--saves")) else {
        throw BenchError("save-worker: --worker and --saves take numbers")
    }
    let versions = try (0..<10).map { n in try loginVersions(name: "Process \(worker) item \(n)", n: n, key: key) }
    let store = try VaultLogStore(path: dir)
    store.unlock(userId: userId, userKey: key)
    FileHandle.standardOutput.write(Data("ready\n".utf8))
    guard Swift.readLine() == "go" else { throw BenchError("save-worker: no go") }
    var latencies: [Double] = []
    latencies.reserveCapacity(saves)
    for i in 0..<saves {
        let cipher = versions[i % 10][(i / 10) % 2]
        let t = ContinuousClock.now
        try store.append(userId: userId, cipherId: cipher.id!, type: .updated,
                         body: .operation(OperationBody(cipher: cipher, passwordChanged: true, baseRevisionDate: cipher.revisionDate,
                                                        at: BitwardenDate(Date()))),
                         localChanges: [.upsert(cipher)])
        latencies.append(seconds(ContinuousClock.now - t))
    }
    store.close()
    FileHandle.standardOutput.write(try JSONEncoder().encode(latencies) + Data("\n".utf8))
}
