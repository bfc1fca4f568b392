import Testing
import Foundation
import EventLog
import VaultCrypto
import VaultModel
@_spi(Tools) @testable import OfflineSync
import VaultLogTesting

@Suite struct ProjectionTests {
    // MARK: the type-merge table (Docs/Projection.md)

    static let mergeTable: [(PendingChangeType?, VaultEventType, PendingChangeType.Merge)] = [
        (nil, .created, .pending(.create)), (nil, .updated, .pending(.update)),
        (nil, .softDeleted, .pending(.softDelete)), (nil, .hardDeleted, .pending(.hardDelete)),
        (.create, .created, .pending(.create)), (.create, .updated, .pending(.create)),
        (.create, .softDeleted, .discard), (.create, .hardDeleted, .discard),
        (.update, .created, .pending(.update)), (.update, .updated, .pending(.update)),
        (.update, .softDeleted, .pending(.softDelete)), (.update, .hardDeleted, .pending(.hardDelete)),
        (.softDelete, .created, .pending(.softDelete)), (.softDelete, .updated, .pending(.softDelete)),
        (.softDelete, .softDeleted, .pending(.softDelete)), (.softDelete, .hardDeleted, .pending(.hardDelete)),
        (.hardDelete, .created, .pending(.hardDelete)), (.hardDelete, .updated, .pending(.hardDelete)),
        (.hardDelete, .softDeleted, .pending(.hardDelete)), (.hardDelete, .hardDeleted, .pending(.hardDelete)),
        // A restore: the server must end with the item active, so even one undoing a pending
        // trash move is an update to push; a create stays a create; nothing follows a delete.
        (nil, .restored, .pending(.update)), (.create, .restored, .pending(.create)), (.update, .restored, .pending(.update)),
        (.softDelete, .restored, .pending(.update)), (.hardDelete, .restored, .pending(.hardDelete)),
    ]

    @Test(arguments: 0..<25)
    func typeMerge_everyPair(row: Int) {
        let (existing, operation, expected) = Self.mergeTable[row]
        #expect(PendingChangeType.merge(existing, operation) == expected, "\(String(describing: existing)) + \(operation)")
    }

    @Test func typeMergeTable_coversEveryPair() {
        let pairs = Set(Self.mergeTable.map { "\(String(describing: $0.0))+\($0.1)" })
        #expect(pairs.count == 5 * 5)
    }

    // MARK: fold rules

    static let cipher = Cipher(type: .login)
    static func at(_ s: Int64) -> BitwardenDate { BitwardenDate(ticksSince1970: 17_000_000_000_000_000 + s * 10_000_000) }

    static func op(_ seq: UInt64, _ type: VaultEventType, _ id: String, password: Bool = false, base: Int64? = 5, user: String = "u") -> VaultEvent {
        var c = cipher
        c.id = id
        c.revisionDate = at(Int64(seq))
        return VaultEvent(header: EventHeader(sequence: seq, userId: user, cipherId: id, eventType: type.rawValue, recordedAtMillis: Int64(seq)),
                          type: type, body: .operation(OperationBody(cipher: c, passwordChanged: password,
                                                                     baseRevisionDate: base.map(at), at: at(Int64(seq) * 10))))
    }

    static func outcome(_ seq: UInt64, _ type: VaultEventType, _ id: String, user: String = "u", attempt: Int? = nil, dead: Bool? = nil) -> VaultEvent {
        VaultEvent(header: EventHeader(sequence: seq, userId: user, cipherId: id, eventType: type.rawValue, recordedAtMillis: Int64(seq)),
                   type: type, body: .outcome(OutcomeBody(at: at(Int64(seq)), serverId: type == .idMapped ? "srv-\(id)" : nil,
                                                          reason: type == .resolutionFailed ? "HTTP 503" : nil,
                                                          attempt: attempt, nextRetryAt: attempt.map { at(Int64($0) * 100) }, deadLetter: dead)))
    }

    @Test func fold_keepsFirstBaseRevision_countsPasswordChanges_andEveryVersion() {
        let p = Projection.fold(userId: "u", [
            Self.op(1, .updated, "c", password: true, base: 5),
            Self.op(2, .updated, "c", password: false, base: 9),
            Self.op(3, .updated, "c", password: true, base: 9),
        ])
        let change = p.pending["c"]!
        #expect(change.originalRevisionDate == Self.at(5))
        #expect(change.offlinePasswordChangeCount == 2)
        #expect(change.passwordChangeSequences == [1, 3])
        #expect(change.versionSequences == [1, 2, 3])
        #expect(change.createdAt == Self.at(10) && change.updatedAt == Self.at(30))
        #expect(change.latest.revisionDate == Self.at(3))
    }

    @Test func fold_createHasNoOriginalRevision_createThenDeleteLeavesNothing() {
        var p = Projection.fold(userId: "u", [Self.op(1, .created, "t", base: nil), Self.op(2, .updated, "t", base: nil)])
        #expect(p.pending["t"]?.changeType == .create && p.pending["t"]?.originalRevisionDate == nil)
        p.apply(Self.op(3, .softDeleted, "t", base: nil))
        #expect(p.pending.isEmpty)
    }

    @Test func fold_failuresCountAttempts_deadLetter_andRetryRequest() {
        var p = Projection.fold(userId: "u", [
            Self.op(1, .updated, "c"),
            Self.outcome(2, .resolutionFailed, "c", attempt: 1),
            Self.outcome(3, .resolutionFailed, "c", attempt: 2, dead: true),
        ])
        #expect(p.pending["c"]?.attempts == 2)
        #expect(p.pending["c"]?.isDeadLetter == true)
        #expect(p.pending["c"]?.lastError == "HTTP 503")
        #expect(p.pending["c"]?.nextRetryAt == Self.at(200))
        p.apply(Self.outcome(4, .retryRequested, "c"))
        #expect(p.pending["c"]?.isDeadLetter == false && p.pending["c"]?.attempts == 0)
        p.apply(Self.outcome(5, .resolved, "c"))
        #expect(p.pending.isEmpty)
    }

    @Test func fold_recordsStepsAndIdMap() {
        let p = Projection.fold(userId: "u", [
            Self.op(1, .created, "t", base: nil), Self.outcome(2, .pushed, "t"), Self.outcome(3, .idMapped, "t"),
        ])
        #expect(p.idMap == ["t": "srv-t"])
        #expect(p.pending["t"]?.steps.map(\.type) == [.pushed, .idMapped])
    }

    // MARK: property: fold(all) == fold(checkpoint) + fold(tail)

    /// A random event sequence over several users and items, outcomes mixed in.
    static func randomEvents(seed: UInt64) -> [VaultEvent] {
        var rng = SplitMix64(seed: seed)
        let users = ["u1", "u2", "u3"]
        let count = 5 + Int(rng.next() % 60)
        var events: [VaultEvent] = []
        for seq in 1...UInt64(count) {
            let user = users[Int(rng.next() % 3)]
            let id = "c\(rng.next() % 6)"
            let roll = rng.next() % 23
            switch roll {
            // Plans and mappings of creates: a delete must then keep the item pending (uncertain create).
            case 20: events.append(outcome(seq, .createPlanned, id, user: user))
            case 0..<3: events.append(op(seq, .created, id, base: nil, user: user))
            case 3..<9: events.append(op(seq, .updated, id, password: rng.next() % 2 == 0, base: Int64(rng.next() % 50), user: user))
            case 9..<11: events.append(op(seq, .softDeleted, id, user: user))
            case 11: events.append(op(seq, .hardDeleted, id, user: user))
            case 12, 13: events.append(outcome(seq, .resolutionFailed, id, user: user, attempt: Int(rng.next() % 5) + 1, dead: rng.next() % 4 == 0))
            case 14: events.append(outcome(seq, .resolved, id, user: user))
            case 15: events.append(outcome(seq, .backupCreated, id, user: user))
            case 16: events.append(outcome(seq, .idMapped, id, user: user))
            case 17: events.append(outcome(seq, .retryRequested, id, user: user))
            case 18: events.append(outcome(seq, .syncAborted, "", user: user))
            case 21: events.append(outcome(seq, .idMapped, id, user: user))
            case 22: events.append(op(seq, .restored, id, user: user))
            default: events.append(outcome(seq, .clearedAfterOnlineSuccess, id, user: user))
            }
        }
        return events
    }

    // MARK: uncertain creates, new edits, headers and full fold agree

    @Test func uncertainCreate_deleteKeepsItPending_certainCreateIsDiscarded() {
        let certain = Projection.fold(userId: "u", [Self.op(1, .created, "t", base: nil), Self.op(2, .hardDeleted, "t")])
        #expect(certain.pending["t"] == nil)
        let uncertain = Projection.fold(userId: "u", [Self.op(1, .created, "t", base: nil), Self.outcome(2, .createPlanned, "t"),
                                                      Self.op(3, .softDeleted, "t")])
        #expect(uncertain.pending["t"]?.changeType == .softDelete)
        #expect(uncertain.pending["t"]?.uncertainCreate == true)
        #expect(uncertain.pending["t"]?.startedAsCreate == true)
    }

    @Test func restore_holdsUntilTheNextTrashMove() {
        let restored = Projection.fold(userId: "u", [Self.op(1, .softDeleted, "c"), Self.op(2, .restored, "c"), Self.op(3, .updated, "c")])
        #expect(restored.pending["c"]?.changeType == .update)
        #expect(restored.pending["c"]?.restoresFromTrash == true)
        #expect(restored.pending["c"]?.originalRevisionDate == Self.at(5))
        let trashedAgain = Projection.fold(userId: "u", [Self.op(1, .restored, "c"), Self.op(2, .softDeleted, "c")])
        #expect(trashedAgain.pending["c"]?.changeType == .softDelete)
        #expect(trashedAgain.pending["c"]?.restoresFromTrash == nil)
    }

    @Test func uncertainCreate_trashedThenRestored_isACreateAgain() {
        let events = [Self.op(1, .created, "t", base: nil), Self.outcome(2, .createPlanned, "t"),
                      Self.op(3, .softDeleted, "t"), Self.op(4, .restored, "t")]
        let p = Projection.fold(userId: "u", events)
        #expect(p.pending["t"]?.changeType == .create)
        var headers = HeaderProjection()
        for event in events { headers.apply(event.header) }
        #expect(headers.pending["t"] == .create)
    }

    @Test func newEdit_resetsAttemptsBackoffAndDeadLetter() {
        let p = Projection.fold(userId: "u", [Self.op(1, .updated, "c"), Self.outcome(2, .resolutionFailed, "c", attempt: 6, dead: true),
                                              Self.op(3, .updated, "c", password: true)])
        let change = p.pending["c"]
        #expect(change?.attempts == 0 && change?.isDeadLetter == false && change?.nextRetryAt == nil && change?.lastError == nil)
    }

    /// A format-2 checkpoint payload as the previous build wrote it: the projection's JSON with
    /// the pending changes but not their snapshots, then each item's snapshot.
    static func format2Payload(_ projection: Projection, snapshotsOf ids: [String]? = nil) throws -> [UInt8] {
        func bigEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.userInfo[PendingChange.omitsSnapshot] = true
        let json = Array(try encoder.encode(projection))
        var out = Array("VLC2".utf8) + bigEndian(UInt32(json.count)) + json
        for id in ids ?? projection.pending.keys.sorted() {
            let snapshot = try VaultEvent.encodeCipher(projection.pending[id]?.latest ?? Projection.undecodedSnapshot)
            out += bigEndian(UInt16(id.utf8.count)) + Array(id.utf8) + bigEndian(UInt32(snapshot.count)) + snapshot
        }
        return out
    }

    /// Checkpoints of the two earlier formats are still read: the first (the projection's JSON)
    /// whole, the second with its snapshots deferred; the current one round-trips.
    @Test func checkpointPayload_readsEveryFormat() throws {
        let events = Self.randomEvents(seed: 7).filter { $0.header.userId == "u1" }
        let projection = Projection.fold(userId: "u1", events)
        try #require(projection.pendingCount > 1)
        let (format1, none) = try CheckpointPayload.decode(Array(JSONEncoder().encode(projection)))
        #expect(format1 == projection && none.isEmpty)
        for payload in [try Self.format2Payload(projection), try CheckpointPayload.encode(projection)] {
            var (decoded, deferred) = try CheckpointPayload.decode(payload)
            #expect(deferred.count == projection.pendingCount)
            #expect(VaultLogStore.materialize(deferred, into: &decoded))
            #expect(decoded == projection)
        }
        #expect(try CheckpointPayload.encode(projection).starts(with: Array("VLC3".utf8)))
    }

    /// A payload cut short, with a snapshot too many or too few, a pending item twice or a
    /// change that does not decode is refused (the store then ignores the checkpoint and folds
    /// from the start).
    @Test func checkpointPayload_refusesMalformedPayloads() throws {
        let events = Self.randomEvents(seed: 7).filter { $0.header.userId == "u1" }
        let projection = Projection.fold(userId: "u1", events)
        let ids = projection.pending.keys.sorted()
        try #require(ids.count > 1)
        let payload = try CheckpointPayload.encode(projection)
        for cut in [payload.count - 1, payload.count / 2, 7] {
            #expect(throws: (any Error).self) { try CheckpointPayload.decode(Array(payload[..<cut])) }
        }
        // Format 2: one snapshot more than pending items, and one fewer.
        var fewer = projection
        fewer.pending.removeValue(forKey: ids[0])
        #expect(throws: (any Error).self) { try CheckpointPayload.decode(Self.format2Payload(fewer, snapshotsOf: ids)) }
        #expect(throws: (any Error).self) { try CheckpointPayload.decode(Self.format2Payload(projection, snapshotsOf: Array(ids.dropFirst()))) }
        // Format 3: the last item's part repeated, then its change's JSON broken.
        let lastStart = try #require(Self.lastEntryStart(payload, id: ids.last!))
        #expect(throws: (any Error).self) { try CheckpointPayload.decode(payload + payload[lastStart...]) }
        var broken = payload
        broken[lastStart + 2 + ids.last!.utf8.count + 4] = UInt8(ascii: "[")
        #expect(throws: (any Error).self) { try CheckpointPayload.decode(broken) }
    }

    /// Where the part of item `id` starts in a format-3 payload (its id's length prefix).
    static func lastEntryStart(_ payload: [UInt8], id: String) -> Int? {
        let needle = [UInt8(id.utf8.count >> 8), UInt8(id.utf8.count & 0xFF)] + Array(id.utf8)
        return (0...(payload.count - needle.count)).last { payload[$0..<$0 + needle.count].elementsEqual(needle) }
    }

    @Test func foldAll_equalsCheckpointPlusTail_over1000RandomSequences() throws {
        for seed in UInt64(0)..<1000 {
            let events = Self.randomEvents(seed: seed)
            var rng = SplitMix64(seed: seed ^ 0xABCDEF)
            let cut = Int(rng.next() % UInt64(events.count + 1))
            for user in ["u1", "u2", "u3"] {
                let mine = events.filter { $0.header.userId == user }
                let whole = Projection.fold(userId: user, mine)
                // The checkpoint goes through its stored form as it does on disk: the projection
                // without its snapshots, which are decoded after the tail unless it replaced them.
                let checkpoint = Projection.fold(userId: user, mine.filter { $0.sequence <= UInt64(cut) })
                var (resumed, deferred) = try CheckpointPayload.decode(CheckpointPayload.encode(checkpoint))
                #expect(deferred.count == checkpoint.pending.count)
                resumed.apply(mine.filter { $0.sequence > UInt64(cut) })
                #expect(VaultLogStore.materialize(deferred, into: &resumed))
                if resumed != whole {
                    Issue.record("seed \(seed), cut \(cut), user \(user): checkpoint + tail differs from the full fold")
                    return
                }
                // The header-only fold agrees on what is pending.
                var headers = HeaderProjection()
                for event in mine { headers.apply(event.header) }
                #expect(headers.pending == whole.pending.mapValues(\.changeType), "seed \(seed) user \(user)")
            }
        }
    }
}
