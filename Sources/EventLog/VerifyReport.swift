import LMDB
import VaultCrypto

/// One problem found by ``EventLogStore/verify(keys:progress:)``.
public struct VerifyProblem: Sendable, Hashable, CustomStringConvertible {
    /// What kind of problem.
    public enum Kind: String, Sendable, Codable {
        /// A key in the events table that is not an 8-byte sequence.
        case malformedKey
        /// An envelope whose bytes do not parse (header or framing).
        case malformedEnvelope
        /// An envelope stored under another sequence than its header names.
        case sequenceMismatch
        /// Sequences that do not increase.
        case outOfOrder
        /// An envelope format this build does not read.
        case unsupportedVersion
        /// An envelope whose MAC does not match its header and body (tampered, or another key).
        case authenticationFailed
        /// An authenticated envelope whose body does not decrypt.
        case undecryptable
        /// An event without its index entries (by user, by item).
        case missingIndexEntry
        /// An index entry that points at no event.
        case danglingIndexEntry
        /// An index entry whose key does not parse.
        case malformedIndexEntry
        /// A projection checkpoint whose bytes do not parse.
        case malformedCheckpoint
        /// A projection checkpoint whose MAC does not match.
        case checkpointAuthenticationFailed
        /// The store's metadata is missing or inconsistent (not reported by this build; kept so
        /// reports written by other builds still decode).
        case metadata
        /// A record derived from the log (e.g. the domain's pending checkpoint) disagrees with it.
        case derivedRecordMismatch
        /// A format 2 event does not name the MAC of its user's previous event in the log: an
        /// event between them was removed, or events were reordered.
        case chainBroken
        /// A user's sealed head record names a later last event (or another chain value) than
        /// the log holds: the tail of that user's events was removed.
        case truncated
        /// A head record that does not parse, or is missing for a chained log.
        case malformedHead
        /// A head record that fails authentication.
        case headAuthenticationFailed
        /// A compaction snapshot or one of its per-item records that does not parse.
        case malformedSnapshot
        /// A compaction snapshot or per-item record that fails authentication (tampered, or wrong key).
        case snapshotAuthenticationFailed
        /// A snapshot that disagrees with the log: an event at or before the user's horizon, a
        /// per-item record from another compaction, or a missing or extra per-item record.
        case snapshotMismatch
    }

    /// The event sequence concerned, when there is one.
    public let sequence: UInt64?
    /// What kind of problem it is (stable names, for tools).
    public let kind: Kind
    /// A sentence for a person.
    public let message: String

    /// A problem found by a check outside the log itself (the domain's own records).
    public init(sequence: UInt64?, kind: Kind, message: String) {
        self.sequence = sequence
        self.kind = kind
        self.message = message
    }

    /// ``message``, prefixed with `"event <sequence>: "` when the problem concerns one event.
    public var description: String {
        if let sequence { return "event \(sequence): \(message)" }
        return message
    }
}

/// The result of a verification walk.
public struct VerifyReport: Sendable {
    /// Events walked.
    public var eventsChecked = 0
    /// Events whose MAC was checked (a key was given for their user) and matched.
    public var eventsAuthenticated = 0
    /// Index entries checked.
    public var indexEntriesChecked = 0
    /// Checkpoints checked.
    public var checkpointsChecked = 0
    /// Head records checked (one per user with format 2 events).
    public var headsChecked = 0
    /// Compaction snapshot and per-item records checked.
    public var snapshotRecordsChecked = 0
    /// Users seen whose events could only be checked structurally (no key given).
    public var usersWithoutKey: Set<String> = []
    /// Everything wrong, in store order.
    public var problems: [VerifyProblem] = []

    /// True when nothing is wrong.
    public var isClean: Bool { problems.isEmpty }
    /// The sequences named by problems.
    public var problemSequences: Set<UInt64> { Set(problems.compactMap(\.sequence)) }
}
