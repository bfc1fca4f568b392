import Foundation

/// Summary of repeated measurements of one contender: the median and the spread (min…max).
struct Stats: Sendable {
    let values: [Double]
    var median: Double { percentile(values, 0.5) }
    var min: Double { values.min() ?? .nan }
    var max: Double { values.max() ?? .nan }
    /// (max − min) / median, as a fraction: how far apart the runs were.
    var relativeSpread: Double { median == 0 ? 0 : (max - min) / median }
}

/// The `p` quantile (0…1) of `values` by the nearest-rank method.
func percentile(_ values: [Double], _ p: Double) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    let rank = Int((p * Double(sorted.count)).rounded(.up)) - 1
    return sorted[Swift.min(Swift.max(rank, 0), sorted.count - 1)]
}

func seconds(_ duration: Duration) -> Double {
    let (s, attoseconds) = duration.components
    return Double(s) + Double(attoseconds) / 1e18
}

/// Times `body` once, in seconds.
func time(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    return seconds(ContinuousClock.now - start)
}

/// Runs every contender once per round, in turn (A B C A B C …), so drift in the machine
/// (page cache, another process, thermal) lands on all of them alike. Each closure returns the
/// round's figure; the result maps contender name → its figures in round order.
func interleave(rounds: Int, _ contenders: [(name: String, run: () throws -> Double)]) throws -> [String: Stats] {
    var figures: [String: [Double]] = [:]
    for _ in 0..<rounds {
        for contender in contenders {
            figures[contender.name, default: []].append(try contender.run())
        }
    }
    return figures.mapValues(Stats.init)
}

/// Async variant of ``interleave(rounds:_:)``.
func interleave(rounds: Int, _ contenders: [(name: String, run: () async throws -> Double)]) async throws -> [String: Stats] {
    var figures: [String: [Double]] = [:]
    for _ in 0..<rounds {
        for contender in contenders {
            figures[contender.name, default: []].append(try await contender.run())
        }
    }
    return figures.mapValues(Stats.init)
}

/// Each round's value, rounded, in order, as a JSON array (for a figure's extra fields).
func eachRound(_ stats: Stats) -> String {
    "[" + stats.values.map { json($0.rounded()) }.joined(separator: ", ") + "]"
}

/// How a figure compares with its target.
enum Target: Sendable {
    /// The value must be at least this.
    case atLeast(Double)
    /// The value must be at most this.
    case atMost(Double)
    /// `ratio` must be at least this.
    case ratioAtLeast(Double)
    /// `ratio` must be at most this.
    case ratioAtMost(Double)

    func met(value: Double, ratio: Double?) -> Bool {
        switch self {
        case .atLeast(let t): return value >= t
        case .atMost(let t): return value <= t
        case .ratioAtLeast(let t): return (ratio ?? 0) >= t
        case .ratioAtMost(let t): return (ratio ?? .infinity) <= t
        }
    }

    var text: String {
        switch self {
        case .atLeast(let t): return "≥ \(formatNumber(t))"
        case .atMost(let t): return "≤ \(formatNumber(t))"
        case .ratioAtLeast(let t): return "ratio ≥ \(formatNumber(t))×"
        case .ratioAtMost(let t): return "ratio ≤ \(formatNumber(t))×"
        }
    }
}

/// One reported figure: a JSON line on stdout and a row of `Docs/Performance.md`.
struct Figure: Sendable {
    let group: String
    let bench: String
    let metric: String
    let unit: String
    let value: Stats
    var baseline: String? = nil
    var baselineValue: Stats? = nil
    /// value / baseline for "higher is better" figures, as the comparison reads (set by the caller).
    var ratio: Double? = nil
    var target: Target? = nil
    var extra: [String: String] = [:]
    var note: String? = nil

    var met: Bool? { target?.met(value: value.median, ratio: ratio) }

    var jsonLine: String {
        var fields: [(String, String)] = [
            ("bench", json(bench)), ("metric", json(metric)), ("unit", json(unit)), ("value", json(value.median)),
            ("baseline", baseline.map(json) ?? "null"),
            ("baseline_value", baselineValue.map { json($0.median) } ?? "null"),
            ("ratio", ratio.map(json) ?? "null"),
            ("spread", json(value.relativeSpread)), ("min", json(value.min)), ("max", json(value.max)),
            ("runs", "\(value.values.count)"),
        ]
        // Every line has `ratio`, `target` and `met` (null where a figure has none).
        fields.append(("target", target.map { json($0.text) } ?? "null"))
        fields.append(("met", met.map { $0 ? "true" : "false" } ?? "null"))
        for (key, raw) in extra.sorted(by: { $0.key < $1.key }) { fields.append((key, raw)) }
        return "{" + fields.map { "\"\($0.0)\": \($0.1)" }.joined(separator: ", ") + "}"
    }
}

func json(_ string: String) -> String {
    var out = "\""
    for scalar in string.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}

func json(_ value: Double) -> String {
    guard value.isFinite else { return "null" }
    if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
    return String(format: abs(value) >= 100 ? "%.1f" : "%.4g", value)
}

func formatNumber(_ value: Double) -> String {
    guard value.isFinite else { return "–" }
    if abs(value) >= 1000 {
        let formatter = NumberFormatter()
        formatter.numberStyle = .decimal
        formatter.maximumFractionDigits = 0
        return formatter.string(from: NSNumber(value: value.rounded())) ?? "\(Int(value))"
    }
    if abs(value) >= 100 { return String(format: "%.0f", value) }
    if abs(value) >= 10 { return String(format: "%.1f", value) }
    return String(format: "%.3g", value)
}

/// Collects figures, printing each JSON line as soon as it is known.
final class Results: @unchecked Sendable {
    private(set) var figures: [Figure] = []

    func add(_ figure: Figure) {
        figures.append(figure)
        FileHandle.standardOutput.write(Data((figure.jsonLine + "\n").utf8))
    }
}

/// The integer after `name` in a command's `arguments`, or `fallback` when it is absent or not a number.
func intOption(_ name: String, in arguments: [String], default fallback: Int) -> Int {
    guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count, let v = Int(arguments[i + 1]) else { return fallback }
    return v
}

/// Progress on stderr, so stdout stays one JSON object per line.
func progress(_ message: String) {
    FileHandle.standardError.write(Data("[bench] \(message)\n".utf8))
}

/// A scratch directory on the same disk as the repository (not tmpfs), removed afterwards.
func withScratchDirectory<T>(_ name: String, _ body: (String) throws -> T) throws -> T {
    let base = ProcessInfo.processInfo.environment["VAULTLOG_BENCH_DIR"] ?? NSTemporaryDirectory()
    let dir = (base as NSString).appendingPathComponent("vaultlog-bench-\(name)-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    return try body(dir)
}

/// Samples the process's anonymous resident memory (RssAnon: heap and stacks, not the pages of
/// the memory-mapped store, which the kernel can drop at will) every few milliseconds on a
/// thread of its own while `body` runs; returns the body's result and the peak in bytes.
func measuringPeakAnonymousRSS<T>(_ body: () throws -> T) rethrows -> (T, Int) {
    let sampler = RSSSampler()
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        while sampler.lock.withLock({ sampler.running }) {
            let rss = anonymousRSS()
            sampler.lock.withLock { sampler.peak = Swift.max(sampler.peak, rss) }
            usleep(2000)
        }
        done.signal()
    }
    let result = try body()
    let last = anonymousRSS()
    sampler.lock.withLock { sampler.running = false; sampler.peak = Swift.max(sampler.peak, last) }
    done.wait()
    return (result, sampler.peak)
}

/// The shared state of ``measuringPeakAnonymousRSS(_:)``'s sampling thread.
private final class RSSSampler: @unchecked Sendable {
    let lock = NSLock()
    var peak = 0
    var running = true
}

/// Bytes this process has handed to `write` and its kin so far (`wchar` of `/proc/self/io`):
/// what a store's commits wrote, page copies and all. 0 where that file is missing.
func bytesWritten() -> Int { procIO("wchar") }

/// Bytes this process has dirtied in the page cache toward storage so far (`write_bytes` of
/// `/proc/self/io`): a page written twice before it is flushed counts once, so the zeros the
/// store writes ahead of its last page and a commit then overwrites count once, as on the disk.
func bytesToStorage() -> Int { procIO("write_bytes") }

/// One counter of `/proc/self/io`; 0 where that file is missing.
private func procIO(_ field: String) -> Int {
    guard let io = try? String(contentsOfFile: "/proc/self/io", encoding: .utf8) else { return 0 }
    for line in io.split(separator: "\n") where line.hasPrefix(field + ":") {
        return Int(line.split(separator: " ").last ?? "") ?? 0
    }
    return 0
}

/// The CPU seconds this process has spent in the kernel so far (`getrusage`): a round's share
/// shows kernel work that grows with the machine's state (writing into memory the hypervisor
/// has taken back costs several times the copy itself; see the append analysis).
func systemCPUSeconds() -> Double {
    var usage = rusage()
    #if os(Linux)
    getrusage(__rusage_who_t(0), &usage)   // RUSAGE_SELF (Glibc imports it as an enum case)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    return Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

/// RssAnon of this process, in bytes.
func anonymousRSS() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("RssAnon:") {
        return (line.split(separator: " ").compactMap { Int($0) }.first ?? 0) * 1024
    }
    return 0
}
