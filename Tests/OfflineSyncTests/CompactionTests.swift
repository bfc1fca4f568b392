@testable import EventLog
import Foundation
import Testing
import VaultCrypto
import VaultModel
import LMDB
@_spi(Tools) @testable import OfflineSync
import VaultLogTesting
import VaultLogTestSupport

/// Retention and snapshot compaction: what a compacted log still answers, what it refuses,
/// and that pending items are never touched.
@Suite struct CompactionTests {
    /// Appends a random history for `h.userId`: edits of a few items, each run of edits either
    /// resolved, failed (some dead-lettered) or left pending, an hour apart each.
    static func appendRandomHistory(_ h: Harness, seed: UInt64, count: Int) throws -> Cipher {
        var rng = SplitMix64(seed: seed)
        let cipher = try Harness.login("item", password: "pw").encrypt(userKey: h.userKey, random: SeededRandomSource(seed: seed))
        for _ in 0..<count {
            h.clock.advance(by: 3600)
            let id = "c\(rng.next() % 6)"
            let at = BitwardenDate(h.clock.now)
            let event: VaultLogStore.PlannedEvent
            switch rng.next() % 12 {
            case 0: event = .init(cipherId: id, type: .created, body: .operation(OperationBody(cipher: cipher, passwordChanged: false, baseRevisionDate: nil, at: at)))
            case 1..<5: event = .init(cipherId: id, type: .updated, body: .operation(OperationBody(cipher: cipher, passwordChanged: rng.next() % 2 == 0, baseRevisionDate: at, at: at)))
            case 5: event = .init(cipherId: id, type: .softDeleted, body: .operation(OperationBody(cipher: cipher, passwordChanged: false, baseRevisionDate: at, at: at)))
            case 6: event = .init(cipherId: id, type: .hardDeleted, body: .operation(OperationBody(cipher: cipher, passwordChanged: false, baseRevisionDate: at, at: at)))
            case 7: event = .init(cipherId: id, type: .resolutionFailed, body: .outcome(OutcomeBody(at: at, reason: "HTTP 500", attempt: Int(rng.next() % 6) + 1, deadLetter: rng.next() % 3 == 0)))
            case 8: event = .init(cipherId: id, type: .idMapped, body: .outcome(OutcomeBody(at: at, serverId: "server-\(id)")))
            case 9: event = .init(cipherId: "", type: .syncApplied, body: .outcome(OutcomeBody(at: at)))
            default: event = .init(cipherId: id, type: .resolved, body: .outcome(OutcomeBody(at: at)))
            }
            try h.store.append(userId: h.userId, events: [event])
        }
        return cipher
    }

    /// Every state the log can answer, by sequence (the projection right after each event).
    static func states(_ h: Harness) throws -> [UInt64: Projection] {
        var out: [UInt64: Projection] = [:]
        for event in try h.store.events(userId: h.userId) {
            out[event.sequence] = try h.store.projection(userId: h.userId, at: event.sequence)
        }
        return out
    }

    /// Property: over random histories and random policies (compacted twice, so a snapshot is
    /// also built on a snapshot), every state at or after the horizon is the same as before,
    /// every state before it answers "compacted", every event of a pending change still reads
    /// the same by its sequence, the locked count agrees, and `verify` with the key is clean.
    @Test(arguments: 0..<40)
    func compactedLog_answersLikeBefore_atEveryRetainedSequence(seed: Int) throws {
        let h = try Harness(seed: UInt64(seed) + 1, checkpointInterval: 7, pendingCheckpointInterval: 5)
        _ = try Self.appendRandomHistory(h, seed: UInt64(seed), count: 60 + seed % 40)
        var rng = SplitMix64(seed: UInt64(seed) ^ 0x5EED)
        var appliedKeepVersions = 0
        for round in 0..<2 {
            let before = try Self.states(h)
            let pendingBefore = try h.store.projection(userId: h.userId).pending
            let pendingEvents = Set(pendingBefore.values.flatMap { $0.versionSequences + $0.steps.map(\.sequence) })
            var pendingEventsBefore: [UInt64: VaultEvent] = [:]
            for sequence in pendingEvents { pendingEventsBefore[sequence] = try h.store.event(at: sequence, userId: h.userId) }
            let lastBefore = try h.store.log.lastSequence()
            let keepDays = Int(rng.next() % 4)
            let keepVersions = Int(rng.next() % 4)
            // In steps of a few events, or in one: each step is a compaction of its own.
            let step = [3, 10, 20_000][Int(rng.next() % 3)]
            let result = try h.store.compactBlocking(userId: h.userId, policy: RetentionPolicy(keepDays: keepDays, keepVersions: keepVersions),
                                             eventsPerTransaction: step)
            #expect(result.transactions == (result.counts.removedEvents == 0 ? 0 : (result.counts.removedEvents + step - 1) / step))
            let horizon = try h.store.horizon(userId: h.userId)
            #expect(horizon == (result.plan.horizon ?? result.plan.currentHorizon), "seed \(seed) round \(round)")
            let retained = Set(try h.store.events(userId: h.userId).map(\.sequence))
            #expect(retained.count == before.count - result.counts.removedEvents)
            for sequence in pendingEvents {
                #expect(try h.store.event(at: sequence, userId: h.userId) == pendingEventsBefore[sequence],
                        "seed \(seed) round \(round): event \(sequence) of a pending change reads as before")
            }
            for (id, change) in pendingBefore {
                let kept = Set(try h.store.keptVersions(userId: h.userId, cipherId: id).map(\.sequence))
                #expect(change.versionSequences.filter { $0 <= horizon }.allSatisfy(kept.contains), "history shows a pending item's carried versions")
            }
            #expect(retained.allSatisfy { $0 > horizon })
            if let newHorizon = result.plan.horizon {
                appliedKeepVersions = keepVersions
                #expect(before.keys.filter { $0 <= newHorizon }.count == result.counts.removedEvents)
                let cutoffMillis = Int64(result.plan.cutoff.timeIntervalSince1970 * 1000)
                #expect(try h.store.log.envelopes(userId: h.userId).allSatisfy { $0.header.sequence > newHorizon })
                #expect(cutoffMillis >= 0)
            }
            for (sequence, state) in before {
                if sequence >= horizon {
                    #expect(try h.store.projection(userId: h.userId, at: sequence) == state, "seed \(seed) round \(round) sequence \(sequence)")
                } else {
                    #expect(throws: OfflineSyncError.compacted(userId: h.userId, sequence: sequence, horizon: horizon)) {
                        try h.store.projection(userId: h.userId, at: sequence)
                    }
                }
            }
            #expect(try h.store.projection(userId: h.userId).pending == pendingBefore)
            #expect(try h.store.log.read { try h.store.headerProjection($0, userId: h.userId, fromCheckpoint: false).projection.pending }
                    == pendingBefore.mapValues(\.changeType), "the locked count from headers agrees")
            #expect(try h.store.pendingFromHeaders(userId: h.userId).pending == pendingBefore.mapValues(\.changeType))
            let report = try h.store.verify(keys: [h.userId: SealingKey(userKey: h.userKey)])
            #expect(report.isClean, "seed \(seed) round \(round): \(report.problems)")
            #expect(try h.store.log.lastSequence() == lastBefore, "sequences are never reused")
            // Kept versions: at most `keepVersions` of the last compaction that ran, per item, all before the horizon.
            // (Plus every event of a change pending at the horizon, which the snapshot carries.)
            let pendingAtHorizon = horizon > 0 ? try h.store.projection(userId: h.userId, at: horizon).pending : [:]
            for id in try h.store.itemsWithKeptVersions(userId: h.userId) {
                let kept = try h.store.keptVersions(userId: h.userId, cipherId: id)
                let carried = Set(pendingAtHorizon[id]?.versionSequences ?? [])
                #expect(kept.filter { $0.type.isOperation && !carried.contains($0.sequence) }.count <= appliedKeepVersions)
                #expect(kept.allSatisfy { $0.sequence <= horizon })
            }
            // More history for the second round.
            _ = try Self.appendRandomHistory(h, seed: UInt64(seed) &+ 1000, count: 30)
        }
        let next = try h.store.append(userId: h.userId, cipherId: "c9", type: .updated,
                                      body: .operation(OperationBody(cipher: Cipher(type: .login), passwordChanged: false, baseRevisionDate: nil, at: BitwardenDate(h.clock.now))))
        #expect(next == (try h.store.log.lastSequence()), "appends go on after compaction")
        #expect(try h.store.verify(keys: [h.userId: SealingKey(userKey: h.userKey)]).isClean)
    }

    /// A pending change does not hold the horizon back: its events go into the snapshot as
    /// they were stored, and the resolver still reads every intermediate version by sequence.
    /// Seven offline password changes (an overflow copy needs each of them), compacted away
    /// before the server is back: every password is on the server afterwards.
    @Test func pendingChange_isCarriedInTheSnapshot_andStillResolvesWithEveryPassword() async throws {
        let h = try Harness()
        var view = try await h.seedSynced("Bank")
        _ = try Self.appendResolvedEdits(h, items: 3, editsEach: 4)
        h.server.fail(with: NotConnectedError(), times: 7)
        for n in 1...7 {
            h.clock.advance(by: 60)
            view.login?.password = "offline-\(n)"
            _ = try await h.repository().updateCipher(view)
        }
        let change = try #require(try h.pending("server-Bank"))
        #expect(change.offlinePasswordChangeCount == 7)
        h.clock.advance(by: 86_400)
        let result = try await h.store.compact(userId: h.userId, policy: RetentionPolicy(keepDays: 0, keepVersions: 1))
        #expect(result.plan.horizon == (try h.store.log.lastSequence()), "nothing holds the horizon back")
        #expect(result.plan.carriedEvents == 7)
        #expect(try h.store.events(userId: h.userId).isEmpty)
        #expect(try h.pending("server-Bank") == change)
        #expect(try h.store.pendingCount(userId: h.userId) == 1)
        h.store.lock(userId: h.userId)
        #expect(try h.store.pendingState(userId: h.userId).pending == ["server-Bank": .update], "a locked vault still knows from the snapshot")
        h.store.unlock(userId: h.userId, userKey: h.userKey)

        let report = try await OfflineSyncResolver(store: h.store, server: h.server).processPendingChanges(userId: h.userId)
        let left = try h.store.pendingCount(userId: h.userId)
        #expect(report.items.count == 1 && left == 0, "\(report.items)")
        var onServer: Set<String> = []
        for cipher in h.server.state.withLock({ Array($0.ciphers.values) }) {
            let view = try cipher.decrypt(userKey: h.userKey)
            if let password = view.login?.password { onServer.insert(password) }
            for old in view.passwordHistory ?? [] { if let password = old.password { onServer.insert(password) } }
        }
        #expect((1...7).allSatisfy { onServer.contains("offline-\($0)") }, "every offline password is on the server: \(onServer.sorted())")
        #expect(try h.store.verify(keys: [h.userId: SealingKey(userKey: h.userKey)]).isClean)
    }

    /// `count` offline password changes, alternating between items p0 and p1, left pending.
    static func appendPendingEdits(_ h: Harness, count: Int) throws {
        let cipher = try Harness.login("p", password: "pw").encrypt(userKey: h.userKey, random: SeededRandomSource(seed: 6))
        for n in 0..<count {
            h.clock.advance(by: 60)
            let at = BitwardenDate(h.clock.now)
            try h.store.append(userId: h.userId, cipherId: "p\(n % 2)", type: .updated,
                               body: .operation(OperationBody(cipher: cipher, passwordChanged: true, baseRevisionDate: at, at: at)))
        }
    }

    /// Resolved edits: for each of `items` items, `editsEach` updates each followed by `resolved`.
    static func appendResolvedEdits(_ h: Harness, items: Int, editsEach: Int, prefix: String = "r") throws -> Cipher {
        let cipher = try Harness.login("item", password: "pw").encrypt(userKey: h.userKey, random: SeededRandomSource(seed: 3))
        for edit in 0..<editsEach {
            for item in 0..<items {
                h.clock.advance(by: 60)
                let at = BitwardenDate(h.clock.now)
                try h.store.append(userId: h.userId, events: [
                    .init(cipherId: "\(prefix)\(item)", type: .updated, body: .operation(OperationBody(cipher: cipher, passwordChanged: edit % 2 == 0, baseRevisionDate: at, at: at))),
                    .init(cipherId: "\(prefix)\(item)", type: .resolved, body: .outcome(OutcomeBody(at: at))),
                ])
            }
        }
        return cipher
    }

    /// Resolved history younger than `keepDays` stays as events; older history keeps the last
    /// `keepVersions` versions per item in the snapshot, readable with the key.
    @Test func policy_keepsYoungEvents_andTheLastVersionsOfOlderOnes() throws {
        let h = try Harness()
        _ = try Self.appendResolvedEdits(h, items: 4, editsEach: 10, prefix: "old")
        h.clock.advance(by: 40 * 86_400)
        let young = try Self.appendResolvedEdits(h, items: 2, editsEach: 3, prefix: "new")
        _ = young
        let oldEvents = 4 * 10 * 2
        let result = try h.store.compactBlocking(userId: h.userId, policy: RetentionPolicy(keepDays: 30, keepVersions: 3))
        #expect(result.counts.removedEvents == oldEvents)
        #expect(result.plan.retainedEvents == 2 * 3 * 2)
        #expect(result.plan.limitedBy.contains("younger than 30 days"), "\(result.plan.limitedBy)")
        #expect(result.plan.carriedEvents == 0)
        #expect(try h.store.events(userId: h.userId).count == 12)
        #expect(try h.store.itemsWithKeptVersions(userId: h.userId) == ["old0", "old1", "old2", "old3"])
        let kept = try h.store.keptVersions(userId: h.userId, cipherId: "old2")
        // Item n's edit e is event 8e + 2n + 1 (each edit of four items is an update and a resolved).
        let allOld2: [UInt64] = (0..<10).map { (edit: Int) -> UInt64 in UInt64(8 * edit + 5) }
        #expect(kept.map(\.sequence) == Array(allOld2.suffix(3)), "the last 3 versions of old2")
        #expect(kept.allSatisfy { $0.operation?.cipher.name != nil })
        // Locked, the horizon and the kept item ids are still known; the versions need the key.
        h.store.lock(userId: h.userId)
        #expect(try h.store.horizon(userId: h.userId) == UInt64(oldEvents))
        #expect(throws: OfflineSyncError.vaultLocked(userId: h.userId)) { try h.store.keptVersions(userId: h.userId, cipherId: "old2") }
        #expect(try h.store.pendingCount(userId: h.userId) == 0)
    }

    /// The store keeps each unlocked user's projection in memory and folds only what came
    /// after it. A compaction that removed events the cached projection had not folded yet must
    /// not make the next fold skip them: the projection after it equals a fold in a fresh store.
    @Test func compactionBehindACachedProjection_doesNotMakeTheFoldSkipEvents() throws {
        let h = try Harness()
        _ = try Self.appendResolvedEdits(h, items: 2, editsEach: 2)
        _ = try h.store.projection(userId: h.userId)     // cached as of event 8
        try Self.appendPendingEdits(h, count: 4)
        h.clock.advance(by: 86_400)
        try h.store.compactBlocking(userId: h.userId, policy: RetentionPolicy(keepDays: 0, keepVersions: 1))
        let cached = try h.store.projection(userId: h.userId)
        let path = h.dir.path
        h.store.close()
        let fresh = try VaultLogStore(path: path)
        defer { fresh.close() }
        fresh.unlock(userId: h.userId, userKey: h.userKey)
        #expect(cached == (try fresh.projection(userId: h.userId)))
        #expect(cached.pending.keys.sorted() == ["p0", "p1"])
        #expect(cached.pending["p0"]?.offlinePasswordChangeCount == 2)
    }

    /// The same inside a write transaction (a sync's replace brings the projection it read
    /// before the transaction up to date with `foldTail`): a compaction in between makes it
    /// start again from the snapshot that transaction sees.
    @Test func foldTail_afterACompactionItHadNotSeen_startsFromTheSnapshot() throws {
        let h = try Harness()
        _ = try Self.appendResolvedEdits(h, items: 2, editsEach: 2)
        var stale = try h.store.projection(userId: h.userId)
        try Self.appendPendingEdits(h, count: 3)
        h.clock.advance(by: 86_400)
        try h.store.compactBlocking(userId: h.userId, policy: RetentionPolicy(keepDays: 0, keepVersions: 1))
        let key = SealingKey(userKey: h.userKey)
        try h.store.log.write { txn in try h.store.foldTail(into: &stale, reader: txn.reader, key: key) }
        #expect(stale == (try h.store.projection(userId: h.userId, at: try h.store.log.lastSequence())))
        #expect(stale.pending.keys.sorted() == ["p0", "p1"])
    }

    /// A compaction in steps of 7 events ends where one step ends: the same horizon, the same
    /// projection, the same kept versions; every step was its own write transaction.
    @Test func compactionInSteps_endsWhereOneStepEnds() throws {
        var outcomes: [(UInt64, Projection, [VaultEvent])] = []
        for step in [7, 20_000] {
            let h = try Harness()
            _ = try Self.appendResolvedEdits(h, items: 4, editsEach: 10)
            h.clock.advance(by: 86_400)
            let result = try h.store.compactBlocking(userId: h.userId, policy: RetentionPolicy(keepDays: 0, keepVersions: 3), eventsPerTransaction: step)
            #expect(result.transactions == (step == 7 ? 12 : 1), "80 events in steps of \(step)")
            #expect(result.counts.removedEvents == 80 && result.plan.currentHorizon == 0 && result.plan.horizon == 80)
            #expect(try h.store.verify(keys: [h.userId: SealingKey(userKey: h.userKey)]).isClean)
            outcomes.append((try h.store.horizon(userId: h.userId), try h.store.projection(userId: h.userId),
                             try h.store.keptVersions(userId: h.userId, cipherId: "r2")))
        }
        #expect(outcomes[0].0 == outcomes[1].0 && outcomes[0].1 == outcomes[1].1 && outcomes[0].2 == outcomes[1].2)
    }

    /// An item permanently deleted (and resolved) before the horizon keeps no versions.
    @Test func permanentlyDeletedItem_keepsNoVersions() throws {
        let h = try Harness()
        let cipher = try Self.appendResolvedEdits(h, items: 2, editsEach: 2)
        let at = BitwardenDate(h.clock.now)
        try h.store.append(userId: h.userId, events: [
            .init(cipherId: "r1", type: .hardDeleted, body: .operation(OperationBody(cipher: cipher, passwordChanged: false, baseRevisionDate: at, at: at))),
            .init(cipherId: "r1", type: .resolved, body: .outcome(OutcomeBody(at: at))),
        ])
        h.clock.advance(by: 86_400)
        try h.store.compactBlocking(userId: h.userId, policy: RetentionPolicy(keepDays: 0, keepVersions: 5))
        #expect(try h.store.itemsWithKeptVersions(userId: h.userId) == ["r0"])
        #expect(try h.store.events(userId: h.userId).isEmpty)
        #expect(try h.store.verify(keys: [h.userId: SealingKey(userKey: h.userKey)]).isClean, "a fully compacted user: the head names the horizon")
    }

    /// Logout removes the user's snapshot and kept versions with the rest; the other user's
    /// compacted log is untouched and still verifies.
    @Test func logout_removesTheSnapshotToo() throws {
        let h = try Harness()
        _ = try Self.appendResolvedEdits(h, items: 2, editsEach: 3)
        let keyB = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 31))
        h.store.unlock(userId: "user-b", userKey: keyB)
        let cipher = try Harness.login("b", password: "pw").encrypt(userKey: keyB, random: SeededRandomSource(seed: 4))
        for _ in 0..<3 {
            let at = BitwardenDate(h.clock.now)
            try h.store.append(userId: "user-b", events: [
                .init(cipherId: "b1", type: .updated, body: .operation(OperationBody(cipher: cipher, passwordChanged: true, baseRevisionDate: at, at: at))),
                .init(cipherId: "b1", type: .resolved, body: .outcome(OutcomeBody(at: at))),
            ])
        }
        h.clock.advance(by: 86_400)
        for user in [h.userId, "user-b"] { try h.store.compactBlocking(userId: user, policy: RetentionPolicy(keepDays: 0, keepVersions: 1)) }
        try h.store.logout(userId: h.userId)
        #expect(try h.store.horizon(userId: h.userId) == 0)
        #expect(try h.store.itemsWithKeptVersions(userId: h.userId).isEmpty)
        #expect(try h.store.horizon(userId: "user-b") == 18)
        #expect(try h.store.verify(keys: ["user-b": SealingKey(userKey: keyB)]).isClean)
    }

    /// `verify` with the key detects a tampered snapshot or item record, a removed snapshot
    /// (the first retained event then names a missing predecessor), an item record put back
    /// from an earlier compaction, and an event put back before the horizon.
    @Test func verify_detectsTamperedRemovedOrReplayedSnapshotRecords() throws {
        let key = { (h: Harness) in [h.userId: SealingKey(userKey: h.userKey)] }
        func kinds(_ h: Harness) throws -> Set<VerifyProblem.Kind> { Set(try h.store.verify(keys: key(h)).problems.map(\.kind)) }
        func snapshotsDB(_ h: Harness) throws -> LMDBRecords { LMDBRecords(store: h.store) }

        // A flipped byte in the snapshot's ciphertext.
        do {
            let h = try Harness()
            _ = try Self.appendResolvedEdits(h, items: 2, editsEach: 4)
            h.clock.advance(by: 86_400)
            try h.store.compactBlocking(userId: h.userId, policy: RetentionPolicy(keepDays: 0, keepVersions: 2))
            _ = try Self.appendResolvedEdits(h, items: 1, editsEach: 2, prefix: "after")
            #expect(try h.store.verify(keys: key(h)).isClean)
            let records = try snapshotsDB(h)
            let snapshotKey = SnapshotRecordKeys.snapshot(h.userId)
            var bytes = try #require(try records.get(snapshotKey))
            bytes[bytes.count - 1] ^= 0x01
            try records.put(snapshotKey, bytes)
            #expect(try kinds(h).contains(.snapshotAuthenticationFailed))
            #expect(throws: EventLogError.self) { try h.store.projection(userId: h.userId, at: .max) }
            // Without the key the structure still checks out (the MAC needs the key).
            #expect(!(try h.store.verify().problems.map(\.kind)).contains(.snapshotAuthenticationFailed))
        }
        // The snapshot removed: the first retained event names a predecessor that is gone.
        do {
            let h = try Harness()
            _ = try Self.appendResolvedEdits(h, items: 2, editsEach: 4)
            h.clock.advance(by: 86_400)
            try h.store.compactBlocking(userId: h.userId, policy: RetentionPolicy(keepDays: 0, keepVersions: 2))
            _ = try Self.appendResolvedEdits(h, items: 1, editsEach: 2, prefix: "after")
            let records = try snapshotsDB(h)
            try records.delete(SnapshotRecordKeys.snapshot(h.userId))
            let found = try kinds(h)
            #expect(found.contains(.chainBroken), "\(found)")
            #expect(try h.store.verify().problems.map(\.kind).contains(.chainBroken), "also without the key")
        }
        // An item record from the first compaction put back after the second.
        do {
            let h = try Harness()
            _ = try Self.appendResolvedEdits(h, items: 2, editsEach: 4)
            h.clock.advance(by: 86_400)
            try h.store.compactBlocking(userId: h.userId, policy: RetentionPolicy(keepDays: 0, keepVersions: 2))
            let records = try snapshotsDB(h)
            let itemKey = SnapshotRecordKeys.item(h.userId, "r0")
            let old = try #require(try records.get(itemKey))
            _ = try Self.appendResolvedEdits(h, items: 2, editsEach: 2)
            h.clock.advance(by: 86_400)
            try h.store.compactBlocking(userId: h.userId, policy: RetentionPolicy(keepDays: 0, keepVersions: 2))
            #expect(try h.store.verify(keys: key(h)).isClean)
            try records.put(itemKey, old)
            #expect(try kinds(h).contains(.snapshotMismatch))
            #expect(throws: EventLogError.self) { try h.store.keptVersions(userId: h.userId, cipherId: "r0") }
            // And a record removed.
            try records.delete(itemKey)
            #expect(try kinds(h).contains(.snapshotMismatch))
        }
    }

    /// A store compacted twice, exported and imported, reads and verifies the same.
    @Test func compactedStore_exportsAndImports_andStillVerifies() throws {
        let h = try Harness()
        _ = try Self.appendResolvedEdits(h, items: 3, editsEach: 4)
        h.clock.advance(by: 86_400)
        try h.store.compactBlocking(userId: h.userId, policy: RetentionPolicy(keepDays: 0, keepVersions: 2))
        _ = try Self.appendResolvedEdits(h, items: 3, editsEach: 2, prefix: "s")
        let file = h.dir.path + "/export.jsonl"
        var data = Data()
        _ = try h.store.writeExport({ data.append(contentsOf: $0) })
        try data.write(to: URL(fileURLWithPath: file))
        let target = TemporaryDirectory("compaction-import")
        var options = VaultLogStoreOptions()
        options.dependencies = .deterministic(seed: 9, clock: h.clock)
        let imported = try VaultLogStore(path: target.path, options: options)
        defer { imported.close() }
        _ = try imported.importEvents(from: ExportFile(path: file, checkingEveryLine: false))
        imported.unlock(userId: h.userId, userKey: h.userKey)
        #expect(try imported.verify(keys: [h.userId: SealingKey(userKey: h.userKey)]).isClean)
        #expect(try imported.horizon(userId: h.userId) == (try h.store.horizon(userId: h.userId)))
        #expect(try imported.projection(userId: h.userId) == (try h.store.projection(userId: h.userId)))
        #expect(try imported.keptVersions(userId: h.userId, cipherId: "r1") == (try h.store.keptVersions(userId: h.userId, cipherId: "r1")))
    }

    /// After the compacting copy, no byte of a removed event's sealed body is left in
    /// `data.mdb`; after the logical compaction alone they still are (free pages), which is why
    /// the copy exists.
    @Test func compactAndClose_leavesNoCiphertextOfRemovedEventsInTheFile() throws {
        for rewrite in [false, true] {
            let h = try Harness()
            _ = try Self.appendResolvedEdits(h, items: 5, editsEach: 20)
            let removed = try h.store.log.envelopes(userId: h.userId).prefix(150).map { Array($0.bytes.suffix(32)) }
            h.clock.advance(by: 86_400)
            let fileHolds = { (needle: [UInt8]) throws -> Bool in
                try Data(contentsOf: URL(fileURLWithPath: h.dir.path + "/data.mdb")).range(of: Data(needle)) != nil
            }
            #expect(try removed.allSatisfy(fileHolds))
            if rewrite {
                let (results, file) = try h.store.compactAndCloseBlocking(userIds: [h.userId], policy: RetentionPolicy(keepDays: 0, keepVersions: 1))
                #expect(results.first?.counts.removedEvents == 200)
                #expect(file.bytesAfter < file.bytesBefore)
                #expect(try removed.allSatisfy { try !fileHolds($0) }, "no removed ciphertext is left")
                let reopened = try VaultLogStore(path: h.dir.path)
                defer { reopened.close() }
                reopened.unlock(userId: h.userId, userKey: h.userKey)
                #expect(try reopened.verify(keys: [h.userId: SealingKey(userKey: h.userKey)]).isClean)
                #expect(try reopened.keptVersions(userId: h.userId, cipherId: "r3").count == 1)
            } else {
                try h.store.compactBlocking(userId: h.userId, policy: RetentionPolicy(keepDays: 0, keepVersions: 1))
                #expect(try removed.contains(where: fileHolds), "the logical compaction alone leaves them in free pages")
            }
        }
    }
}

/// Raw access to the `snapshots` database, for tampering tests.
struct LMDBRecords {
    let store: VaultLogStore
    var db: Database { store.log.snapshots! }
    func get(_ key: [UInt8]) throws -> [UInt8]? { try store.log.read { try $0.transaction.get(db, key: key) } }
    func put(_ key: [UInt8], _ value: [UInt8]) throws { try store.log.write { try $0.transaction.put(db, key: key, value: value) } }
    func delete(_ key: [UInt8]) throws { _ = try store.log.write { try $0.transaction.delete(db, key: key) } }
}

/// The keys of the `snapshots` database (see `Docs/EventFormat.md`).
enum SnapshotRecordKeys {
    static func prefix(_ user: String) -> [UInt8] { let u = Array(user.utf8); return [UInt8(u.count)] + u }
    static func snapshot(_ user: String) -> [UInt8] { [0x01] + prefix(user) }
    static func item(_ user: String, _ cipher: String) -> [UInt8] { let c = Array(cipher.utf8); return [0x02] + prefix(user) + [UInt8(c.count)] + c }
}
