import EventLog
import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultModel

extension VaultLogStore {
    /// `EventLogStore.verify(keys:batchSize:progress:)` plus the checks of this store's own
    /// records: every pending checkpoint must equal the fold of its user's headers up to its
    /// sequence, and, for a user who is unlocked, the authenticated projection at that
    /// sequence. A mismatch means the unsealed checkpoint was altered (it is only a hint for a
    /// locked vault's pending count; nothing acts on it), and is reported with its user.
    public func verify(keys: [String: SealingKey] = [:], progress: ((Int, Int) -> Void)? = nil) throws -> VerifyReport {
        var report = try log.verify(keys: keys, progress: progress)
        report.problems += try verifyPendingCheckpoints()
        report.problems += try verifySnapshotStates()
        report.problems += try verifyLogMarks(keys: keys)
        return report
    }

    /// Each compaction snapshot's pending set (kept in the clear for a locked vault) must parse
    /// and, for a user who is unlocked, equal the pending set of the snapshot's authenticated
    /// projection.
    func verifySnapshotStates() throws -> [VerifyProblem] {
        var problems: [VerifyProblem] = []
        let users = try log.read { try $0.compactedUserIds() }
        for user in users {
            guard let info = try log.read({ try $0.snapshotInfo(userId: user) }) else { continue }
            guard let state = PendingCheckpoint.decode(info.state) else {
                problems.append(VerifyProblem(sequence: info.horizon, kind: .derivedRecordMismatch,
                    message: "the pending set in the compaction snapshot of user \(user) does not parse (a locked vault counts nothing pending before the next event)"))
                continue
            }
            // A snapshot that does not authenticate is reported by the log's own walk.
            guard isUnlocked(userId: user), let projection = try? snapshotProjection(userId: user, key: keys(user).sealing) else { continue }
            let sealed = Self.pendingState(of: projection)
            if sealed.pending != state.pending {
                problems.append(VerifyProblem(sequence: info.horizon, kind: .derivedRecordMismatch,
                    message: "the pending set in the compaction snapshot of user \(user) lists \(Self.describe(state)), its sealed projection gives \(Self.describe(sealed))"))
            }
        }
        return problems
    }

    /// The pending-checkpoint part of ``verify(keys:progress:)``.
    public func verifyPendingCheckpoints() throws -> [VerifyProblem] {
        guard let db = pendingCheckpoints else { return [] }
        var stored: [(userId: String?, bytes: [UInt8])] = []
        try log.read { reader in
            try reader.scan(db) { key, value in
                let length = key.first.map(Int.init) ?? -1
                let user = length >= 0 && key.count == 1 + length ? String(validating: key[1...], as: UTF8.self) : nil
                stored.append((user, Array(value)))
                return true
            }
        }
        var problems: [VerifyProblem] = []
        func problem(_ sequence: UInt64?, _ text: String) {
            problems.append(VerifyProblem(sequence: sequence, kind: .derivedRecordMismatch, message: text))
        }
        for (user, bytes) in stored {
            guard let user else {
                problem(nil, "pending checkpoint under a key that names no user")
                continue
            }
            guard let checkpoint = PendingCheckpoint.decode(bytes) else {
                problem(nil, "pending checkpoint of user \(user) does not parse (ignored: the count is folded from the headers)")
                continue
            }
            let sequence = checkpoint.lastSequence
            let (fromHeaders, isEvent) = try log.read { reader -> (HeaderProjection, Bool) in
                var fold = try snapshotHeaderState(reader, userId: user) ?? HeaderProjection()
                try reader.forEachHeader(userId: user, after: fold.lastSequence) { header in
                    guard header.sequence <= sequence else { return false }
                    fold.apply(header)
                    return true
                }
                return (fold, try Self.isEventOf(user, sequence, reader))
            }
            guard isEvent else {
                problem(sequence, "pending checkpoint of user \(user) claims to be as of sequence \(sequence), which is not an event of that user (altered; ignored)")
                continue
            }
            if fromHeaders.pending != checkpoint.pending || fromHeaders.uncertainCreates != checkpoint.uncertainCreates {
                problem(sequence, "pending checkpoint of user \(user) lists \(Self.describe(checkpoint)), the log's headers up to \(sequence) give \(Self.describe(fromHeaders)) (altered; the app ignores it when unlocked)")
                continue
            }
            if isUnlocked(userId: user) {
                let sealed = Self.pendingState(of: try projection(userId: user, at: sequence))
                if sealed.pending != checkpoint.pending {
                    problem(sequence, "pending checkpoint of user \(user) lists \(Self.describe(checkpoint)), the authenticated log up to \(sequence) gives \(Self.describe(sealed))")
                }
            }
        }
        return problems
    }

    static func describe(_ state: HeaderProjection) -> String {
        guard !state.pending.isEmpty else { return "nothing pending" }
        let items = state.pending.sorted { $0.key < $1.key }.prefix(5).map { "\($0.key) \($0.value.rawValue)" }
        return "\(state.pending.count) pending (\(items.joined(separator: ", "))\(state.pending.count > 5 ? ", …" : ""))"
    }
}
