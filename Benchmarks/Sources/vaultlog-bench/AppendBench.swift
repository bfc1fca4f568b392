import EventLog
import Foundation
import LMDB
import VaultCrypto

/// Group 2, sealed batched append: events/s at batch sizes 1, 100 and 10,000 (one synced
/// transaction per batch), contenders interleaved round by round, each round on a store that
/// already holds the earlier rounds' events. Bodies are 600 bytes (a typical encrypted login
/// snapshot), 10 users, 1,000 items. Batches of 10,000 go through the bulk append
/// (`append(batches:)`, the next batch sealed while the current one commits: the target's
/// figure) and, side by side, through one `append` call per batch.
///
/// The bulk append's floor, `file_write_floor`, interleaved with it: each round it writes as
/// many bytes as the bulk append's store grew by in that round to a file of its own (growing
/// the same way), in as many chunks as there were batches, one `pwrite` and `fdatasync` each:
/// no LMDB, no crypto. It pays what this machine charges for putting that many new bytes into
/// the page cache and onto the disk, which moves a lot from hour to hour on this VM (a page
/// written for the first time after the host took its memory back costs several microseconds
/// of kernel time), so the ratio says how far the append is from what the machine allowed then.
func runAppendBench(quick: Bool, results: Results) throws {
    let rounds = quick ? 3 : 5
    // Events per round for each contender: batch 1 is one fsync per event.
    let plan: [(name: String, batch: Int, events: Int, bulk: Bool)] = quick
        ? [("batch_1", 1, 300, false), ("batch_100", 100, 20_000, false),
           ("batch_10000", 10_000, 200_000, true), ("batch_10000_calls", 10_000, 200_000, false)]
        : [("batch_1", 1, 1_000, false), ("batch_100", 100, 100_000, false),
           ("batch_10000", 10_000, 1_000_000, true), ("batch_10000_calls", 10_000, 1_000_000, false)]
    progress("sealed batched append: \(rounds) rounds of " + plan.map { "\($0.events) events in batches of \($0.batch)\($0.bulk ? " (bulk)" : "")" }.joined(separator: ", "))
    let key = SealingKey(userKey: SymmetricCryptoKey.generate())
    let body = [UInt8](repeating: 0x7B, count: 600)
    let template = (0..<10_000).map { i in
        NewEvent(userId: "8a1b3c4d-0000-4000-8000-00000000000\(i % 10)", cipherId: "c0ffee00-0000-4000-8000-\(String(format: "%012d", i % 1000))",
                 eventType: 2, recordedAtMillis: 1_700_000_000_000 + Int64(i), body: body)
    }

    try withScratchDirectory("append") { dir in
        var stores: [String: EventLogStore] = [:]
        for contender in plan {
            var options = EventLogOptions()
            options.environment.mapSize = Swift.max(64 << 20, rounds * contender.events * 900)
            stores[contender.name] = try EventLogStore(path: dir + "/" + contender.name, options: options)
        }
        // Resident memory must stay flat however many events go through: the peak over the
        // group and the anonymous RSS after each round of the bulk append.
        let baseline = anonymousRSS()
        var afterRounds: [Double] = []
        var written: [String: Int] = [:]   // bytes written by each contender's rounds
        var toStorage: [String: Int] = [:]   // of which dirtied toward storage
        var systemSeconds: [String: [Double]] = [:]   // kernel CPU of each round
        var bulkGrowth = 0   // bytes the bulk append's store grew by in the current round
        let bulkPlan = plan.first { $0.bulk }!
        let fileFloor = try FileWriteFloor(path: dir + "/file-write-floor.bin")
        defer { fileFloor.close() }
        let contenders: [(name: String, run: () throws -> Double)] = plan.map { contender in
            (contender.name, {
                let store = stores[contender.name]!
                let batchEvents = Array(template.prefix(contender.batch))
                let batches = repeatElement(batchEvents, count: contender.events / contender.batch)
                let before = bytesWritten(), storageBefore = bytesToStorage(), systemBefore = systemCPUSeconds()
                let usedBefore = try store.sizes().usedBytes
                defer {
                    written[contender.name, default: 0] += bytesWritten() - before
                    toStorage[contender.name, default: 0] += bytesToStorage() - storageBefore
                    systemSeconds[contender.name, default: []].append(systemCPUSeconds() - systemBefore)
                }
                let seconds = try time {
                    if contender.bulk {
                        try store.append(batches: batches, key: key)
                    } else {
                        for events in batches { try store.append(events, key: key) }
                    }
                }
                if contender.bulk {
                    afterRounds.append(Double(anonymousRSS() - baseline) / 1_048_576)
                    bulkGrowth = try store.sizes().usedBytes - usedBefore
                }
                return Double(contender.events) / seconds
            })
        } + [("file_write_floor", {
            let systemBefore = systemCPUSeconds()
            defer { systemSeconds["file_write_floor", default: []].append(systemCPUSeconds() - systemBefore) }
            let seconds = try time { try fileFloor.write(bytes: bulkGrowth, chunks: bulkPlan.events / bulkPlan.batch) }
            return Double(bulkPlan.events) / seconds
        })]
        let (stats, peak) = try measuringPeakAnonymousRSS { try interleave(rounds: rounds, contenders) }
        /// The kernel CPU seconds of each round, in order (the rounds' rates in order are
        /// ``eachRound(_:)``: a late round's fall shows as such, not only in the spread).
        func eachRoundSystemSeconds(_ name: String) -> String {
            let rounded: [Double] = (systemSeconds[name] ?? []).map { ($0 * 100).rounded() / 100 }
            return "[" + rounded.map(json).joined(separator: ", ") + "]"
        }
        for contender in plan {
            let bulk = contender.bulk
            let floorStats = stats["file_write_floor"]!
            results.add(Figure(group: "append", bench: "sealed_append_\(contender.name)", metric: "throughput", unit: "events/s",
                               value: stats[contender.name]!,
                               baseline: bulk ? "file_write_floor" : nil, baselineValue: bulk ? floorStats : nil,
                               ratio: bulk ? stats[contender.name]!.median / floorStats.median : nil,
                               target: bulk ? .atLeast(300_000) : nil,
                               extra: ["batch": "\(contender.batch)", "events_per_round": "\(contender.events)", "body_bytes": "600",
                                       "api": json(bulk ? "append(batches:)" : "append per batch"),
                                       "events_s_each_round": eachRound(stats[contender.name]!),
                                       "system_cpu_s_each_round": eachRoundSystemSeconds(contender.name),
                                       "bytes_written_per_event": json(Double(written[contender.name] ?? 0) / Double(rounds * contender.events)),
                                       "bytes_to_storage_per_event": json(Double(toStorage[contender.name] ?? 0) / Double(rounds * contender.events))].merging(
                                   bulk ? ["file_write_floor_each_round": eachRound(floorStats),
                                           "file_write_floor_system_cpu_s_each_round": eachRoundSystemSeconds("file_write_floor"),
                                           "peak_anon_rss_mib": json(Double(peak - baseline) / 1_048_576),
                                           "anon_rss_after_each_round_mib": "[" + afterRounds.map(json).joined(separator: ", ") + "]"] : [:]) { a, _ in a }))
        }
        try runItemIndexFigures(dir: dir + "/item-index", rounds: rounds, key: key, template: template, results: results)
    }
}

/// What the item index's merges cost (see `EventLogOptions.itemIndexMergeInterval`): one
/// durable append in every `interval` brings the index up to date for the events before it,
/// and one item's history reads the headers of the events past the index. Per round: the
/// append that merges `interval` events of 1,000 items, the append right after it (none to
/// merge: the baseline), and the item query with `interval - 1` events past the index and
/// with none.
func runItemIndexFigures(dir: String, rounds: Int, key: SealingKey, template: [NewEvent], results: Results) throws {
    let interval = EventLogOptions().itemIndexMergeInterval
    var options = EventLogOptions()
    options.environment.mapSize = 1 << 30
    let store = try EventLogStore(path: dir, options: options)
    let user = template[0].userId, item = template[0].cipherId
    var merging: [Double] = [], plain: [Double] = [], queryFull: [Double] = [], queryEmpty: [Double] = []
    var found = 0
    for _ in 0..<rounds {
        // Up to one event before the merge.
        let through = try store.read { try $0.itemIndexedThrough() }
        let last = try store.read { try $0.lastSequence() }
        var missing = Int(UInt64(interval - 1) - (last - through))
        var batches: [[NewEvent]] = []
        while missing > 0 {
            batches.append(Array(template.prefix(missing)))
            missing -= batches.last!.count
        }
        try store.append(batches: batches, key: key)
        queryFull.append(try time { found = try store.read { try $0.sequences(userId: user, cipherId: item) }.count } * 1000)
        merging.append(try time { try store.append([template[1]], key: key) } * 1000)
        plain.append(try time { try store.append([template[2]], key: key) } * 1000)
        queryEmpty.append(try time { found = try store.read { try $0.sequences(userId: user, cipherId: item) }.count } * 1000)
    }
    let extra = ["merge_interval": "\(interval)", "items": "1000", "item_events_found": "\(found)"]
    let plainStats = Stats(values: plain)
    results.add(Figure(group: "append", bench: "item_index_merging_append", metric: "latency", unit: "ms", value: Stats(values: merging),
                       baseline: "append_without_merge", baselineValue: plainStats,
                       ratio: Stats(values: merging).median / plainStats.median, extra: extra))
    results.add(Figure(group: "append", bench: "item_history_query", metric: "latency", unit: "ms", value: Stats(values: queryFull),
                       baseline: "query_with_index_up_to_date", baselineValue: Stats(values: queryEmpty),
                       ratio: Stats(values: queryFull).median / Stats(values: queryEmpty).median,
                       extra: extra.merging(["events_past_index": "\(interval - 1)"]) { a, _ in a }))
}

/// The bulk append's floor (see ``runAppendBench(quick:results:)``): bytes appended to one file
/// in chunks, each written with one `pwrite` and made durable with `fdatasync`.
private final class FileWriteFloor {
    private let fd: Int32
    private var end: off_t = 0
    private var chunk: [UInt8] = []

    init(path: String) throws {
        fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Self.lastError() }
    }

    /// Appends `bytes` bytes in `chunks` chunks (the last takes the remainder).
    func write(bytes: Int, chunks: Int) throws {
        let size = max(1, bytes / max(1, chunks))
        if chunk.count != size { chunk = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 131) } }
        var left = bytes
        while left > 0 {
            let count = min(left, size)
            let written = chunk.withUnsafeBytes { pwrite(fd, $0.baseAddress, count, end) }
            guard written == count else { throw written < 0 ? Self.lastError() : POSIXError(.EIO) }   // a short write sets no errno
            guard fdatasync(fd) == 0 else { throw Self.lastError() }
            end += off_t(count)
            left -= count
        }
    }

    func close() { _ = Foundation.close(fd) }

    private static func lastError() -> POSIXError { POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
}
