import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultModel

/// Group "concurrency", durable saves under concurrency: 8 threads save at once (the app, an
/// autofill extension, the resolver writing outcomes…), each save durable when it returns,
/// each thread editing items of its own of one account:
/// - `vaultlog`: `VaultLogStore.append(…localChanges:)` (blocking), which group-commits: the
///   saves that queue while a commit flushes share the next commit;
/// - `sqlite_seed`: the seed design on SQLite (`SeedSQLiteStore`, WAL, `synchronous=FULL`),
///   the same 8 threads on one database queue.
/// Contenders interleave round by round; the value is saves per second over all threads. A
/// third contender, the same store with the leader's wait for announced saves turned off
/// (`groupGatherLimit = 0`), shows what that wait gives (`no_gather_*` in the figure's extras).
/// Then two processes saving into one store against one (``runTwoProcessSaves(quick:results:)``).
func runConcurrencyBench(quick: Bool, results: Results) throws {
    let writers = 8
    let savesPerWriter = quick ? 40 : 150
    let rounds = quick ? 3 : 5
    let itemsPerWriter = 10
    progress("concurrency: \(rounds) rounds × \(writers) threads × \(savesPerWriter) durable saves per contender, interleaved")

    let key = SymmetricCryptoKey.generate()
    let userId = "5e1f0c3a-7d42-4b8e-9f10-aa0000000008"
    // Per writer, per item, two encrypted versions (the password changes between them).
    let versions: [[[Cipher]]] = try (0..<writers).map { w in
        try (0..<itemsPerWriter).map { n in try loginVersions(name: "Writer \(w) item \(n)", n: n, key: key) }
    }
    @Sendable func cipher(writer: Int, save: Int) -> Cipher {
        versions[writer][save % itemsPerWriter][(save / itemsPerWriter) % 2]
    }

    /// One durable offline save of the writer's next version (event and local copy together).
    @Sendable func save(to store: VaultLogStore, writer: Int, save: Int) throws {
        let c = cipher(writer: writer, save: save)
        try store.append(userId: userId, cipherId: c.id!, type: .updated,
                         body: .operation(OperationBody(cipher: c, passwordChanged: true, baseRevisionDate: c.revisionDate,
                                                        at: BitwardenDate(Date()))),
                         localChanges: [.upsert(c)])
    }

    try withScratchDirectory("concurrency") { dir in
        let store = try VaultLogStore(path: dir + "/vaultlog")
        store.unlock(userId: userId, userKey: key)
        // The same store without the leader's wait for announced saves, for comparison.
        var ungathered = VaultLogStoreOptions()
        ungathered.eventLog.environment.groupGatherLimit = .zero
        let plain = try VaultLogStore(path: dir + "/vaultlog-no-gather", options: ungathered)
        plain.unlock(userId: userId, userKey: key)
        let sqlite = UncheckedBox(try SeedSQLiteStore(path: dir + "/seed.sqlite"))
        let latencies = LatencyLog()

        let stats = try interleave(rounds: rounds, [
            ("vaultlog", {
                try concurrently(writers: writers, saves: savesPerWriter, name: "vaultlog", latencies: latencies) { w, i in
                    try save(to: store, writer: w, save: i)
                }
            }),
            ("vaultlog_no_gather", {
                try concurrently(writers: writers, saves: savesPerWriter, name: "vaultlog_no_gather", latencies: latencies) { w, i in
                    try save(to: plain, writer: w, save: i)
                }
            }),
            ("sqlite_seed", {
                try concurrently(writers: writers, saves: savesPerWriter, name: "sqlite_seed", latencies: latencies) { w, i in
                    try sqlite.value.saveOffline(cipher(writer: w, save: i), userId: userId, passwordChanged: true)
                }
            }),
        ])
        // Every save is in the log and the projection counts each writer's items.
        let pending = try store.projection(userId: userId).pendingCount
        precondition(pending == writers * itemsPerWriter, "expected \(writers * itemsPerWriter) pending items, found \(pending)")
        store.close()
        plain.close()

        let v = stats["vaultlog"]!, s = stats["sqlite_seed"]!
        let seen = latencies.all()
        func ms(_ name: String, _ p: Double) -> String { json(percentile(seen[name] ?? [], p) * 1000) }
        results.add(Figure(group: "concurrency", bench: "durable_save_concurrent_8", metric: "throughput", unit: "ops/s", value: v,
                           baseline: "sqlite_seed", baselineValue: s, ratio: v.median / s.median, target: .ratioAtLeast(3),
                           extra: ["writers": "\(writers)", "saves_per_writer_per_round": "\(savesPerWriter)",
                                   "p50_ms": ms("vaultlog", 0.5), "p99_ms": ms("vaultlog", 0.99),
                                   "sqlite_seed_p50_ms": ms("sqlite_seed", 0.5), "sqlite_seed_p99_ms": ms("sqlite_seed", 0.99),
                                   "no_gather_ops_s": json(stats["vaultlog_no_gather"]!.median),
                                   "no_gather_ratio": json(stats["vaultlog_no_gather"]!.median / s.median)]))
    }
    try runTwoProcessSaves(quick: quick, results: results)
}

/// Runs `saves` calls of `save(writer, i)` on each of `writers` threads of their own, all
/// started together; records each call's latency under `name`; returns calls per second.
private func concurrently(writers: Int, saves: Int, name: String, latencies: LatencyLog,
                          _ save: @escaping @Sendable (Int, Int) throws -> Void) throws -> Double {
    let group = DispatchGroup()
    let ready = DispatchSemaphore(value: 0)
    let go = DispatchSemaphore(value: 0)
    let failure = FirstError()
    for w in 0..<writers {
        group.enter()
        Thread.detachNewThread {
            defer { group.leave() }
            ready.signal()
            go.wait()
            var mine: [Double] = []
            mine.reserveCapacity(saves)
            do {
                for i in 0..<saves {
                    let t = ContinuousClock.now
                    try save(w, i)
                    mine.append(seconds(ContinuousClock.now - t))
                }
            } catch {
                failure.record(error)
            }
            latencies.add(mine, to: name)
        }
    }
    for _ in 0..<writers { ready.wait() }
    let start = ContinuousClock.now
    for _ in 0..<writers { go.signal() }
    group.wait()
    let elapsed = seconds(ContinuousClock.now - start)
    if let error = failure.first() { throw error }
    return Double(writers * saves) / elapsed
}

/// A value handed to other threads that the benchmark uses from one thread at a time or that
/// serialises itself (GRDB's database queue).
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// Latencies by contender, filled from several threads.
final class LatencyLog: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [String: [Double]] = [:]

    func add(_ latencies: [Double], to name: String) { lock.withLock { values[name, default: []] += latencies } }
    func all() -> [String: [Double]] { lock.withLock { values } }
}

/// The first error any thread met.
final class FirstError: @unchecked Sendable {
    private let lock = NSLock()
    private var error: (any Error)?

    func record(_ error: any Error) { lock.withLock { self.error = self.error ?? error } }
    func first() -> (any Error)? { lock.withLock { error } }
}
