import Foundation
import LMDB
import Testing
@testable import EventLog
import VaultCrypto
import VaultModel
@_spi(Tools) @testable import OfflineSync
import VaultLogTesting
import VaultLogTestSupport

/// A user's whole log removed from the file (every event, index entry, checkpoint, the head
/// record and, for a compacted user, the snapshot and its item records) looked like a user who
/// never edited anything: "0 pending", and the next save started a fresh log. The account
/// record's sealed mark says the log was started, so every read and append reports the removal.
@Suite struct LogMarkTests {
    typealias Device = UnauthenticatedStateTests.Device
    static let userId = UnauthenticatedStateTests.userId

    func account(_ device: Device) -> StoredAccount {
        StoredAccount(userId: Self.userId, email: "a@example.com", kdf: .pbkdf2(iterations: 600_000),
                      protectedUserKey: EncString.encrypt(Array("wrapped".utf8), key: device.userKey, iv: [UInt8](repeating: 7, count: 16)))
    }

    /// A device whose account record is saved before its first event, as a login does.
    func preparedDevice() async throws -> Device {
        let device = Device()
        do {
            let store = try device.open()
            defer { store.close() }
            try store.saveAccount(account(device))
        }
        _ = try await device.prepare()
        return device
    }

    func storedMark(_ device: Device) throws -> LogMark? {
        let store = try device.open()
        defer { store.close() }
        return try store.storedAccounts().first { $0.userId == Self.userId }?.logMark
    }

    /// Removes everything of the user's log as someone editing the file would (what a logout
    /// removes, but the account record stays).
    func removeWholeLog(_ device: Device) throws {
        let store = try device.open()
        defer { store.close() }
        try store.log.write { txn in
            _ = try txn.deleteUser(Self.userId)
            if let pending = store.pendingCheckpoints { try txn.delete(pending, key: VaultLogStore.userPrefix(Self.userId)) }
            #expect(try txn.reader.hasNoLog(userId: Self.userId), "no event, head or snapshot of the user is left")
        }
    }

    @Test(arguments: [false, true])
    func aWholeLogRemoved_stopsEveryRead_andTheNextSave(compacted: Bool) async throws {
        let device = try await preparedDevice()
        let first = try #require(try ChainOnReadTests().sequences(device).first)
        let mark = try #require(try storedMark(device), "the first event wrote the mark")
        #expect(mark.firstSequence == first)
        #expect(mark.authenticates(userId: Self.userId, key: SealingKey(userKey: device.userKey)))
        if compacted {
            let store = try device.open()
            let result = try store.compactBlocking(userId: Self.userId, policy: RetentionPolicy(keepDays: 0, keepVersions: 1))
            store.close()
            try #require(result.plan.horizon != nil)
        }
        try removeWholeLog(device)

        try await ChainOnReadTests().expectEveryReadRefuses(device, at: first)
        let store = try device.open()
        defer { store.close() }
        let before = try store.log.lastSequence()
        let save = Result { try store.append(userId: Self.userId, cipherId: "server-0", type: .created,
                                             body: .outcome(OutcomeBody(at: BitwardenDate(device.clock.now)))) }
        #expect(ChainOnReadTests().chainBroken(save.failure, at: first), "the save after the removal: \(save)")
        #expect(try store.log.lastSequence() == before, "nothing was appended")
        let report = try store.verify(keys: [Self.userId: SealingKey(userKey: device.userKey)])
        #expect(report.problems.contains { $0.kind == .truncated && $0.message.contains("whole log was removed") }, "\(report.problems)")
    }

    /// A later login saves the account record again, without a mark: the stored one is kept.
    @Test func aLaterLoginKeepsTheMark() async throws {
        let device = try await preparedDevice()
        let mark = try #require(try storedMark(device))
        do {
            let store = try device.open()
            defer { store.close() }
            try store.saveAccount(account(device))
        }
        #expect(try storedMark(device) == mark)
        try removeWholeLog(device)
        let store = try device.open()
        defer { store.close() }
        #expect(ChainOnReadTests().chainBroken(Result { try store.pendingCount(userId: Self.userId) }.failure, at: mark.firstSequence))
    }

    /// A log written before the mark existed (an account saved without one, events already
    /// there) gets it with its next append, dated at its first event.
    @Test func aLogOlderThanTheMark_getsItAtTheNextAppend() async throws {
        let device = Device()
        _ = try await device.prepare()
        let first = try #require(try ChainOnReadTests().sequences(device).first)
        let store = try device.open()
        defer { store.close() }
        try store.log.write { txn in try txn.put(store.accounts, key: Array(Self.userId.utf8), value: try VaultLogStore.encode(account(device))) }
        #expect(try store.storedAccounts().first?.logMark == nil)
        _ = try await store.append(userId: Self.userId, cipherId: "server-0", type: .resolved, body: .outcome(OutcomeBody(at: BitwardenDate(device.clock.now))))
        #expect(try store.storedAccounts().first?.logMark?.firstSequence == first)
    }

    /// After a logout (the account goes with the log) a new login starts a fresh log.
    @Test func aLogoutAndANewLogin_startAFreshLog() async throws {
        let device = try await preparedDevice()
        let store = try device.open()
        defer { store.close() }
        try store.logout(userId: Self.userId)
        try store.saveAccount(account(device))
        store.unlock(userId: Self.userId, userKey: device.userKey)
        let sequence = try await store.append(userId: Self.userId, cipherId: "server-0", type: .resolved,
                                        body: .outcome(OutcomeBody(at: BitwardenDate(device.clock.now))))
        #expect(try store.storedAccounts().first?.logMark?.firstSequence == sequence)
        #expect(try store.pendingCount(userId: Self.userId) == 0)
    }

    /// A removed tail takes the store's last sequences along; the head record still names them,
    /// so another user's next event does not get one of them again.
    @Test func aSequenceIsNeverGivenOutTwice_afterATailWasRemoved() async throws {
        let device = Device()
        let last = try await device.prepare()
        let events = try ChainOnReadTests().sequences(device)
        #expect(events.last == last)
        try ChainOnReadTests().remove(Array(events.suffix(2)), from: device)
        let store = try device.open()
        defer { store.close() }
        let other = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 77))
        store.unlock(userId: "user-b", userKey: other)
        let next = try await store.append(userId: "user-b", cipherId: "b-1", type: .resolved,
                                    body: .outcome(OutcomeBody(at: BitwardenDate(device.clock.now))))
        #expect(next == last + 1, "the other user's event took \(next); the removed events were \(events.suffix(2))")
    }
}

/// A per-user rollback (the user's newer events removed and the user's older head record put
/// back) is consistent: reads and `verify` see a whole log. The position the app kept outside
/// the store sees it.
@Suite struct LogPositionTests {
    typealias Device = UnauthenticatedStateTests.Device
    static let userId = UnauthenticatedStateTests.userId

    @Test func aPerUserRollback_passesEveryRead_andFailsThePositionCheck() async throws {
        let device = Device()
        _ = try await device.prepare()
        let store = try device.open()
        defer { store.close() }
        let olderHead = try #require(try store.log.read { try $0.transaction.get(store.log.heads!, key: IndexKey.checkpointPrefix(Self.userId)) })
        let older = try #require(try store.logPosition(userId: Self.userId))
        try store.checkLogPosition(userId: Self.userId, remembered: older)
        let added = try await store.append(userId: Self.userId, events: [
            .init(cipherId: "server-1", type: .resolved, body: .outcome(OutcomeBody(at: BitwardenDate(device.clock.now)))),
            .init(cipherId: "server-2", type: .resolved, body: .outcome(OutcomeBody(at: BitwardenDate(device.clock.now)))),
        ])
        let newer = try #require(try store.logPosition(userId: Self.userId))
        #expect(newer.lastSequence == added.last)
        try store.checkLogPosition(userId: Self.userId, remembered: older)  // the log went on from it
        try store.checkLogPosition(userId: Self.userId, remembered: newer)

        try store.log.environment.write { txn in
            for sequence in added {
                _ = try txn.delete(store.log.events, key: sequenceKey(sequence))
                _ = try txn.delete(store.log.users, key: UserIndex.key(Self.userId), value: sequenceKey(sequence))
            }
            try txn.put(store.log.heads!, key: IndexKey.checkpointPrefix(Self.userId), value: olderHead)
        }
        store.lock(userId: Self.userId)
        store.unlock(userId: Self.userId, userKey: device.userKey)
        #expect(try store.pendingCount(userId: Self.userId) == UnauthenticatedStateTests.items, "the rolled-back log reads as whole")
        #expect(try store.verify(keys: [Self.userId: SealingKey(userKey: device.userKey)]).isClean, "and verifies")
        do {
            try store.checkLogPosition(userId: Self.userId, remembered: newer)
            Issue.record("the rollback was not seen")
        } catch OfflineSyncError.rolledBack(let user, let reason) {
            #expect(user == Self.userId)
            #expect(reason.contains("ends at event \(older.lastSequence)"), "\(reason)")
        }
        // The same sequence with another event there (a different log that got as far).
        let forged = LogPosition(lastSequence: older.lastSequence, chain: newer.chain)
        #expect(throws: OfflineSyncError.self) { try store.checkLogPosition(userId: Self.userId, remembered: forged) }
    }
}
