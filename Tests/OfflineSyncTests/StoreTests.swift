import Testing
import Foundation
import EventLog
import VaultCrypto
import VaultJSON
import VaultModel
@_spi(Tools) @testable import OfflineSync
import VaultLogTesting

@Suite struct StoreTests {
    struct InjectedFailure: Error {}

    @Test func failureInsideTransaction_leavesNeitherLocalChangeNorEvent() async throws {
        let h = try Harness()
        let view = try await h.seedSynced("Bank")
        var edited = try #require(try h.local(view.id!))
        edited.notes = try EncString("2.kTtIypq9OLzd5iMMbU11pQ==|J4i3hTtGVdg7EZ+AQv/ujg==|QJpSpotQVpIW8j8dR/8l015WJzAIxBaOmrz4Uj/V1JA=")
        let before = try h.local(view.id!)
        #expect(throws: InjectedFailure.self) {
            let body = VaultEvent.Body.operation(OperationBody(cipher: edited, passwordChanged: false, baseRevisionDate: nil,
                                                               at: BitwardenDate(h.clock.now)))
            try h.store.append(userId: h.userId, events: [.init(cipherId: view.id!, type: .updated, body: body)],
                               localChanges: [.upsert(edited)],
                               beforeCommit: { _ in throw InjectedFailure() })
        }
        #expect(try h.local(view.id!) == before, "local change rolled back")
        #expect(try h.eventCount() == 0, "event rolled back")
        #expect(try h.store.pendingCount(userId: h.userId) == 0)
    }

    @Test func passwordChangeCount_staysRightAcrossLockAndUnlock() async throws {
        let h = try Harness()
        var view = try await h.seedSynced("Bank")
        view.login?.password = "pw-1"
        h.server.fail(with: NotConnectedError(), times: 2)
        _ = try await h.repository().updateCipher(view)
        h.store.lock(userId: h.userId)
        #expect(!h.store.isUnlocked(userId: h.userId))
        h.store.unlock(userId: h.userId, userKey: h.userKey)
        var next = try #require(try h.local(view.id!)).decrypt(userKey: h.userKey)
        next.login?.password = "pw-2"
        _ = try await h.repository().updateCipher(next)
        #expect(try h.pending(view.id!)?.offlinePasswordChangeCount == 2)
    }

    @Test func unlockWithMasterPassword_wrongPasswordChangesNothing() throws {
        let h = try Harness(userId: "user-b")
        let master = try MasterKey.derive(password: "right", email: "b@example.com", kdf: .pbkdf2(iterations: 5000))
        let protected = master.encryptUserKey(h.userKey)
        h.store.lock(userId: "user-b")
        #expect(throws: VaultCryptoError.authenticationFailed) {
            try h.store.unlock(userId: "user-b", email: "b@example.com", masterPassword: "wrong", kdf: .pbkdf2(iterations: 5000), protectedUserKey: protected)
        }
        #expect(!h.store.isUnlocked(userId: "user-b"))
        let key = try h.store.unlock(userId: "user-b", email: " B@example.com", masterPassword: "right", kdf: .pbkdf2(iterations: 5000), protectedUserKey: protected)
        #expect(key == h.userKey)
    }

    @Test func pendingFromHeaders_worksWhileLocked() async throws {
        let h = try Harness()
        let a = try await h.seedSynced("A")
        let b = try await h.seedSynced("B")
        h.server.fail(with: NotConnectedError(), times: 3)
        _ = try await h.repository().addCipher(Harness.login("New", password: "n"))
        _ = try await h.repository().softDeleteCipher(a)
        _ = try await h.repository().deleteCipher(id: b.id!)
        h.store.lock(userId: h.userId)
        #expect(throws: OfflineSyncError.self) { try h.store.projection(userId: h.userId) }
        let headers = try h.store.pendingFromHeaders(userId: h.userId)
        #expect(headers.count == 3)
        #expect(headers.pending[a.id!] == .softDelete && headers.pending[b.id!] == .hardDelete)
        #expect(try h.store.pendingCount(userId: h.userId) == 3)
    }

    @Test func userB_seesNoneOfUserAsEventsOrPendingChanges() async throws {
        let h = try Harness(userId: "user-a")
        let keyB = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 77))
        h.store.unlock(userId: "user-b", userKey: keyB)
        var view = try await h.seedSynced("A's bank")
        view.login?.password = "new"
        h.server.fail(with: NotConnectedError())
        _ = try await h.repository().updateCipher(view)
        #expect(try h.store.pendingCount(userId: "user-a") == 1)
        #expect(try h.store.pendingCount(userId: "user-b") == 0)
        #expect(try h.store.projection(userId: "user-b").pending.isEmpty)
        #expect(try h.store.events(userId: "user-b").isEmpty)
        #expect(try h.store.localCiphers(userId: "user-b").isEmpty)
        // B's key cannot open A's events.
        let envelope = try #require(try h.store.log.envelope(at: 1))
        #expect(throws: EnvelopeError.authenticationFailed(sequence: 1)) { try envelope.open(key: SealingKey(userKey: keyB)) }
        #expect(try h.store.event(at: 1, userId: "user-b") == nil)
    }

    @Test func projection_usesCheckpoints_andEqualsFullFold() async throws {
        let h = try Harness(checkpointInterval: 10)
        var view = try await h.seedSynced("Bank")
        h.server.fail(with: NotConnectedError(), times: 25)
        for n in 1...25 {
            view.login?.password = "pw-\(n)"
            _ = try await h.repository().updateCipher(view)
            view = try #require(try h.local(view.id!)).decrypt(userKey: h.userKey)
        }
        let checkpoints = try h.store.log.read { try $0.checkpointSequences(userId: h.userId) }
        #expect(!checkpoints.isEmpty, "a checkpoint was saved")
        let full = Projection.fold(userId: h.userId, try h.store.events(userId: h.userId))
        // A fresh process: no in-memory projection, starts from the newest checkpoint.
        h.store.lock(userId: h.userId)
        h.store.unlock(userId: h.userId, userKey: h.userKey)
        #expect(try h.store.projection(userId: h.userId) == full)
        #expect(full.pending[view.id!]?.offlinePasswordChangeCount == 25)
        // Time travel: the projection as of an earlier sequence.
        #expect(try h.store.projection(userId: h.userId, at: 5).pending[view.id!]?.offlinePasswordChangeCount == 5)
    }

    @Test func pendingCountUpdates_streamsBadgeValues() async throws {
        let h = try Harness()
        let view = try await h.seedSynced("Bank")
        var iterator = h.store.pendingCountUpdates(userId: h.userId).makeAsyncIterator()
        #expect(await iterator.next() == 0)
        h.server.fail(with: NotConnectedError())
        _ = try await h.repository().softDeleteCipher(view)
        #expect(await iterator.next() == 1)
    }

    @Test func everyIntermediateVersion_isReachable() async throws {
        let h = try Harness()
        var view = try await h.seedSynced("Bank")
        h.server.fail(with: NotConnectedError(), times: 3)
        for n in 1...3 {
            view.login?.password = "v\(n)"
            _ = try await h.repository().updateCipher(view)
            view = try #require(try h.local(view.id!)).decrypt(userKey: h.userKey)
        }
        let change = try #require(try h.pending(view.id!))
        let passwords = try change.versionSequences.map { seq in
            try h.store.event(at: seq, userId: h.userId)?.operation?.cipher.decrypt(userKey: h.userKey).login?.password
        }
        #expect(passwords == ["v1", "v2", "v3"])
    }

    /// Random offline edits, creates, deletes and resolutions of 12 items; after every step the
    /// pending set read through checkpoints every 3 headers equals the fold from scratch.
    @Test func pendingCheckpoints_giveTheSameSetAsAFoldFromScratch() throws {
        let h = try Harness(pendingCheckpointInterval: 3)
        let cipher = try Harness.login("item", password: "pw").encrypt(userKey: h.userKey)
        var rng = XorShift(state: 11)
        let types: [VaultEventType] = [.created, .updated, .updated, .softDeleted, .hardDeleted, .resolved]
        for step in 0..<300 {
            let type = types[Int(rng.next() % UInt64(types.count))]
            let body: VaultEvent.Body = type == .resolved
                ? .outcome(OutcomeBody(at: BitwardenDate(h.clock.now)))
                : .operation(OperationBody(cipher: cipher, passwordChanged: false, baseRevisionDate: nil, at: BitwardenDate(h.clock.now)))
            try h.store.append(userId: h.userId, cipherId: "item-\(rng.next() % 12)", type: type, body: body)
            let scratch = try h.store.log.headers(userId: h.userId).reduce(into: HeaderProjection()) { $0.apply($1) }
            let viaCheckpoints = try h.store.pendingFromHeaders(userId: h.userId)
            #expect(viaCheckpoints.pending == scratch.pending, "step \(step)")
            #expect(viaCheckpoints.pending == (try h.store.projection(userId: h.userId).pending.mapValues(\.changeType)), "step \(step)")
        }
    }

    @Test func unreadablePendingCheckpoint_isIgnored_andTheCountStaysRight() throws {
        let h = try Harness(pendingCheckpointInterval: 2)
        let cipher = try Harness.login("item", password: "pw").encrypt(userKey: h.userKey)
        for n in 0..<5 {
            try h.store.append(userId: h.userId, cipherId: "item-\(n)", type: .created,
                               body: .operation(OperationBody(cipher: cipher, passwordChanged: false, baseRevisionDate: nil, at: BitwardenDate(h.clock.now))))
        }
        #expect(try h.store.pendingCount(userId: h.userId) == 5)
        let db = try #require(h.store.pendingCheckpoints)
        try h.store.log.write { txn in
            #expect(try txn.get(db, key: VaultLogStore.userPrefix(h.userId)) != nil, "a checkpoint was saved")
            try txn.put(db, key: VaultLogStore.userPrefix(h.userId), value: [1, 0xFF, 7])
        }
        #expect(try h.store.pendingCount(userId: h.userId) == 5)
    }

    @Test func longLog_foldsInBatches_toTheSameProjection() throws {
        let h = try Harness(checkpointInterval: 1_000_000)
        let cipher = try Harness.login("item", password: "pw").encrypt(userKey: h.userKey)
        let events = (0..<(VaultLogStore.foldBatch * 2 + 100)).map { n in
            VaultLogStore.PlannedEvent(cipherId: "item-\(n % 50)", type: n < 50 ? .created : .updated,
                                       body: .operation(OperationBody(cipher: cipher, passwordChanged: n % 3 == 0, baseRevisionDate: nil,
                                                                      at: BitwardenDate(h.clock.now))))
        }
        try h.store.append(userId: h.userId, events: events)
        let folded = try h.store.projection(userId: h.userId)
        let reference = Projection.fold(userId: h.userId, try h.store.events(userId: h.userId))
        #expect(folded == reference)
        #expect(folded.pending["item-0"]?.versionSequences.count == (events.count + 49) / 50, "every version of item-0, across batches")
        // Stopping inside a batch (the next batch is read ahead while one is applied, and must
        // not be folded past the sequence asked for), and lazily and eagerly alike.
        let all = try h.store.events(userId: h.userId)
        for stop in [VaultLogStore.foldBatch - 1, VaultLogStore.foldBatch, VaultLogStore.foldBatch + 1_000, all.count - 1] {
            let sequence = all[stop].sequence
            #expect(try h.store.projection(userId: h.userId, at: sequence) == Projection.fold(userId: h.userId, all.prefix(stop + 1)),
                    "as of event \(stop)")
        }
        #expect(try h.store.lazyFoldDisagreement(userId: h.userId) == nil)
    }

    @Test func logout_removesUsersEventsAndLocalItems() async throws {
        let h = try Harness(pendingCheckpointInterval: 1)
        var view = try await h.seedSynced("Bank")
        view.login?.password = "x"
        h.server.fail(with: NotConnectedError())
        _ = try await h.repository().updateCipher(view)
        #expect(try h.store.pendingCount(userId: h.userId) == 1)
        let db = try #require(h.store.pendingCheckpoints)
        #expect(try h.store.log.read { try $0.get(db, key: VaultLogStore.userPrefix(h.userId)) } != nil, "a pending checkpoint exists")
        try h.store.logout(userId: h.userId)
        #expect(try h.store.pendingCount(userId: h.userId) == 0)
        #expect(try h.store.localCiphers(userId: h.userId).isEmpty)
        #expect(try h.eventCount() == 0)
        #expect(!h.store.isUnlocked(userId: h.userId))
        #expect(try h.store.log.read { try $0.get(db, key: VaultLogStore.userPrefix(h.userId)) } == nil, "logout removed it")
    }

    /// A user who logs out leaves the account's wrapped user key and sealed events in LMDB's
    /// free pages (`logout` alone: the bytes are still in `data.mdb`, which this test shows
    /// first); `logoutAndClose` compacts the file, after which none of them is there, and the
    /// other user's data is intact and verifies.
    @Test func logoutAndClose_leavesNoByteOfTheAccountsProtectedKeyOrEventsInTheFile() async throws {
        func account(_ h: Harness, user: String, seed: UInt64) -> StoredAccount {
            let wrapped = EncString.encrypt(SymmetricCryptoKey.generate(using: SeededRandomSource(seed: seed)).exportBytes(),
                                            key: h.userKey, iv: [UInt8](repeating: UInt8(seed), count: 16))
            return StoredAccount(userId: user, email: "\(user)@example.com", kdf: .pbkdf2(iterations: 600_000), protectedUserKey: wrapped)
        }
        func fileHolds(_ h: Harness, _ needles: [[UInt8]]) throws -> [Bool] {
            let file = try Data(contentsOf: URL(fileURLWithPath: h.dir.path + "/data.mdb"))
            return needles.map { file.range(of: Data($0)) != nil }
        }
        for compact in [false, true] {
            let h = try Harness()
            let stored = account(h, user: h.userId, seed: 77)
            try h.store.saveAccount(stored)
            try h.store.saveAccount(account(h, user: "user-b", seed: 78))
            var view = try await h.seedSynced("Bank")
            h.server.fail(with: NotConnectedError(), times: 1000)
            for n in 0..<20 {
                view.login?.password = "pw-\(n)"
                _ = try await h.repository().updateCipher(view)
            }
            let keyB = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 99))
            h.store.unlock(userId: "user-b", userKey: keyB)
            let kept = try await VaultRepository(store: h.store, userId: "user-b", server: h.server)
                .addCipher(Harness.login("Mail", password: "mail-pw"))
            #expect(kept.isOffline)
            // The account record with its wrapped key and log mark (as stored) and the sealed
            // ciphertext of a few of the user's events.
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            let record = try #require(try h.store.storedAccounts().first { $0.userId == h.userId })
            #expect(record.protectedUserKey == stored.protectedUserKey && record.logMark != nil)
            var needles = [Array(try encoder.encode(record))]
            needles += try h.store.log.envelopes(userId: h.userId).prefix(5).map { Array($0.bytes.suffix(32)) }
            #expect(try fileHolds(h, needles).allSatisfy { $0 }, "the bytes are in the file before logout")

            if compact {
                let result = try h.store.logoutAndClose(userId: h.userId)
                #expect(result.bytesAfter <= result.bytesBefore)
                #expect(try fileHolds(h, needles).allSatisfy { !$0 }, "no byte sequence of the logged-out account is left")
                let reopened = try VaultLogStore(path: h.dir.path)
                defer { reopened.close() }
                #expect(try reopened.storedAccounts().map(\.userId) == ["user-b"])
                #expect(try reopened.log.envelopes(userId: h.userId).isEmpty)
                reopened.unlock(userId: "user-b", userKey: keyB)
                #expect(try reopened.pendingCount(userId: "user-b") == 1)
                #expect(try reopened.verify(keys: ["user-b": SealingKey(userKey: keyB)]).isClean)
            } else {
                try h.store.logout(userId: h.userId)
                #expect(try fileHolds(h, needles).contains(true), "logout alone leaves them in free pages")
            }
        }
    }

    @Test func noPlaintextSentinel_inAnyFileAfterAllOperations() async throws {
        let h = try Harness()
        let password = "Sentinel-Pass-\(UUID().uuidString)"
        let name = "Sentinel-Name-\(UUID().uuidString)"
        let notes = "Sentinel-Notes-\(UUID().uuidString)"
        var synced = try await h.seedSynced("Bank")
        h.server.fail(with: NotConnectedError(), times: 10)
        let new = CipherView(type: .login, name: name, notes: notes, login: LoginView(username: "u", password: password))
        _ = try await h.repository().addCipher(new)
        synced.name = name
        synced.notes = notes
        synced.login?.password = password
        _ = try await h.repository().updateCipher(synced)
        synced = try #require(try h.local(synced.id!)).decrypt(userKey: h.userKey)
        synced.login?.password = password + "-2"
        _ = try await h.repository().updateCipher(synced)
        _ = try await h.repository().softDeleteCipher(synced)
        _ = try await h.repository().deleteCipher(id: synced.id!)
        try h.store.saveCheckpoint(try h.store.projection(userId: h.userId))
        #expect(try h.store.pendingCount(userId: h.userId) == 2)
        h.store.close()
        for file in try FileManager.default.contentsOfDirectory(atPath: h.dir.path) {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: h.dir.path + "/" + file)))
            for sentinel in [password, name, notes, "Sentinel-"] {
                #expect(!bytes.containsSubsequence(Array(sentinel.utf8)), "\(file) contains \(sentinel.prefix(14))")
            }
        }
    }
}

extension Array where Element == UInt8 {
    func containsSubsequence(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, count >= needle.count else { return false }
        let first = needle[0]
        var i = 0
        while i <= count - needle.count {
            if self[i] == first && self[i..<i + needle.count].elementsEqual(needle) { return true }
            i += 1
        }
        return false
    }
}

/// A tiny seeded generator for the property tests here.
struct XorShift {
    var state: UInt64
    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}

@Suite struct OperationSummaryTests {
    /// The fold's fast path reads the same time, base revision and password flag as the full
    /// decode, for every shape the encoder writes, and refuses any other shape.
    @Test(arguments: [true, false], [true, false])
    func summary_matchesTheFullDecode(passwordChanged: Bool, withBase: Bool) throws {
        let h = try Harness()
        let cipher = try Harness.login("item \"quoted\" {braces}", password: "pw").encrypt(userKey: h.userKey)
        let body = OperationBody(cipher: cipher, passwordChanged: passwordChanged,
                                 baseRevisionDate: withBase ? try BitwardenDate("2026-01-01T00:00:00.1234567Z") : nil,
                                 at: try BitwardenDate("2026-02-03T04:05:06.7000000Z"))
        let plaintext = try VaultEvent.encode(.operation(body))
        let header = EventHeader(sequence: 7, userId: "u", cipherId: "c", eventType: VaultEventType.updated.rawValue, recordedAtMillis: 0)
        let full = try VaultEvent(header: header, plaintext: plaintext).operation
        let summary = try #require(VaultEvent.operationSummary(header: header, plaintext: plaintext, placeholder: Cipher(type: .login))?.operation)
        #expect(summary.at == full?.at && summary.baseRevisionDate == full?.baseRevisionDate && summary.passwordChanged == full?.passwordChanged)
        var other = plaintext
        other.insert(contentsOf: Array("\"x\":1,".utf8), at: 1)
        #expect(VaultEvent.operationSummary(header: header, plaintext: other, placeholder: Cipher(type: .login)) == nil)
    }

    /// A first edit's body carries its base (`{"at":…,"base":{…},…}`): the fold's reader skips it
    /// in a whole body (the same fields as the decoder, the cipher where it is), and leaves a
    /// body read from its ends alone to be read whole (the base does not fit in the head).
    @Test(arguments: [true, false])
    func bodyWithABase_isReadWhole_withTheDecodersFields(withRevision: Bool) throws {
        let h = try Harness()
        let cipher = try Harness.login("item \"quoted\" {braces}", password: "pw").encrypt(userKey: h.userKey)
        var base = try Harness.login("base \"}{\" \\", password: "pw-0").encrypt(userKey: h.userKey)
        base.revisionDate = try BitwardenDate("2026-01-01T00:00:00.1234567Z")
        let body = OperationBody(cipher: cipher, passwordChanged: true, baseRevisionDate: withRevision ? base.revisionDate : nil,
                                 at: try BitwardenDate("2026-02-03T04:05:06.7000000Z"), base: base)
        let plaintext = try VaultEvent.encode(.operation(body))
        #expect(String(decoding: plaintext.prefix(50), as: UTF8.self).contains(",\"base\":{"))
        let header = EventHeader(sequence: 7, userId: "u", cipherId: "c", eventType: VaultEventType.updated.rawValue, recordedAtMillis: 0)
        let full = try #require(try VaultEvent(header: header, plaintext: plaintext).operation)
        #expect(full == body)
        let fields = try #require(VaultEvent.operationFields(plaintext))
        #expect(fields.at == full.at && fields.baseRevisionDate == full.baseRevisionDate && fields.passwordChanged)
        #expect(try JSONTapeDecoder().decode(Cipher.self, from: plaintext[fields.cipher]) == cipher)
        let ends = plaintext.withUnsafeBytes { p in
            VaultEvent.operationFields(head: UnsafeRawBufferPointer(rebasing: p[..<128]),
                                       tail: UnsafeRawBufferPointer(rebasing: p[(p.count - 40)...]), count: p.count)
        }
        #expect(ends == nil)
    }

    /// The fold decrypts only the two ends of an operation's body: the fields read from the
    /// first 128 bytes and the last 32 to 47 (what a 3-block tail leaves after its padding) are
    /// the ones read from the whole body, for every shape the encoder writes, dates with an
    /// offset, and ciphers of any size; a body of another shape gives nil from its ends too.
    @Test(arguments: [true, false], [true, false])
    func fieldsFromTheEnds_matchTheWholeBody(passwordChanged: Bool, withBase: Bool) throws {
        let h = try Harness()
        for (i, name) in ["", "n", String(repeating: "x", count: 700), "item \"quoted\" {braces}"].enumerated() {
            let cipher = try Harness.login(name, password: "pw\(i)").encrypt(userKey: h.userKey)
            let dates = i % 2 == 0 ? ("2026-01-01T00:00:00.1234567Z", "2026-02-03T04:05:06.7000000Z")
                                   : ("2026-01-01T02:00:00.1234567+02:00", "2026-02-03T04:05:06.7-01:30")
            let body = OperationBody(cipher: cipher, passwordChanged: passwordChanged,
                                     baseRevisionDate: withBase ? try BitwardenDate(dates.0) : nil, at: try BitwardenDate(dates.1))
            let plaintext = try VaultEvent.encode(.operation(body))
            var other = plaintext
            other.insert(contentsOf: Array("\"x\":1,".utf8), at: 1)
            let whole = try #require(VaultEvent.operationFields(plaintext))
            #expect(VaultEvent.operationFields(other) == nil)
            for tail in 32...47 {
                let ends = plaintext.withUnsafeBytes { p in
                    VaultEvent.operationFields(head: UnsafeRawBufferPointer(rebasing: p[..<min(128, p.count)]),
                                               tail: UnsafeRawBufferPointer(rebasing: p[(p.count - tail)...]), count: p.count)
                }
                let fields = try #require(ends, "cipher \(i), tail \(tail)")
                #expect(fields.at == whole.at && fields.at.text == whole.at.text && fields.baseRevisionDate == whole.baseRevisionDate)
                #expect(fields.passwordChanged == passwordChanged && fields.cipher == whole.cipher)
                let otherEnds = other.withUnsafeBytes { p in
                    VaultEvent.operationFields(head: UnsafeRawBufferPointer(rebasing: p[..<min(128, p.count)]),
                                               tail: UnsafeRawBufferPointer(rebasing: p[(p.count - tail)...]), count: p.count)
                }
                #expect(otherEnds == nil)
            }
            // A head too short for the fields: nil, so the body is read whole.
            let short = plaintext.withUnsafeBytes { p in
                VaultEvent.operationFields(head: UnsafeRawBufferPointer(rebasing: p[..<20]),
                                           tail: UnsafeRawBufferPointer(rebasing: p[(p.count - 40)...]), count: p.count)
            }
            #expect(short == nil)
        }
    }

    /// The fold's reading of an operation body's small fields agrees with the decoder on every
    /// one-byte change of the body before its cipher (both dates, canonical or with an offset,
    /// the keys, the quotes around them): whatever it reads, the decoder reads too, with the
    /// same dates (and their text), base revision and password flag.
    @Test func operationFields_readWhatTheDecoderReads_afterAnyOneByteChange() throws {
        let h = try Harness()
        let cipher = try Harness.login("n", password: "pw").encrypt(userKey: h.userKey)
        var read = 0, left = 0
        for (at, base) in [("2026-02-03T04:05:06.7000000Z", "2026-01-01T00:00:00.1234567Z"),
                           ("2026-02-03T04:05:06.7-01:30", "2026-01-01T02:00:00.1234567+02:00")] {
            let body = OperationBody(cipher: cipher, passwordChanged: true, baseRevisionDate: try BitwardenDate(base), at: try BitwardenDate(at))
            let plaintext = try VaultEvent.encode(.operation(body))
            // Up to the cipher's opening brace: a change inside the cipher is for the end of the
            // fold to find (it decodes the latest snapshots, and folds again eagerly if one fails).
            let cipherStart = try #require(VaultEvent.operationFields(plaintext)).cipher.lowerBound
            for position in 0...cipherStart {
                for byte: UInt8 in [0x22, 0x2B, 0x2C, 0x30, 0x31, 0x33, 0x39, 0x3A, 0x5A, 0x5C, 0x61, 0x7D] where plaintext[position] != byte {
                    var mutated = plaintext
                    mutated[position] = byte
                    guard let fields = VaultEvent.operationFields(mutated) else {
                        left += 1
                        continue
                    }
                    read += 1
                    let context = String(decoding: mutated.prefix(cipherStart + 20), as: UTF8.self)
                    let decoded = try? JSONTapeDecoder().decode(OperationBody.self, from: mutated)
                    #expect(decoded != nil, "\(context)")
                    guard let decoded else { continue }
                    #expect(fields.at == decoded.at && fields.at.text == decoded.at.text, "\(context)")
                    #expect(fields.baseRevisionDate == decoded.baseRevisionDate && fields.baseRevisionDate?.text == decoded.baseRevisionDate?.text, "\(context)")
                    #expect(fields.passwordChanged == decoded.passwordChanged, "\(context)")
                }
            }
        }
        #expect(read > 100 && left > 100, "read \(read), left \(left)")
    }

    /// An outcome with nothing but its time is read without the JSON decoder: the canonical
    /// body gives the decoder's outcome, and every one-byte change of it gives the decoder's
    /// outcome too (or is left to the decoder), so a fold reads such a body as before. A body
    /// with another field is left to the decoder.
    @Test func bareOutcome_readsWhatTheDecoderReads() throws {
        let header = EventHeader(sequence: 9, userId: "u", cipherId: "c", eventType: VaultEventType.resolved.rawValue, recordedAtMillis: 0)
        let dates = ["2026-02-03T04:05:06.7000000Z", "1970-01-01T00:00:00.0000000Z", "2024-02-29T23:59:59.9999999Z"]
        var read = 0, left = 0
        for text in dates {
            let canonical = try VaultEvent.encode(.outcome(OutcomeBody(at: try BitwardenDate(text))))
            let fast = try #require(VaultEvent.bareOutcome(canonical), "\(String(decoding: canonical, as: UTF8.self))")
            #expect(fast == (try JSONTapeDecoder().decode(OutcomeBody.self, from: canonical)) && fast.at.text == text)
            #expect(try VaultEvent(header: header, plaintext: canonical).outcome == fast)
            for position in canonical.indices {
                for byte: UInt8 in [0x00, 0x22, 0x2B, 0x2D, 0x30, 0x32, 0x35, 0x39, 0x3A, 0x5A, 0x5C, 0x7B, 0x7D, 0xC3] where canonical[position] != byte {
                    var mutated = canonical
                    mutated[position] = byte
                    let decoded = try? JSONTapeDecoder().decode(OutcomeBody.self, from: mutated)
                    guard let bare = VaultEvent.bareOutcome(mutated) else {
                        left += 1
                        continue
                    }
                    read += 1
                    let context = "\(String(decoding: mutated, as: UTF8.self))"
                    #expect(bare == decoded && bare.at.text == decoded?.at.text, "\(context)")
                    #expect((try? VaultEvent(header: header, plaintext: mutated))?.outcome == decoded, "\(context)")
                }
            }
        }
        // Both sides of the fast path were taken (digits changed in range are read, the rest left).
        #expect(read > 100 && left > 100, "read \(read), left \(left)")
        let withReason = try VaultEvent.encode(.outcome(OutcomeBody(at: try BitwardenDate(dates[0]), reason: "x")))
        #expect(VaultEvent.bareOutcome(withReason) == nil)
        let otherVersion = Array(#"{"at":"2026-02-03T04:05:06.7000000Z","v":2}"#.utf8)
        #expect(VaultEvent.bareOutcome(otherVersion) == nil)
        #expect(throws: OfflineSyncError.self) { try VaultEvent(header: header, plaintext: otherVersion) }
    }

    /// A save encodes the cipher once and writes it into the operation body: the bytes are
    /// exactly what encoding the whole body gives (for every optional field present or absent,
    /// a base cipher or none, and text that needs escaping), so stored bodies and the fold's
    /// fast path are unchanged.
    @Test(arguments: [true, false], [true, false])
    func splicedOperationBody_isTheWholeEncoding(passwordChanged: Bool, withBase: Bool) throws {
        let h = try Harness()
        var view = Harness.login("name \"quoted\" / {braces} ,\"passwordChanged\": é", password: "pw\\")
        view.notes = "line\nbreak"
        let cipher = try view.encrypt(userKey: h.userKey)
        let body = OperationBody(cipher: cipher, passwordChanged: passwordChanged,
                                 baseRevisionDate: withBase ? try BitwardenDate("2026-01-01T00:00:00.1234567Z") : nil,
                                 at: try BitwardenDate("2026-02-03T04:05:06.7000000Z"),
                                 base: withBase ? try Harness.login("base /", password: "old").encrypt(userKey: h.userKey) : nil)
        let foundation = JSONEncoder()
        foundation.outputFormatting = [.sortedKeys]
        let whole = Array(try foundation.encode(body))
        let spliced = try VaultEvent.encodeOperation(body, cipherJSON: VaultEvent.encodeCipher(cipher))
        #expect(spliced == whole, "\(String(decoding: spliced, as: UTF8.self))\n\(String(decoding: whole, as: UTF8.self))")
        #expect(try VaultEvent.encode(.operation(body)) == whole)
    }

    /// The body schema version is checked: a body from a newer schema is refused with the
    /// version named, never read as if it were version 1 (operations and outcomes alike).
    @Test(arguments: [VaultEventType.updated, VaultEventType.pushed])
    func bodyOfANewerSchema_isRefusedNamingTheVersion(type: VaultEventType) throws {
        let h = try Harness()
        let at = try BitwardenDate("2026-02-03T04:05:06.7000000Z")
        let body: VaultEvent.Body = type.isOperation
            ? .operation(OperationBody(cipher: try Harness.login("x", password: "pw").encrypt(userKey: h.userKey),
                                       passwordChanged: true, baseRevisionDate: nil, at: at))
            : .outcome(OutcomeBody(at: at, serverId: "s"))
        let header = EventHeader(sequence: 9, userId: "u", cipherId: "c", eventType: type.rawValue, recordedAtMillis: 0)
        let current = try VaultEvent.encode(body)
        #expect(try VaultEvent(header: header, plaintext: current).body == body)
        let newer = Array(String(decoding: current, as: UTF8.self).replacingOccurrences(of: "\"v\":1}", with: "\"v\":2}").utf8)
        #expect(newer != current)
        #expect { try VaultEvent(header: header, plaintext: newer) } throws: { error in
            "\(error)".contains("body schema version 2") && "\(error)".contains("9")
        }
        #expect(VaultEvent.operationSummary(header: header, plaintext: newer, placeholder: Cipher(type: .login)) == nil,
                "the fold's fast path leaves a newer body to the full decode, which refuses it")
    }
}

/// The unsealed pending checkpoint's bytes are a stored format: its type codes are fixed.
@Suite struct PendingCheckpointFormatTests {
    @Test func typeCodesAreFixed_andUnknownCodesAreNotGuessed() throws {
        var projection = HeaderProjection()
        projection.lastSequence = 0x0102
        projection.pending = ["a": .create, "b": .update, "c": .softDelete, "d": .hardDelete]
        projection.uncertainCreates = ["a"]
        let bytes = PendingCheckpoint.encode(projection)
        #expect(bytes == [1, 0, 0, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 4,
                          1, 0x61, 0x80, 1, 0x62, 1, 1, 0x63, 2, 1, 0x64, 3])
        #expect(PendingCheckpoint.decode(bytes) == projection)
        var unknown = bytes
        unknown[unknown.count - 1] = 4
        #expect(PendingCheckpoint.decode(unknown) == nil)
    }
}
