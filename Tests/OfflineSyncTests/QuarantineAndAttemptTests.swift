import Foundation
import Testing
import VaultCrypto
import VaultModel
import EventLog
@_spi(Tools) @testable import OfflineSync

/// One unreadable event quarantines its item only; only the server's answers count towards
/// the dead-letter limit; a new edit gives a failing item a fresh start.
@Suite struct QuarantineAndAttemptTests {
    /// Two items edited offline; one gets an event whose body does not decode.
    static func twoPendingItems() async throws -> Harness {
        let h = try Harness()
        for name in ["Bank", "Mail"] {
            var view = try await h.seedSynced(name)
            view.login?.password = "\(name)-pw-1"
            h.server.fail(with: NotConnectedError())
            _ = try await h.repository().updateCipher(view)
        }
        return h
    }

    /// A lazy fold keeps no plaintext: it reads each pending item's latest event again at the
    /// end. That event must be the item's operation at the sequence the fold saw; one that is
    /// gone (compacted meanwhile) or is another item's refuses the shortcut (the fold then runs
    /// eagerly), and a right one gives the snapshot the eager fold gives.
    @Test func materialize_readsTheLatestEventAgain_andRefusesAnotherOne() async throws {
        let h = try await Self.twoPendingItems()
        let key = try h.store.keys(h.userId).sealing
        let eager = try h.store.projection(userId: h.userId)
        #expect(try h.store.lazyFoldDisagreement(userId: h.userId) == nil)
        let bank = try #require(eager.pending["server-Bank"]), mail = try #require(eager.pending["server-Mail"])
        let bankAt = try #require(bank.versionSequences.last), mailAt = try #require(mail.versionSequences.last)
        var lazy = eager
        for id in ["server-Bank", "server-Mail"] {
            lazy.pending[id]?.latest = Projection.undecodedSnapshot
            lazy.pending[id]?.latestIsInLog = true
        }
        var right = lazy
        #expect(h.store.materialize([:], into: &right, key: key))
        #expect(right == eager)
        // Bank's latest version pointing at Mail's event (pending as of that sequence), and at an event that is not there.
        var swapped = lazy
        swapped.pending["server-Bank"]?.versionSequences.append(mailAt)
        #expect(!h.store.materialize([:], into: &swapped, key: key))
        var gone = lazy
        gone.pending["server-Bank"]?.versionSequences.append(eager.lastSequence + 10)
        #expect(!h.store.materialize([:], into: &gone, key: key))
        // A change not marked is not read at all, nor a checkpoint's snapshot no longer its latest version.
        var unmarked = eager
        unmarked.pending["server-Bank"]?.versionSequences.append(eager.lastSequence + 10)
        let before = unmarked
        let stale = try VaultEvent.encodeCipher(Projection.undecodedSnapshot)
        #expect(h.store.materialize(["server-Bank": (bankAt, stale[...])], into: &unmarked, key: key))
        #expect(unmarked == before)
    }

    @Test func undecodableEvent_quarantinesItsItemOnly() async throws {
        let h = try await Self.twoPendingItems()
        // Authentic, but an operation type whose body is not an operation: it cannot be decoded.
        try await h.store.append(userId: h.userId, cipherId: "server-Bank", type: .updated, body: .outcome(OutcomeBody(at: BitwardenDate(h.clock.now))))
        let projection = try h.store.projection(userId: h.userId)
        #expect(projection.quarantined?["server-Bank"]?.contains("event 3") == true, "\(projection.quarantined ?? [:])")

        let report = try await OfflineSyncResolver(store: h.store, server: h.server).processPendingChanges(userId: h.userId)
        let bank = try #require(report.items.first { $0.cipherId == "server-Bank" })
        let mail = try #require(report.items.first { $0.cipherId == "server-Mail" })
        #expect(mail.outcome == .pushed)
        #expect(bank.outcome == .skipped)
        #expect(bank.error?.contains("quarantined") == true)
        // Kept pending (and in the log), never dropped.
        #expect(try h.store.pendingCount(userId: h.userId) == 1)
        let sync = try await SyncService(store: h.store, server: h.server, resolver: OfflineSyncResolver(store: h.store, server: h.server))
            .fetchSync(userId: h.userId)
        // The sync applies the rest; the quarantined item keeps its local copy and is listed.
        #expect(sync.isApplied && !sync.isCurrent)
        #expect(sync.stillPending.map(\.cipherId) == ["server-Bank"])
        guard case .quarantined(let reason) = sync.stillPending.first?.state else { Issue.record("\(sync)"); return }
        #expect(reason.contains("event 3"))
    }

    /// The fold decodes no snapshot until its end. An authentic body of the canonical shape
    /// whose cipher does not decode is found only then: the fold runs again eagerly, and the
    /// item is quarantined at that event exactly as an eager fold does; the other item keeps
    /// its latest snapshot.
    @Test func canonicalBodyWithABrokenCipher_isQuarantinedByTheLazyFold() async throws {
        let h = try await Self.twoPendingItems()
        let keys = try h.store.keys(h.userId)
        let bank = try #require(try h.store.projection(userId: h.userId).pending["server-Bank"]?.latest)
        let good = try VaultEvent.encode(.operation(OperationBody(cipher: bank, passwordChanged: true, baseRevisionDate: nil,
                                                                  at: BitwardenDate(h.clock.now))))
        let broken = Array(String(decoding: good, as: UTF8.self).replacingOccurrences(of: "\"type\":1", with: "\"type\":\"x\"").utf8)
        #expect(broken != good)
        let header = EventHeader(sequence: 1, userId: h.userId, cipherId: "server-Bank", eventType: VaultEventType.updated.rawValue, recordedAtMillis: 0)
        #expect(VaultEvent.operationSummary(header: header, plaintext: broken, placeholder: Cipher(type: .login)) != nil,
                "the broken body keeps the canonical shape the lazy fold reads")
        try h.store.log.append(NewEvent(userId: h.userId, cipherId: "server-Bank", eventType: VaultEventType.updated.rawValue,
                                        recordedAtMillis: 0, body: broken), key: keys.sealing)
        h.store.lock(userId: h.userId)
        h.store.unlock(userId: h.userId, userKey: h.userKey)
        let projection = try h.store.projection(userId: h.userId)
        #expect(projection.quarantined?["server-Bank"]?.contains("event 3") == true, "\(projection.quarantined ?? [:])")
        let mail = try #require(projection.pending["server-Mail"])
        #expect(try mail.latest.decrypt(userKey: h.userKey).login?.password == "Mail-pw-1")
    }

    /// A quarantined item's later events are not folded, so its latest version is the last
    /// operation before the unreadable event, however the folds read the operations around it.
    /// The eager fold leaves the snapshot of an operation that a later one of the batch
    /// supersedes undecoded; when that later one is not applied, the earlier one is decoded
    /// after all (it stayed an empty placeholder). A later operation whose body is not of the
    /// canonical shape (decoded in full by the lazy fold) must not clear the lazy fold's kept
    /// snapshot either (it did). Both folds give the same projection.
    @Test(arguments: [true, false])
    func operationBeforeAQuarantine_staysTheLatestVersion(canonicalLater: Bool) async throws {
        let h = try await Self.twoPendingItems()
        let keys = try h.store.keys(h.userId)
        var bank = try #require(try h.store.projection(userId: h.userId).pending["server-Bank"]?.latest).decrypt(userKey: h.userKey)
        /// An authentic update of Bank with password `password`.
        func update(_ password: String, canonical: Bool = true) throws -> NewEvent {
            bank.login?.password = password
            var body = try VaultEvent.encode(.operation(OperationBody(cipher: try bank.encrypt(userKey: h.userKey), passwordChanged: true,
                                                                      baseRevisionDate: nil, at: BitwardenDate(h.clock.now))))
            if !canonical { body.insert(UInt8(ascii: " "), at: 1) }
            return NewEvent(userId: h.userId, cipherId: "server-Bank", eventType: VaultEventType.updated.rawValue, recordedAtMillis: 0, body: body)
        }
        let unreadable = NewEvent(userId: h.userId, cipherId: "server-Bank", eventType: VaultEventType.updated.rawValue, recordedAtMillis: 0,
                                  body: try VaultEvent.encode(.outcome(OutcomeBody(at: BitwardenDate(h.clock.now)))))
        try h.store.log.append([try update("Bank-pw-2"), unreadable, try update("Bank-pw-3", canonical: canonicalLater)], key: keys.sealing)
        h.store.lock(userId: h.userId)
        h.store.unlock(userId: h.userId, userKey: h.userKey)
        let projection = try h.store.projection(userId: h.userId)
        #expect(projection.quarantined?["server-Bank"]?.contains("event 4") == true)
        let latest = try #require(projection.pending["server-Bank"]?.latest)
        #expect(try latest.decrypt(userKey: h.userKey).login?.password == "Bank-pw-2")
        let disagreement = try h.store.lazyFoldDisagreement(userId: h.userId)
        #expect(disagreement == nil)
    }

    @Test func unreachableServer_neverCountsTowardsDeadLetters() async throws {
        let h = try await Self.twoPendingItems()
        let resolver = OfflineSyncResolver(store: h.store, server: UnreachableServer())
        for _ in 0..<20 {
            h.clock.advance(by: 1800)
            _ = try await resolver.processPendingChanges(userId: h.userId)
        }
        let pending = try h.store.projection(userId: h.userId).pending.values
        #expect(pending.allSatisfy { $0.attempts == 0 && !$0.isDeadLetter })
        // Recorded once per item while it lasts, not once per sync.
        let failures = try h.store.events(userId: h.userId).filter { $0.type == .resolutionFailed }
        #expect(failures.count == 2)
    }

    @Test func serverAnswers_countAndANewEditResetsThem() async throws {
        let h = try await Self.twoPendingItems()
        h.server.fail(with: HTTPStatusError(status: 500), times: 6)
        var options = ResolverOptions()
        options.maxAttempts = 3
        let resolver = OfflineSyncResolver(store: h.store, server: h.server, options: options)
        for _ in 0..<6 {
            h.clock.advance(by: 7 * 3600)
            _ = try await resolver.processPendingChanges(userId: h.userId)
        }
        let before = try #require(try h.pending("server-Bank"))
        #expect(before.isDeadLetter && before.attempts == 3)

        var view = try #require(try h.local("server-Bank")).decrypt(userKey: h.userKey)
        view.login?.password = "Bank-pw-2"
        h.server.fail(with: NotConnectedError())
        _ = try await h.repository().updateCipher(view)
        let after = try #require(try h.pending("server-Bank"))
        #expect(!after.isDeadLetter && after.attempts == 0 && after.nextRetryAt == nil)
    }
}
