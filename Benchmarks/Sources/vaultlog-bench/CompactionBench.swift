import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultModel
import VaultLogTesting

/// Group "compaction": a store of 1,000 items × 100 resolved edits each (200,000 events over 200
/// days; quick: × 20) plus 200 items edited in the last day and still pending. Reports the file
/// before, the compaction under the default policy (30 days, 5 versions: fold and seal, the one
/// write transaction, the compacting copy), the file after, and then 120 days of a continuing
/// workload (200 items edited and resolved a day, a compaction every 7 days without rewriting
/// the file, as an app would run it after a sync): the file must stop growing.
func runCompactionBench(quick: Bool, results: Results) throws {
    let items = 1_000, pendingItems = 200
    let edits = quick ? 20 : 100
    let days = quick ? 70 : 120
    progress("compaction: \(items) items × \(edits) resolved edits + \(pendingItems) pending, then \(days) days of workload")
    try withScratchDirectory("compaction") { dir in
        let userId = "8a1b3c4d-0000-4000-8000-000000000001"
        let userKey = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 1))
        let clock = ManualClock(Date(timeIntervalSince1970: 1_767_225_600))   // 2026-01-01
        let path = dir + "/store"
        func open() throws -> VaultLogStore {
            var options = VaultLogStoreOptions()
            options.eventLog.environment.mapSize = 1 << 31
            options.dependencies = .deterministic(seed: 3, clock: clock)
            let store = try VaultLogStore(path: path, options: options)
            store.unlock(userId: userId, userKey: userKey)
            return store
        }
        let view = CipherView(type: .login, name: "Bank", notes: String(repeating: "n", count: 300),
                              login: LoginView(username: "alice@example.com", password: "correct horse battery staple",
                                               uris: [LoginUriView(uri: "https://bank.example.com/login")]))
        let cipher = try view.encrypt(userKey: userKey, random: SeededRandomSource(seed: 2))
        func edit(_ item: Int, resolved: Bool) -> [VaultLogStore.PlannedEvent] {
            var copy = cipher
            copy.id = "c0ffee00-0000-4000-8000-\(String(format: "%012d", item))"
            let at = BitwardenDate(clock.now)
            var out: [VaultLogStore.PlannedEvent] = [.init(cipherId: copy.id!, type: .updated,
                body: .operation(OperationBody(cipher: copy, passwordChanged: item % 3 == 0, baseRevisionDate: at, at: at)))]
            if resolved { out.append(.init(cipherId: copy.id!, type: .resolved, body: .outcome(OutcomeBody(at: at, serverId: copy.id)))) }
            return out
        }
        // Disk space taken (allocated blocks): the store keeps data.mdb up to 8 MiB longer than
        // its last page as a sparse tail, which `ls -l` counts and the disk does not.
        func fileBytes() -> Int {
            var info = stat()
            guard stat(path + "/data.mdb", &info) == 0 else { return 0 }
            return Int(info.st_blocks) * 512
        }

        // The history: one round of edits of every item every 2 days, then the pending items.
        var store = try open()
        for _ in 0..<edits {
            for start in stride(from: 0, to: items, by: 500) {
                try store.append(userId: userId, events: (start..<start + 500).flatMap { edit($0, resolved: true) })
            }
            clock.advance(by: 2 * 86_400)
        }
        clock.set(clock.now.addingTimeInterval(-86_400))
        try store.append(userId: userId, events: (items..<items + pendingItems).flatMap { edit($0, resolved: false) })
        clock.advance(by: 86_400)
        let eventsBefore = items * edits * 2 + pendingItems
        let bytesBefore = fileBytes()
        progress("compaction: \(eventsBefore) events, data.mdb \(bytesBefore / 1_000_000) MB")

        // The compaction, default policy: plan and write, then the compacting copy.
        var result: CompactionResult?
        let compactSeconds = try time { result = try store.compactBlocking(userId: userId, policy: .default) }
        let writeSeconds = result!.writeSeconds
        store.close()
        var file: FileCompaction?
        let copySeconds = try time { file = try EventLogStore.compactFile(at: path) }
        store = try open()
        let eventsAfter = result!.plan.retainedEvents
        let bytesAfter = fileBytes()
        progress(String(format: "compaction: removed %d events (horizon %d) in %.2f s (%d write transactions, the longest %.0f ms), copy %.2f s; %d → %d bytes",
                        result!.counts.removedEvents, result!.plan.horizon ?? 0, compactSeconds, result!.transactions, writeSeconds * 1000, copySeconds,
                        file!.bytesBefore, file!.bytesAfter))

        // The continuing workload: 200 items edited and resolved a day; a compaction every 7 days.
        var sizes: [(day: Int, bytes: Int)] = []
        var rng = SplitMix64(seed: 9)
        var writeMax = 0.0
        var eventsSteady = eventsAfter
        for day in 1...days {
            let edited = (0..<200).map { _ in Int(rng.next() % UInt64(items)) }
            try store.append(userId: userId, events: edited.flatMap { edit($0, resolved: true) })
            clock.advance(by: 86_400)
            if day % 7 == 0 {
                let weekly = try store.compactBlocking(userId: userId, policy: .default)
                writeMax = max(writeMax, weekly.writeSeconds)
                eventsSteady = weekly.plan.retainedEvents
                sizes.append((day, fileBytes()))
            }
        }
        store.close()
        // Growth over the last 28 days of the run, once the 30-day window has filled.
        let last = sizes.last!.bytes
        let monthBefore = sizes.last { $0.day <= days - 28 }!.bytes
        let growth = Double(last - monthBefore) / Double(monthBefore) * 100
        progress("compaction: file by week (day: MB) " + sizes.map { "\($0.day): \(String(format: "%.1f", Double($0.bytes) / 1e6))" }.joined(separator: ", "))

        let one = { (value: Double) in Stats(values: [value]) }
        let extra = ["events_before": "\(eventsBefore)", "events_after": "\(eventsAfter)", "events_steady": "\(eventsSteady)",
                     "removed": "\(result!.counts.removedEvents)", "kept_versions": "\(result!.plan.keptVersions)",
                     "write_transactions": "\(result!.transactions)"]
        results.add(Figure(group: "compaction", bench: "store_before", metric: "size", unit: "MB", value: one(Double(bytesBefore) / 1e6), extra: extra))
        results.add(Figure(group: "compaction", bench: "store_after", metric: "size", unit: "MB", value: one(Double(bytesAfter) / 1e6), extra: extra))
        results.add(Figure(group: "compaction", bench: "compact_default_policy", metric: "time", unit: "s", value: one(compactSeconds), extra: extra,
                           note: "fold of the whole log, sealing the snapshot, and the write transaction"))
        results.add(Figure(group: "compaction", bench: "compact_write_transaction", metric: "time", unit: "ms", value: one(writeSeconds * 1000), extra: extra,
                           note: "the longest of its write transactions: the longest a save waits for the compaction"))
        results.add(Figure(group: "compaction", bench: "compacting_copy", metric: "time", unit: "s", value: one(copySeconds), extra: extra))
        results.add(Figure(group: "compaction", bench: "steady_state_store", metric: "size", unit: "MB", value: one(Double(last) / 1e6),
                           extra: ["sizes_by_week_mb": "[" + sizes.map { String(format: "%.1f", Double($0.bytes) / 1e6) }.joined(separator: ", ") + "]",
                                   "weekly_write_max_ms": String(format: "%.0f", writeMax * 1000)]))
        results.add(Figure(group: "compaction", bench: "steady_state_growth_last_28_days", metric: "growth", unit: "%", value: one(growth),
                           target: .atMost(5), extra: ["days": "\(days)"],
                           note: "the file stops growing under the default policy"))
    }
}

