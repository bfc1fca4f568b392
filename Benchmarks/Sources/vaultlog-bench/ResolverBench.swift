import BitwardenAPI
import BitwardenEmulator
import Foundation
import OfflineSync
import VaultCrypto
import VaultModel

/// `vaultlog-bench resolver [--items N] [--latency MS] [--concurrency C] [--creates]`: N pending
/// offline updates (or creates) resolved against the emulator over loopback HTTP with a fixed
/// latency per request, once at concurrency 1 (the seeds' serial algorithm) and once at
/// concurrency C, interleaved in one process run. Prints one JSON object per figure.
func runResolverBench(arguments: [String]) async throws {
    func value(_ name: String, _ fallback: Int) -> Int {
        guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count, let v = Int(arguments[i + 1]) else { return fallback }
        return v
    }
    let items = value("--items", 1000)
    let latencyMs = value("--latency", 20)
    let concurrency = value("--concurrency", ResolverOptions().concurrency)
    let creates = arguments.contains("--creates")
    let rounds = value("--rounds", 1)

    var serial: [Double] = []
    var parallel: [Double] = []
    for _ in 0..<rounds {
        serial.append(try await resolveOnce(items: items, latencyMs: latencyMs, concurrency: 1, creates: creates))
        parallel.append(try await resolveOnce(items: items, latencyMs: latencyMs, concurrency: concurrency, creates: creates))
    }
    let kind = creates ? "creates" : "updates"
    let s = Stats(values: serial).median, p = Stats(values: parallel).median
    print("""
    {"bench": "resolver_\(kind)_serial", "metric": "wall_time", "unit": "s", "value": \(String(format: "%.3f", s)), "items": \(items), "latency_ms": \(latencyMs), "concurrency": 1, "baseline": null}
    {"bench": "resolver_\(kind)_concurrent", "metric": "wall_time", "unit": "s", "value": \(String(format: "%.3f", p)), "items": \(items), "latency_ms": \(latencyMs), "concurrency": \(concurrency), "baseline": "resolver_\(kind)_serial", "baseline_value": \(String(format: "%.3f", s)), "ratio": \(String(format: "%.2f", s / p)), "target_ratio": 10}
    """)
}

/// Group 4, resolver: N pending updates, then N pending creates, resolved against the emulator
/// over loopback HTTP with 20 ms latency per request, at concurrency 1 (the seeds' serial
/// algorithm) and at the default concurrency, interleaved round by round.
func runResolverGroup(quick: Bool, results: Results) async throws {
    let items = quick ? 200 : 1000
    let rounds = quick ? 2 : 3
    let latencyMs = 20
    let concurrency = ResolverOptions().concurrency
    progress("resolver: \(rounds) rounds of \(items) updates and \(items) creates, \(latencyMs) ms latency, concurrency 1 vs \(concurrency)")
    for creates in [false, true] {
        let stats = try await interleave(rounds: rounds, [
            ("serial", { try await resolveOnce(items: items, latencyMs: latencyMs, concurrency: 1, creates: creates) }),
            ("concurrent", { try await resolveOnce(items: items, latencyMs: latencyMs, concurrency: concurrency, creates: creates) }),
        ])
        let serial = stats["serial"]!, concurrent = stats["concurrent"]!
        let kind = creates ? "creates" : "updates"
        // Items per second, so "higher is better" as in the other groups; the ratio is the speed-up.
        let rate = Stats(values: concurrent.values.map { Double(items) / $0 })
        let serialRate = Stats(values: serial.values.map { Double(items) / $0 })
        results.add(Figure(group: "resolver", bench: "resolver_\(kind)", metric: "throughput", unit: "items/s", value: rate,
                           baseline: "concurrency_1", baselineValue: serialRate, ratio: serial.median / concurrent.median,
                           target: creates ? nil : .ratioAtLeast(10),
                           extra: ["items": "\(items)", "latency_ms": "\(latencyMs)", "concurrency": "\(concurrency)",
                                   "wall_s": json(concurrent.median), "serial_wall_s": json(serial.median)]))
    }
}

/// Sets up a fresh emulator and store with `items` pending changes and times one resolution run.
private func resolveOnce(items: Int, latencyMs: Int, concurrency: Int, creates: Bool) async throws -> Double {
    let emulator = BitwardenEmulator(configuration: EmulatorConfiguration())
    let url = try await emulator.start()
    defer { Task { await emulator.stop() } }
    let email = "bench@example.com", password = "bench password"
    try emulator.createAccount(email: email, password: password, iterations: 5000)
    let client = BitwardenClient(configuration: .selfHosted(url))
    let login = try await client.login(email: email, password: password)
    let dir = NSTemporaryDirectory() + "/vaultlog-resolver-bench-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let store = try VaultLogStore(path: dir)
    store.unlock(userId: login.userId, userKey: login.userKey)

    // Pending state written directly (one transaction), so set-up does not dominate.
    let at = BitwardenDate(Date())
    var events: [VaultLogStore.PlannedEvent] = []
    var local: [LocalChange] = []
    for n in 0..<items {
        var view = CipherView(type: .login, name: "Item \(n)", notes: "bench", login: LoginView(username: "u\(n)", password: "old-\(n)"))
        if creates {
            view.id = UUID().uuidString.lowercased()
            let encrypted = try view.encrypt(userKey: login.userKey)
            events.append(.init(cipherId: view.id!, type: .created,
                                body: .operation(OperationBody(cipher: encrypted, passwordChanged: false, baseRevisionDate: nil, at: at))))
            local.append(.upsert(encrypted))
        } else {
            let onServer = emulator.insertCipher(userId: login.userId, try view.encrypt(userKey: login.userKey))
            var edited = try onServer.decrypt(userKey: login.userKey)
            edited.login?.password = "new-\(n)"
            let encrypted = try edited.encrypt(userKey: login.userKey)
            events.append(.init(cipherId: onServer.id!, type: .updated,
                                body: .operation(OperationBody(cipher: encrypted, passwordChanged: true,
                                                               baseRevisionDate: onServer.revisionDate, at: at))))
            local.append(.upsert(encrypted))
        }
    }
    try await store.append(userId: login.userId, events: events, localChanges: local)
    emulator.faults.setLatency(Double(latencyMs) / 1000, jitter: 0)

    var options = ResolverOptions()
    options.concurrency = concurrency
    let resolver = OfflineSyncResolver(store: store, server: client, options: options)
    let start = ContinuousClock.now
    let report = try await resolver.processPendingChanges(userId: login.userId)
    let elapsed = seconds(ContinuousClock.now - start)
    precondition(report.remainingCount == 0, "resolver left \(report.remainingCount) items pending: \(report.items.filter { $0.error != nil }.prefix(3))")
    store.close()
    return elapsed
}
