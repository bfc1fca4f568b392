import EventLog
import Foundation
import LMDB
import VaultCrypto

/// Group 2, sealed batched append: events/s at batch sizes 1, 100 and 10,000 (one synced
/// transaction per batch), contenders interleaved round by round, each round on a store that
/// already holds the earlier rounds' events. Bodies are 600 bytes (a typical encrypted login
/// snapshot), 10 users, 1,000 items.
func runAppendBench(quick: Bool, results: Results) throws {
    let rounds = quick ? 3 : 5
    // Events per round for each batch size: batch 1 is one fsync per event.
    let plan: [(batch: Int, events: Int)] = quick
        ? [(1, 300), (100, 20_000), (10_000, 200_000)]
        : [(1, 1_000), (100, 100_000), (10_000, 1_000_000)]
    progress("sealed batched append: \(rounds) rounds of " + plan.map { "\($0.events) events in batches of \($0.batch)" }.joined(separator: ", "))
    let key = SealingKey(userKey: SymmetricCryptoKey.generate())
    let body = [UInt8](repeating: 0x7B, count: 600)
    let template = (0..<10_000).map { i in
        NewEvent(userId: "8a1b3c4d-0000-4000-8000-00000000000\(i % 10)", cipherId: "c0ffee00-0000-4000-8000-\(String(format: "%012d", i % 1000))",
                 eventType: 2, recordedAtMillis: 1_700_000_000_000 + Int64(i), body: body)
    }

    try withScratchDirectory("append") { dir in
        var stores: [Int: EventLogStore] = [:]
        for (batch, events) in plan {
            var options = EventLogOptions()
            options.environment.mapSize = Swift.max(64 << 20, rounds * events * 900)
            stores[batch] = try EventLogStore(path: dir + "/batch-\(batch)", options: options)
        }
        // Resident memory must stay flat however many events go through: the peak over the
        // group and the anonymous RSS after each round of the largest batch.
        let baseline = anonymousRSS()
        var afterRounds: [Double] = []
        let (stats, peak) = try measuringPeakAnonymousRSS { try interleave(rounds: rounds, plan.map { batch, events in
            ("batch_\(batch)", {
                let store = stores[batch]!
                let batchEvents = Array(template.prefix(batch))
                let seconds = try time {
                    var appended = 0
                    while appended < events {
                        try store.append(batchEvents, key: key)
                        appended += batch
                    }
                }
                if batch == 10_000 { afterRounds.append(Double(anonymousRSS() - baseline) / 1_048_576) }
                return Double(events) / seconds
            })
        }) }
        for (batch, events) in plan {
            results.add(Figure(group: "append", bench: "sealed_append_batch_\(batch)", metric: "throughput", unit: "events/s",
                               value: stats["batch_\(batch)"]!, target: batch == 10_000 ? .atLeast(300_000) : nil,
                               extra: ["batch": "\(batch)", "events_per_round": "\(events)", "body_bytes": "600"].merging(
                                   batch == 10_000 ? ["peak_anon_rss_mib": json(Double(peak - baseline) / 1_048_576),
                                                      "anon_rss_after_each_round_mib": "[" + afterRounds.map(json).joined(separator: ", ") + "]"] : [:]) { a, _ in a }))
        }
    }
}
