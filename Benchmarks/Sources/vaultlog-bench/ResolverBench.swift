import BitwardenAPI
import BitwardenAPINIO
import BitwardenEmulator
import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultModel

/// `vaultlog-bench resolver [--items N] [--latency MS] [--concurrency C] [--creates]`: N pending
/// offline updates (or creates) resolved against the emulator over loopback HTTP with a fixed
/// latency per request, once at concurrency 1 (the seeds' serial algorithm) and once at
/// concurrency C, interleaved in one process run. Prints one JSON object per figure.
func runResolverBench(arguments: [String]) async throws {
    let items = intOption("--items", in: arguments, default: 1000)
    let latencyMs = intOption("--latency", in: arguments, default: 20)
    let concurrency = intOption("--concurrency", in: arguments, default: ResolverOptions().concurrency)
    let creates = arguments.contains("--creates")
    let rounds = intOption("--rounds", in: arguments, default: 1)

    var serial: [Double] = []
    var parallel: [Double] = []
    for _ in 0..<rounds {
        serial.append(try await resolveOnce(items: items, latencyMs: latencyMs, concurrency: 1, creates: creates).seconds)
        parallel.append(try await resolveOnce(items: items, latencyMs: latencyMs, concurrency: concurrency, creates: creates).seconds)
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
/// algorithm) and at the default concurrency, interleaved round by round: once with the
/// emulator in this process, and once with `vaultlog serve` in a process of its own (client
/// and server then do not share this process's CPU), the latter with the client on each
/// transport. The CPU time per resolved item is reported for both sides.
func runResolverGroup(quick: Bool, results: Results) async throws {
    let items = quick ? 200 : 1000
    let rounds = quick ? 2 : 3
    let latencyMs = 20
    let concurrency = ResolverOptions().concurrency
    let serve = vaultlogBinary()
    progress("resolver: \(rounds) rounds of \(items) updates and \(items) creates, \(latencyMs) ms latency, concurrency 1 vs \(concurrency), emulator in process and in `\(serve)`, client on URLSession and (against the separate server) on AsyncHTTPClient")
    let setups: [(external: Bool, transport: BenchTransport)] = [(false, .urlSession), (true, .urlSession), (true, .asyncHTTPClient)]
    var updatesRun: Double?
    for (external, transport) in setups {
        for creates in [false, true] {
            var cpu: [String: [ResolveRun]] = [:]
            func run(_ c: Int) async throws -> Double {
                let r = external
                    ? try await resolveOnceExternal(items: items, latencyMs: latencyMs, concurrency: c, creates: creates, serve: serve,
                                                    transport: transport)
                    : try await resolveOnce(items: items, latencyMs: latencyMs, concurrency: c, creates: creates, transport: transport)
                cpu[c == 1 ? "serial" : "concurrent", default: []].append(r)
                return r.seconds
            }
            let stats = try await interleave(rounds: rounds, [
                ("serial", { try await run(1) }),
                ("concurrent", { try await run(concurrency) }),
            ])
            let serial = stats["serial"]!, concurrent = stats["concurrent"]!
            let kind = creates ? "creates" : "updates"
            if !external, !creates { updatesRun = concurrent.median }
            // Items per second, so "higher is better" as in the other groups; the ratio is the speed-up.
            let rate = Stats(values: concurrent.values.map { Double(items) / $0 })
            let serialRate = Stats(values: serial.values.map { Double(items) / $0 })
            let runs = cpu["concurrent"] ?? []
            func perItem(_ value: (ResolveRun) -> Double?) -> String {
                let values = runs.compactMap(value)
                return values.isEmpty ? "null" : json(Stats(values: values).median * 1000 / Double(items))
            }
            var extra = ["items": "\(items)", "latency_ms": "\(latencyMs)", "concurrency": "\(concurrency)",
                         "wall_s": json(concurrent.median), "serial_wall_s": json(serial.median),
                         "emulator": external ? "\"separate process (vaultlog serve)\"" : "\"in process\"",
                         "transport": json(transport.rawValue)]
            if external {
                extra["client_cpu_ms_per_item"] = perItem { $0.clientCPU }
                extra["server_cpu_ms_per_item"] = perItem { $0.serverCPU }
            } else {
                extra["process_cpu_ms_per_item"] = perItem { $0.clientCPU }
            }
            let name = "resolver_\(kind)" + (external ? "_separate_server" : "") + (transport == .asyncHTTPClient ? "_nio" : "")
            results.add(Figure(group: "resolver", bench: name, metric: "throughput",
                               unit: "items/s", value: rate, baseline: "concurrency_1", baselineValue: serialRate,
                               ratio: serial.median / concurrent.median, target: .ratioAtLeast(12), extra: extra))
        }
    }
    if let updatesRun { try await measureResolutionGate(against: updatesRun, items: items, results: results) }
}

/// What the resolution gate costs a run (its in-process wait and its lock file, taken and
/// given back, with nothing pending), against the run of `resolver_updates` in process
/// (`run` seconds for `items` updates): the median of 2,000 passes through it.
private func measureResolutionGate(against run: Double, items: Int, results: Results) async throws {
    let dir = NSTemporaryDirectory() + "/vaultlog-bench-gate-\(UUID().uuidString.prefix(8))"
    defer { try? FileManager.default.removeItem(atPath: dir) }
    do {
        let store = try VaultLogStore(path: dir)
        defer { store.close() }
        var times: [Double] = []
        for _ in 0..<2000 {
            let t = ContinuousClock.now
            try await store.passThroughResolutionGate(userId: "bench-user")
            times.append(seconds(ContinuousClock.now - t))
        }
        let gate = percentile(times, 0.5)
        results.add(Figure(group: "resolver", bench: "resolution_gate_cost", metric: "latency_p50", unit: "ms",
                           value: Stats(values: [gate * 1000]), baseline: "resolver_updates_run", baselineValue: Stats(values: [run * 1000]),
                           ratio: gate / run, target: .ratioAtMost(0.05),
                           extra: ["items_per_run": "\(items)", "gate_p99_ms": json(percentile(times, 0.99) * 1000),
                                   "share_of_one_item_ms": json(gate / (run / Double(items)))]))
    }
}

/// The client's HTTP transport: the library's default (`URLSession`, FoundationNetworking on
/// Linux) or SwiftNIO's AsyncHTTPClient (`BitwardenAPINIO`, what `vaultlog resolve-worker`
/// and the simulation use).
enum BenchTransport: String {
    case urlSession = "URLSession"
    case asyncHTTPClient = "AsyncHTTPClient (BitwardenAPINIO)"
}

/// One timed resolution: wall time and CPU seconds of this process and (when separate) the server's.
struct ResolveRun {
    var seconds: Double
    var clientCPU: Double
    var serverCPU: Double? = nil
}

/// CPU seconds (user + system) this process has used.
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    func s(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return s(usage.ru_utime) + s(usage.ru_stime)
}

/// CPU seconds (user + system) process `pid` has used, from /proc.
func processCPUSeconds(pid: Int32) -> Double? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return nil }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    // After the command name: state is field 3, utime 14, stime 15 (1-based in proc(5)).
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// The `vaultlog` executable next to this one (`make bench-build` builds both), or `$VAULTLOG_BIN`.
func vaultlogBinary() -> String {
    if let path = ProcessInfo.processInfo.environment["VAULTLOG_BIN"] { return path }
    let me = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    return me.deletingLastPathComponent().appendingPathComponent("vaultlog").path
}

/// ``resolveOnce(items:latencyMs:concurrency:creates:)`` against `vaultlog serve` started for
/// this run in a process of its own (the account and, for updates, the server's items are
/// created over HTTP before the clock starts).
private func resolveOnceExternal(items: Int, latencyMs: Int, concurrency: Int, creates: Bool, serve: String,
                                 transport: BenchTransport) async throws -> ResolveRun {
    guard FileManager.default.isExecutableFile(atPath: serve) else {
        throw BenchError("\(serve) is not there: build it with `make bench-build` (or set VAULTLOG_BIN to a vaultlog executable)")
    }
    let email = "bench@example.com", password = "bench password"
    let process = Process()
    process.executableURL = URL(fileURLWithPath: serve)
    process.arguments = ["serve", "--account", email, "--iterations", "5000", "--latency", "\(latencyMs)", "--json"]
    var environment = ProcessInfo.processInfo.environment
    environment["VAULTLOG_PASSWORD"] = password
    process.environment = environment
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    defer {
        process.terminate()
        process.waitUntilExit()
    }
    // The first line of stdout is the start-up summary with the URL.
    var line: [UInt8] = []
    while true {
        let byte = output.fileHandleForReading.readData(ofLength: 1)
        guard let b = byte.first else { throw BenchError("vaultlog serve exited before printing its URL") }
        if b == UInt8(ascii: "\n") { break }
        line.append(b)
    }
    guard let summary = try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any],
          let text = summary["url"] as? String, let url = URL(string: text) else {
        throw BenchError("vaultlog serve printed no URL: \(String(decoding: line, as: UTF8.self))")
    }
    let (client, login, store, dir) = try await loginWithNewStore(url: url, email: email, password: password, transport: transport)
    defer { try? FileManager.default.removeItem(atPath: dir) }

    let at = BitwardenDate(Date())
    let views = (0..<items).map { n in
        CipherView(type: .login, name: "Item \(n)", notes: "bench", login: LoginView(username: "u\(n)", password: "old-\(n)"))
    }
    var events: [VaultLogStore.PlannedEvent] = []
    var local: [LocalChange] = []
    if creates {
        for view in views {
            let (event, change) = try pendingCreate(view, key: login.userKey, at: at)
            events.append(event)
            local.append(change)
        }
    } else {
        // The server's copies, created 32 at a time (each request waits the latency).
        let key = login.userKey
        let onServer = try await withThrowingTaskGroup(of: [Cipher].self) { group in
            for chunk in stride(from: 0, to: items, by: max(1, items / 32)) {
                let slice = Array(views[chunk..<min(items, chunk + max(1, items / 32))])
                group.addTask { try await slice.asyncMap { try await client.createCipher(try $0.encrypt(userKey: key)) } }
            }
            var all: [Cipher] = []
            for try await part in group { all += part }
            return all
        }
        for (n, cipher) in onServer.enumerated() {
            let (event, change) = try pendingUpdate(of: cipher, n: n, key: login.userKey, at: at)
            events.append(event)
            local.append(change)
        }
    }
    try await store.append(userId: login.userId, events: events, localChanges: local)
    return try await timedResolution(store: store, client: client, userId: login.userId, concurrency: concurrency,
                                     serverPid: process.processIdentifier)
}

/// Logs in to the server at `url` and opens a new store in a temp directory (the caller
/// removes `dir`), unlocked for the account.
private func loginWithNewStore(url: URL, email: String, password: String, transport: BenchTransport) async throws
    -> (BitwardenClient, LoginResult, VaultLogStore, dir: String) {
    var configuration = BitwardenClientConfiguration.selfHosted(url)
    if transport == .asyncHTTPClient {
        configuration.transport = AsyncHTTPClientTransport(timeout: configuration.timeout,
                                                           maximumConnectionsPerHost: configuration.maximumConnectionsPerHost)
    }
    let client = BitwardenClient(configuration: configuration)
    let login = try await client.login(email: email, password: password)
    let dir = NSTemporaryDirectory() + "/vaultlog-resolver-bench-\(UUID().uuidString)"
    let store = try VaultLogStore(path: dir)
    store.unlock(userId: login.userId, userKey: login.userKey)
    return (client, login, store, dir)
}

/// A pending offline create of `view` (a new id): its event and local copy.
private func pendingCreate(_ view: CipherView, key: SymmetricCryptoKey, at: BitwardenDate) throws -> (VaultLogStore.PlannedEvent, LocalChange) {
    var view = view
    view.id = UUID().uuidString.lowercased()
    let encrypted = try view.encrypt(userKey: key)
    return (.init(cipherId: view.id!, type: .created,
                  body: .operation(OperationBody(cipher: encrypted, passwordChanged: false, baseRevisionDate: nil, at: at))),
            .upsert(encrypted))
}

/// A pending offline update of the server's `cipher` that changes its password: its event and local copy.
private func pendingUpdate(of cipher: Cipher, n: Int, key: SymmetricCryptoKey, at: BitwardenDate) throws -> (VaultLogStore.PlannedEvent, LocalChange) {
    var edited = try cipher.decrypt(userKey: key)
    edited.login?.password = "new-\(n)"
    let encrypted = try edited.encrypt(userKey: key)
    return (.init(cipherId: cipher.id!, type: .updated,
                  body: .operation(OperationBody(cipher: encrypted, passwordChanged: true, baseRevisionDate: cipher.revisionDate, at: at))),
            .upsert(encrypted))
}

/// Resolves everything pending at `concurrency`, timed, with the CPU time of this process and
/// of the server process `serverPid` (when separate); closes the store.
private func timedResolution(store: VaultLogStore, client: BitwardenClient, userId: String, concurrency: Int,
                             serverPid: Int32?) async throws -> ResolveRun {
    var options = ResolverOptions()
    options.concurrency = concurrency
    let resolver = OfflineSyncResolver(store: store, server: client, options: options)
    let cpuBefore = processCPUSeconds(), serverBefore = serverPid.flatMap(processCPUSeconds(pid:))
    let start = ContinuousClock.now
    let report = try await resolver.processPendingChanges(userId: userId)
    let elapsed = seconds(ContinuousClock.now - start)
    let cpuAfter = processCPUSeconds(), serverAfter = serverPid.flatMap(processCPUSeconds(pid:))
    precondition(report.remainingCount == 0, "resolver left \(report.remainingCount) items pending: \(report.items.filter { $0.error != nil }.prefix(3))")
    store.close()
    let server = serverBefore.flatMap { before in serverAfter.map { $0 - before } }
    return ResolveRun(seconds: elapsed, clientCPU: cpuAfter - cpuBefore, serverCPU: server)
}

extension Array {
    /// `map` with an async transform, one element after another.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        out.reserveCapacity(count)
        for element in self { out.append(try await transform(element)) }
        return out
    }
}

/// Sets up a fresh emulator and store with `items` pending changes and times one resolution run.
private func resolveOnce(items: Int, latencyMs: Int, concurrency: Int, creates: Bool,
                         transport: BenchTransport = .urlSession) async throws -> ResolveRun {
    let emulator = BitwardenEmulator(configuration: EmulatorConfiguration())
    let url = try await emulator.start()
    defer { Task { await emulator.stop() } }
    let email = "bench@example.com", password = "bench password"
    try emulator.createAccount(email: email, password: password, iterations: 5000)
    let (client, login, store, dir) = try await loginWithNewStore(url: url, email: email, password: password, transport: transport)
    defer { try? FileManager.default.removeItem(atPath: dir) }

    // Pending state written directly (one transaction), so set-up does not dominate.
    let at = BitwardenDate(Date())
    var events: [VaultLogStore.PlannedEvent] = []
    var local: [LocalChange] = []
    for n in 0..<items {
        let view = CipherView(type: .login, name: "Item \(n)", notes: "bench", login: LoginView(username: "u\(n)", password: "old-\(n)"))
        let (event, change) = creates
            ? try pendingCreate(view, key: login.userKey, at: at)
            : try pendingUpdate(of: emulator.insertCipher(userId: login.userId, try view.encrypt(userKey: login.userKey)), n: n,
                                key: login.userKey, at: at)
        events.append(event)
        local.append(change)
    }
    try await store.append(userId: login.userId, events: events, localChanges: local)
    emulator.faults.setLatency(Double(latencyMs) / 1000, jitter: 0)
    return try await timedResolution(store: store, client: client, userId: login.userId, concurrency: concurrency, serverPid: nil)
}
