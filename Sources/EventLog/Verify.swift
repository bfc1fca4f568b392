import LMDB
import VaultCrypto

/// One problem found by ``EventLogStore/verify(keys:progress:)``.
public struct VerifyProblem: Sendable, Hashable, CustomStringConvertible {
    /// What kind of problem.
    public enum Kind: String, Sendable, Codable {
        case malformedKey, malformedEnvelope, sequenceMismatch, outOfOrder, unsupportedVersion
        case authenticationFailed, undecryptable, missingIndexEntry, danglingIndexEntry, malformedIndexEntry
        case malformedCheckpoint, checkpointAuthenticationFailed, metadata
        /// A record derived from the log (e.g. the domain's pending checkpoint) disagrees with it.
        case derivedRecordMismatch
    }

    /// The event sequence concerned, when there is one.
    public let sequence: UInt64?
    public let kind: Kind
    /// A sentence for a person.
    public let message: String

    /// A problem found by a check outside the log itself (the domain's own records).
    public init(sequence: UInt64?, kind: Kind, message: String) {
        self.sequence = sequence
        self.kind = kind
        self.message = message
    }

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
    /// Users seen whose events could only be checked structurally (no key given).
    public var usersWithoutKey: Set<String> = []
    /// Everything wrong, in store order.
    public var problems: [VerifyProblem] = []

    /// True when nothing is wrong.
    public var isClean: Bool { problems.isEmpty }
    /// The sequences named by problems.
    public var problemSequences: Set<UInt64> { Set(problems.compactMap(\.sequence)) }
}

extension EventLogStore {
    /// Walks every event, index entry and checkpoint and reports each problem with its
    /// sequence: key/sequence agreement and order, header parsing, envelope structure, the MAC
    /// (for users whose key is in `keys`), and index consistency in both directions. Garbage
    /// bytes produce problems, never a crash. Reads in batches (bounded memory); `progress` is
    /// called with (events checked, total events).
    public func verify(keys: [String: SealingKey] = [:], batchSize: Int = 8192,
                       progress: ((Int, Int) -> Void)? = nil) throws -> VerifyReport {
        var report = VerifyReport()
        let total = try eventCount()
        var previous: UInt64 = 0
        var nextKey: [UInt8] = sequenceKey(0)

        // Events, in batches of `batchSize` per read transaction.
        var done = false
        while !done {
            var seen = 0
            try read { reader in
                try reader.transaction.scan(events, from: nextKey) { key, value in
                    seen += 1
                    report.eventsChecked += 1
                    let keyBytes = Array(key)
                    defer { nextKey = keyBytes + [0] }
                    guard key.count == 8 else {
                        report.problems.append(VerifyProblem(sequence: nil, kind: .malformedKey,
                            message: "event key of \(key.count) bytes (expected an 8-byte sequence)"))
                        return seen < batchSize
                    }
                    let sequence = readBE(key, at: 0, as: UInt64.self)
                    if sequence <= previous {
                        report.problems.append(VerifyProblem(sequence: sequence, kind: .outOfOrder,
                            message: "sequence not after the previous one (\(previous))"))
                    }
                    previous = sequence
                    let envelope: Envelope
                    do {
                        envelope = try Envelope(bytes: Array(value))
                    } catch EnvelopeError.unsupportedVersion(_, let version) {
                        report.problems.append(VerifyProblem(sequence: sequence, kind: .unsupportedVersion,
                            message: "envelope format v\(version) is newer than this build reads"))
                        return seen < batchSize
                    } catch {
                        report.problems.append(VerifyProblem(sequence: sequence, kind: .malformedEnvelope,
                            message: "envelope does not parse: \(Self.reason(error))"))
                        return seen < batchSize
                    }
                    let header = envelope.header
                    if header.sequence != sequence {
                        report.problems.append(VerifyProblem(sequence: sequence, kind: .sequenceMismatch,
                            message: "stored under key \(sequence) but its header (covered by the MAC) says event \(header.sequence): an envelope copied or moved within the file"))
                    }
                    if let key = keys[header.userId] {
                        if envelope.authenticate(key: key) {
                            report.eventsAuthenticated += 1
                        } else {
                            report.problems.append(VerifyProblem(sequence: sequence, kind: .authenticationFailed,
                                message: "failed authentication (tampered header or body, or wrong key for user \(header.userId))"))
                        }
                    } else {
                        report.usersWithoutKey.insert(header.userId)
                    }
                    // Index entries this event must have.
                    if try reader.transaction.get(index, key: IndexKey.user(header.userId, sequence)) == nil {
                        report.problems.append(VerifyProblem(sequence: sequence, kind: .missingIndexEntry,
                            message: "no user index entry for user \(header.userId)"))
                    }
                    if !header.cipherId.isEmpty,
                       try reader.transaction.get(index, key: IndexKey.cipher(header.userId, header.cipherId, sequence)) == nil {
                        report.problems.append(VerifyProblem(sequence: sequence, kind: .missingIndexEntry,
                            message: "no cipher index entry for cipher \(header.cipherId)"))
                    }
                    return seen < batchSize
                }
            }
            progress?(report.eventsChecked, total)
            done = seen < batchSize
        }

        // Index entries must point at an existing event of the same user and cipher.
        try read { reader in
            try reader.transaction.scan(index) { key, _ in
                report.indexEntriesChecked += 1
                guard let entry = IndexKey.parse(key) else {
                    report.problems.append(VerifyProblem(sequence: nil, kind: .malformedIndexEntry,
                        message: "index key of \(key.count) bytes does not parse"))
                    return true
                }
                let eventKey = sequenceKey(entry.sequence)
                guard let raw = try eventKey.withUnsafeBytes({ try reader.transaction.getRaw(events, key: $0) }) else {
                    report.problems.append(VerifyProblem(sequence: entry.sequence, kind: .danglingIndexEntry,
                        message: "index entry for user \(entry.user) points at a missing event"))
                    return true
                }
                // An unparsable event was reported in the walk above.
                guard let header = try? Envelope.parseHeader(raw: raw).header else { return true }
                if header.userId != entry.user || (entry.cipher != nil && entry.cipher != header.cipherId) {
                    report.problems.append(VerifyProblem(sequence: entry.sequence, kind: .danglingIndexEntry,
                        message: "index says user \(entry.user)\(entry.cipher.map { " cipher \($0)" } ?? ""), header says user \(header.userId) cipher \(header.cipherId)"))
                }
                return true
            }
        }

        // Checkpoints: framing always, MAC when the user's key is known.
        try read { reader in
            try reader.transaction.scan(checkpoints) { key, value in
                report.checkpointsChecked += 1
                guard key.count >= 9, Int(key[0]) + 9 == key.count else {
                    report.problems.append(VerifyProblem(sequence: nil, kind: .malformedCheckpoint,
                        message: "checkpoint key of \(key.count) bytes does not parse"))
                    return true
                }
                let user = String(decoding: key[1..<key.count - 8], as: UTF8.self)
                let sequence = readBE(key, at: key.count - 8, as: UInt64.self)
                let header = Checkpoint.header(userId: user, sequence: sequence)
                let bytes = Array(value)
                guard bytes.count >= header.count + 64, (bytes.count - header.count - 48) % 16 == 0,
                      bytes[0..<header.count].elementsEqual(header) else {
                    report.problems.append(VerifyProblem(sequence: sequence, kind: .malformedCheckpoint,
                        message: "checkpoint of user \(user) is malformed"))
                    return true
                }
                if let key = keys[user], !Envelope.macMatches(bytes, headerLength: header.count, key: key.checkpoints) {
                    report.problems.append(VerifyProblem(sequence: sequence, kind: .checkpointAuthenticationFailed,
                        message: "checkpoint of user \(user) failed authentication"))
                }
                return true
            }
        }
        return report
    }

    static func reason(_ error: any Error) -> String {
        if case EnvelopeError.malformed(_, let reason) = error { return reason }
        return "\(error)"
    }
}

extension IndexKey {
    /// Parses an index key back into user, optional cipher and sequence.
    static func parse(_ key: UnsafeRawBufferPointer) -> (user: String, cipher: String?, sequence: UInt64)? {
        guard key.count >= 2 + 8, key[0] == userTag || key[0] == cipherTag else { return nil }
        let userLength = Int(key[1])
        guard 2 + userLength + 8 <= key.count else { return nil }
        let user = String(decoding: key[2..<2 + userLength], as: UTF8.self)
        var offset = 2 + userLength
        var cipher: String?
        if key[0] == cipherTag {
            guard offset < key.count else { return nil }
            let cipherLength = Int(key[offset])
            offset += 1
            guard offset + cipherLength + 8 == key.count else { return nil }
            cipher = String(decoding: key[offset..<offset + cipherLength], as: UTF8.self)
            offset += cipherLength
        }
        guard offset + 8 == key.count else { return nil }
        return (user, cipher, readBE(key, at: offset, as: UInt64.self))
    }
}
