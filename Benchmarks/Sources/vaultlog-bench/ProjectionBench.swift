import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import Synchronization
import VaultCrypto
import VaultModel

/// Group 3, projection, on one user's log of N events (1M in the full run): 1,000 login items,
/// each created, then edited over and over (every other edit changes the password) and resolved
/// after every 20 edits, so about 1,000 items are pending at any time, as in a device that
/// resolves now and then. Events are real sealed `VaultEvent`s (bodies encoded once per item).
/// - header fold: the pending set and change types from headers alone (works while locked);
/// - full fold: the decrypted `Projection` (change types, password-change counts, base
///   revisions, the latest snapshot, every version's sequence) with no checkpoint, against its
///   crypto floor: checking every event's MAC and decrypting its body on all cores, with the
///   events already in memory (`crypto_floor`); three rounds of each fold and floor,
///   interleaved, median (the fold that also writes the checkpoint is timed once after them);
/// - open + pending count: reopen the store and count pending items, with the checkpoint the
///   full fold left, against the same without a checkpoint (interleaved);
/// - incremental fold: 1,000 more events, then reopen, unlock and fold checkpoint + tail; the
///   checkpoint then saved (`saveCheckpoints`: reads never write) is timed on its own.
func runProjectionBench(quick: Bool, results: Results) throws {
    let total = quick ? 200_000 : 1_000_000
    let rounds = quick ? 3 : 5
    let items = 1000
    progress("projection: writing \(total) events of one user…")
    let workload = try ProjectionWorkload(userKey: SymmetricCryptoKey.generate(), items: items)
    let (userKey, userId) = (workload.userKey, workload.userId)

    try withScratchDirectory("projection") { dir in
        let options = ProjectionWorkload.options
        /// Writes the workload's first `total` events to a new store at `path`.
        func writeWorkload(to path: String) throws { try workload.write(total, to: path) }
        try writeWorkload(to: dir)

        // Header fold (locked), full fold (unlocked) and the full fold's crypto floors, three
        // rounds interleaved (A B C D A B C D …), value = median: one run of each moved by a
        // tenth between runs of the same build on this VM. No checkpoint is written in these
        // rounds (each fold starts from the first event); the fold that writes the checkpoint
        // the later figures use comes after, timed on its own. Peak memory: anonymous RSS above
        // what it was just before each fold (the mapped store's pages are the page cache's, not
        // the process's), the highest of the rounds.
        var noCheckpoints = options
        noCheckpoints.pendingCheckpointInterval = 0
        noCheckpoints.checkpointInterval = Int.max
        var headerPending = 0, foldPending = 0
        var headerGrowth = 0, foldGrowth = 0
        var parts: [String: [Double]] = [:]
        let folds = try interleave(rounds: 3, [
            ("header_fold", {
                let before = anonymousRSS()
                let (seconds, peak) = try measuringPeakAnonymousRSS {
                    try time {
                        let store = try VaultLogStore(path: dir, options: noCheckpoints)
                        headerPending = try store.pendingCount(userId: userId)
                        store.close()
                    }
                }
                headerGrowth = max(headerGrowth, peak - before)
                return Double(total) / seconds
            }),
            ("full_fold", {
                let before = anonymousRSS()
                let (seconds, peak) = try measuringPeakAnonymousRSS {
                    try time {
                        var store: VaultLogStore!
                        parts["open_ms", default: []].append(try time { store = try VaultLogStore(path: dir, options: noCheckpoints) } * 1000)
                        parts["unlock_ms", default: []].append(time { store.unlock(userId: userId, userKey: userKey) } * 1000)
                        parts["fold_ms", default: []].append(try time { foldPending = try store.projection(userId: userId).pendingCount } * 1000)
                        parts["close_ms", default: []].append(time { store.close() } * 1000)
                    }
                }
                foldGrowth = max(foldGrowth, peak - before)
                return Double(total) / seconds
            }),
            ("crypto_floor", { Double(total) / (try workload.cryptoFloorSeconds(of: dir)) }),
            ("mac_only_floor", { Double(total) / (try workload.cryptoFloorSeconds(of: dir, macOnly: true)) }),
        ])
        precondition(foldPending == headerPending, "full fold found \(foldPending) pending, header fold \(headerPending)")
        results.add(Figure(group: "projection", bench: "header_fold", metric: "throughput", unit: "events/s",
                           value: folds["header_fold"]!, target: .atLeast(800_000),
                           extra: ["events": "\(total)", "pending": "\(headerPending)",
                                   "peak_anon_rss_mib": json(Double(headerGrowth) / 1_048_576), "rss_target_mib": "64"]))
        // The fold a first unlock does: the same, then the checkpoint saved after it (reads
        // never write: the maintenance step saves it).
        let foldAndCheckpointMs = try time {
            let store = try VaultLogStore(path: dir, options: options)
            store.unlock(userId: userId, userKey: userKey)
            foldPending = try store.projection(userId: userId).pendingCount
            try store.saveCheckpoints(userId: userId)
            store.close()
        } * 1000
        precondition(foldPending == headerPending, "full fold found \(foldPending) pending, header fold \(headerPending)")
        let fold = folds["full_fold"]!, floor = folds["crypto_floor"]!
        results.add(Figure(group: "projection", bench: "full_fold", metric: "throughput", unit: "events/s",
                           value: fold, baseline: "crypto_floor", baselineValue: floor,
                           ratio: fold.median / floor.median, target: .atLeast(1_000_000),
                           extra: ["events": "\(total)", "pending": "\(foldPending)",
                                   "mac_only_floor_events_s": json(folds["mac_only_floor"]!.median.rounded()),
                                   "mac_only_floor_each_round": eachRound(folds["mac_only_floor"]!),
                                   "events_s_each_round": eachRound(fold),
                                   "crypto_floor_each_round": eachRound(floor),
                                   "fold_then_checkpoint_ms": json(foldAndCheckpointMs),
                                   "peak_anon_rss_mib": json(Double(foldGrowth) / 1_048_576), "rss_target_mib": "64"]
                               .merging(parts.mapValues { json(percentile($0, 0.5)) }) { a, _ in a }))
        // The pending checkpoint a locked store gets from the maintenance step.
        do {
            let store = try VaultLogStore(path: dir, options: options)
            try store.saveCheckpoints(userId: userId)
            store.close()
        }

        // Open + pending count, with the checkpoint vs without (a copy of the store without it).
        let bare = dir + "-bare"
        try FileManager.default.createDirectory(atPath: bare, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: bare) }
        try writeWorkload(to: bare)
        func openAndCount(_ path: String, _ options: VaultLogStoreOptions) throws -> Double {
            var count = 0
            let seconds = try time {
                let store = try VaultLogStore(path: path, options: options)
                count = try store.pendingCount(userId: userId)
                store.close()
            }
            precondition(count == headerPending, "pending count \(count), expected \(headerPending)")
            return seconds * 1000
        }
        let open = try interleave(rounds: rounds, [
            ("with_checkpoint", { try openAndCount(dir, options) }),
            ("without_checkpoint", { try openAndCount(bare, noCheckpoints) }),
        ])
        results.add(Figure(group: "projection", bench: "open_pending_count", metric: "latency", unit: "ms",
                           value: open["with_checkpoint"]!, baseline: "without_checkpoint", baselineValue: open["without_checkpoint"]!,
                           ratio: open["without_checkpoint"]!.median / open["with_checkpoint"]!.median, target: .atMost(50),
                           extra: ["events": "\(total)"]))

        // Incremental fold of a 1,000-event tail after the checkpoint: open + unlock + fold
        // without writing a checkpoint, then the same with the checkpoint the store writes after
        // folding that many events (the difference is the checkpoint's cost).
        var tail: [Double] = []
        var withCheckpoint: [Double] = []
        var next = total
        var noNewCheckpoint = options
        noNewCheckpoint.checkpointInterval = Int.max
        noNewCheckpoint.pendingCheckpointInterval = 0
        // The sealed checkpoint only, as the fold itself used to write it.
        var withNewCheckpoint = options
        withNewCheckpoint.pendingCheckpointInterval = 0
        func openUnlockFold(_ options: VaultLogStoreOptions) throws -> Double {
            var store: VaultLogStore?
            let ms = try time {
                store = try VaultLogStore(path: dir, options: options)
                store!.unlock(userId: userId, userKey: userKey)
                _ = try store!.projection(userId: userId)
                try store!.saveCheckpoints(userId: userId)   // nothing due without a checkpoint interval
            } * 1000
            store!.close()
            return ms
        }
        for _ in 0..<rounds {
            let log = try EventLogStore(path: dir, options: options.eventLog)
            try log.append((next..<next + 1000).map(workload.event), key: workload.sealing)
            next += 1000
            log.close()
            tail.append(try openUnlockFold(noNewCheckpoint))
            withCheckpoint.append(try openUnlockFold(withNewCheckpoint))
        }
        let checkpointCost = zip(withCheckpoint, tail).map { $0 - $1 }
        results.add(Figure(group: "projection", bench: "incremental_fold_1000", metric: "latency", unit: "ms", value: Stats(values: tail),
                           target: .atMost(50),
                           extra: ["events": "\(total)", "tail": "1000", "pending": "\(headerPending)",
                                   "includes": "\"open, unlock, checkpoint load, fold of 1,000 events (no checkpoint written)\""]))
        results.add(Figure(group: "projection", bench: "incremental_fold_checkpoint_write", metric: "latency", unit: "ms",
                           value: Stats(values: checkpointCost),
                           extra: ["events": "\(total)", "pending": "\(headerPending)",
                                   "what": "\"the same open, unlock and fold, then the checkpoint of the projection written (sealed, durable), minus the run without it\""]))
    }
}

/// Group 3's workload: one user's log over `items` login items, each created, then edited over
/// and over (every other edit changes the password) and resolved after every 20 edits. Events
/// are real sealed `VaultEvent`s (bodies encoded once per item).
struct ProjectionWorkload {
    let userKey: SymmetricCryptoKey
    let userId = "5e1f0c3a-7d42-4b8e-9f10-aa0000000001"
    let sealing: SealingKey
    let ids: [String]
    let bodies: [[UInt8]]
    let resolvedBody: [UInt8]

    /// The store options of the group (a 4 GiB map).
    static var options: VaultLogStoreOptions {
        var options = VaultLogStoreOptions()
        options.eventLog.environment.mapSize = 4 << 30
        return options
    }

    /// The workload; `ids` fixes the items' ids (random when nil).
    init(userKey: SymmetricCryptoKey, items: Int, ids: [String]? = nil) throws {
        self.userKey = userKey
        sealing = SealingKey(userKey: userKey)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let at = BitwardenDate(Date(timeIntervalSince1970: 1_767_225_600))
        let ids = ids ?? (0..<items).map { _ in UUID().uuidString.lowercased() }
        self.ids = ids
        bodies = try ids.enumerated().map { n, id in
            var view = CipherView(type: .login, name: "Item \(n)", notes: "notes", login: LoginView(username: "u\(n)", password: "p\(n)"))
            view.id = id
            view.revisionDate = at
            return Array(try encoder.encode(OperationBody(cipher: try view.encrypt(userKey: userKey), passwordChanged: n % 2 == 0,
                                                          baseRevisionDate: at, at: at)))
        }
        resolvedBody = Array(try encoder.encode(OutcomeBody(at: at)))
    }

    /// The i-th event of the workload.
    func event(_ i: Int) -> NewEvent {
        let item = i % ids.count
        let round = i / ids.count
        let phase = round % 21   // 0: created or updated after a resolve, 1…19 updates, 20 resolved
        let type: VaultEventType = phase == 20 ? .resolved : (round == 0 ? .created : .updated)
        return NewEvent(userId: userId, cipherId: ids[item], eventType: type.rawValue,
                        recordedAtMillis: 1_767_225_600_000 + Int64(i), body: type == .resolved ? resolvedBody : bodies[item])
    }

    /// The crypto floor of a full fold of the store at `path`: the seconds it takes to check
    /// the MAC of every event and decrypt its body (HMAC-SHA256 and AES-256-CBC, what opening an
    /// event is) on all cores, with the sealed events already in memory (read a batch of 4,096
    /// at a time, off the clock). A fold does this and more: read the events, parse the bodies'
    /// small fields, apply them in order. With `macOnly`, only the MACs are checked: the part
    /// of the floor no fold can skip (it may decrypt less than every body).
    func cryptoFloorSeconds(of path: String, macOnly: Bool = false) throws -> Double {
        let log = try EventLogStore(path: path, options: Self.options.eventLog)
        defer { log.close() }
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let failures = Atomic<Int>(0)
        var seconds = 0.0
        var after: UInt64 = 0
        while true {
            let batch = try log.read { try $0.envelopes(userId: userId, after: after, limit: 4096) }
            guard let last = batch.last else { break }
            after = last.header.sequence
            seconds += time {
                DispatchQueue.concurrentPerform(iterations: cores) { chunk in
                    for i in stride(from: chunk, to: batch.count, by: cores) {
                        let opened = macOnly ? batch[i].authenticate(key: sealing) : (try? batch[i].open(key: sealing)) != nil
                        if !opened { failures.add(1, ordering: .relaxed) }
                    }
                }
            }
        }
        precondition(failures.load(ordering: .relaxed) == 0, "crypto floor: some events did not open")
        return seconds
    }

    /// Writes the first `total` events to a new store at `path`, 10,000 a batch, straight into
    /// the event log (already-sealed workload events, no domain checks); the store opened
    /// afterwards adds its side tables. `envelopeFormat` below the current one seals each
    /// event in that older layout (chained, format 2 at least) and puts it as an import
    /// does: the same log as an older build wrote it, for an A/B of the formats.
    func write(_ total: Int, to path: String, envelopeFormat: UInt8 = Envelope.currentFormatVersion) throws {
        let log = try EventLogStore(path: path, options: Self.options.eventLog)
        defer { log.close() }
        guard envelopeFormat < Envelope.currentFormatVersion else {
            for start in stride(from: 0, to: total, by: 10_000) {
                try log.append((start..<Swift.min(start + 10_000, total)).map(event), key: sealing)
            }
            return
        }
        precondition(envelopeFormat >= Envelope.chainedFormatVersion, "older layouts from format 2 (chained)")
        var previous = Envelope.chainStart
        var random = SystemRandomNumberGenerator()
        for start in stride(from: 0, to: total, by: 10_000) {
            try log.write { txn in
                for i in start..<Swift.min(start + 10_000, total) {
                    let new = event(i)
                    let header = EventHeader(formatVersion: envelopeFormat, sequence: UInt64(i + 1), userId: new.userId,
                                             cipherId: new.cipherId, eventType: new.eventType,
                                             recordedAtMillis: new.recordedAtMillis, previousMAC: previous)
                    let iv = (0..<16).map { _ in UInt8.random(in: 0...255, using: &random) }
                    let envelope = try Envelope(bytes: Envelope.seal(header: header, body: new.body, key: sealing, iv: iv[...]))
                    try txn.appendSealed(envelope)
                    previous = Array(envelope.mac)
                }
                // The user's head record, as an older build kept it with every append (the
                // layout of Docs/EventFormat.md): "VLHD" 0x01 ‖ user ‖ last sequence ‖ chain ‖ MAC.
                var head = Array("VLHD".utf8) + [1, UInt8(userId.utf8.count)] + Array(userId.utf8)
                withUnsafeBytes(of: UInt64(Swift.min(start + 10_000, total)).bigEndian) { head += $0 }
                head += previous
                var mac = KeyedHMACSHA256(key: userKey.derive(info: SealingKey.headInfo).macKey)
                mac.update(data: head)
                try txn.putSealedHead(userId: userId, bytes: head + mac.finalize())
            }
        }
    }
}

/// `vaultlog-bench profile-fold DIR [--events N] [--envelope-format F] [--headers | --floor [--mac]] [--rounds R]`:
/// a loop to run under a profiler. Writes group 3's workload of N events (default 1,000,000)
/// to DIR unless a store is there (the key and ids are fixed, so a second run only folds; with
/// `--envelope-format 2`, sealed in that older layout), then folds it R times
/// (default 3) without checkpoints: the full fold, with `--headers` the header fold, or with
/// `--floor` only its crypto floor (every event's MAC checked and body decrypted, in memory;
/// with `--mac` the MACs alone).
func runProfileFold(arguments: [String]) throws {
    guard let dir = arguments.first, !dir.hasPrefix("--") else { throw BenchError("profile-fold needs a directory") }
    let total = intOption("--events", in: arguments, default: 1_000_000)
    let key = try SymmetricCryptoKey(bytes: (0..<64).map { UInt8($0) })
    let ids = (0..<1000).map { String(format: "00000000-0000-4000-8000-%012d", $0) }
    let workload = try ProjectionWorkload(userKey: key, items: ids.count, ids: ids)
    let format = intOption("--envelope-format", in: arguments, default: Int(Envelope.currentFormatVersion))
    guard (Int(Envelope.chainedFormatVersion)...Int(Envelope.currentFormatVersion)).contains(format) else {
        throw BenchError("--envelope-format \(format): this build writes envelope formats \(Envelope.chainedFormatVersion) to \(Envelope.currentFormatVersion)")
    }
    if !FileManager.default.fileExists(atPath: dir + "/data.mdb") {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try workload.write(total, to: dir, envelopeFormat: UInt8(format))
    } else if arguments.contains("--envelope-format") {
        progress("profile-fold: \(dir) already holds a store; folding it as it is (--envelope-format applies to a new one)")
    }
    var options = ProjectionWorkload.options
    options.pendingCheckpointInterval = 0
    options.checkpointInterval = Int.max
    if arguments.contains("--floor") {
        // The crypto floor the full fold is measured against (`crypto_floor` in `make bench`).
        for _ in 0..<intOption("--rounds", in: arguments, default: 3) {
            let macOnly = arguments.contains("--mac")
            let floor = try workload.cryptoFloorSeconds(of: dir, macOnly: macOnly)
            print("{\"fold\": \"\(macOnly ? "mac_only_floor" : "crypto_floor")\", \"events\": \(total), \"seconds\": \(String(format: "%.3f", floor)), \"events_s\": \(Int(Double(total) / floor))}")
        }
        return
    }
    for _ in 0..<intOption("--rounds", in: arguments, default: 3) {
        let store = try VaultLogStore(path: dir, options: options)
        let start = ContinuousClock.now
        let pending: Int
        if arguments.contains("--headers") {
            pending = try store.pendingCount(userId: workload.userId)
        } else {
            store.unlock(userId: workload.userId, userKey: key)
            pending = try store.projection(userId: workload.userId).pendingCount
        }
        let elapsed = seconds(ContinuousClock.now - start)
        store.close()
        print("{\"fold\": \"\(arguments.contains("--headers") ? "header" : "full")\", \"events\": \(total), \"pending\": \(pending), \"seconds\": \(String(format: "%.3f", elapsed)), \"events_s\": \(Int(Double(total) / elapsed))}")
    }
}
