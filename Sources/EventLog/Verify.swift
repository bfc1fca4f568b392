import LMDB
import VaultCrypto

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
        // Per user, the last event seen: the link the user's next format 2 event must name.
        var tips: [String: ChainTip] = [:]
        // The last event reported damaged: a chain break right after damage is not reported again.
        var lastDamaged: UInt64 = 0
        // A compacted user's chain starts at the snapshot's chain value, at its horizon.
        var horizons: [String: UInt64] = [:]
        report.problems += try verifySnapshots(keys: keys, tips: &tips, horizons: &horizons, report: &report)
        // Events up to this mark have their item index entry (the mark only moves forward).
        let itemIndexedThrough = try read { try $0.itemIndexedThrough() }

        // Events, in batches of `batchSize` per read transaction.
        var done = false
        while !done {
            var seen = 0
            try read { reader in
                let generations = try reader.itemGenerations()
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
                        // An envelope that cannot be read is a gap in every user's chain.
                        lastDamaged = sequence
                        report.problems.append(VerifyProblem(sequence: sequence, kind: .unsupportedVersion,
                            message: "envelope format v\(version) is newer than this build reads; unless a newer VaultLog wrote to this store, the record is damaged"))
                        return seen < batchSize
                    } catch {
                        lastDamaged = sequence
                        report.problems.append(VerifyProblem(sequence: sequence, kind: .malformedEnvelope,
                            message: "envelope does not parse: \(Self.reason(error))"))
                        return seen < batchSize
                    }
                    let header = envelope.header
                    let problemsBefore = report.problems.count
                    defer {
                        // The chain link, for an event found sound: a damaged one was reported
                        // above and is no link (the next event's break is explained by it).
                        if report.problems.count == problemsBefore {
                            let tip = tips[header.userId]
                            if lastDamaged <= (tip?.sequence ?? 0), let problem = Self.checkLink(envelope, after: tip) {
                                report.problems.append(VerifyProblem(sequence: sequence, kind: .chainBroken, message: problem))
                            }
                            tips[header.userId] = ChainTip(sequence: sequence, mac: Array(envelope.mac), formatVersion: header.formatVersion)
                        } else {
                            lastDamaged = sequence
                        }
                    }
                    if let horizon = horizons[header.userId], sequence <= horizon {
                        report.problems.append(VerifyProblem(sequence: sequence, kind: .snapshotMismatch,
                            message: "an event of user \(header.userId) at or before the user's compaction horizon \(horizon): the snapshot replaced those events, so this one was put back or copied in"))
                    }
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
                    if try !reader.hasUserEntry(userId: header.userId, at: sequence) {
                        report.problems.append(VerifyProblem(sequence: sequence, kind: .missingIndexEntry,
                            message: "no user index entry for user \(header.userId)"))
                    }
                    if !header.cipherId.isEmpty, sequence <= itemIndexedThrough,
                       try !reader.hasItemEntry(userId: header.userId, cipherId: header.cipherId, at: sequence, generations: generations),
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
            func check(user: String, cipher: String?, sequence: UInt64) throws {
                let eventKey = sequenceKey(sequence)
                guard let raw = try eventKey.withUnsafeBytes({ try reader.transaction.getRaw(events, key: $0) }) else {
                    report.problems.append(VerifyProblem(sequence: sequence, kind: .danglingIndexEntry,
                        message: "index entry for user \(user) points at a missing event"))
                    return
                }
                // An unparsable event was reported in the walk above.
                guard let header = try? Envelope.parseHeader(raw: raw).header else { return }
                if header.userId != user || (cipher != nil && cipher != header.cipherId) {
                    report.problems.append(VerifyProblem(sequence: sequence, kind: .danglingIndexEntry,
                        message: "index says user \(user)\(cipher.map { " cipher \($0)" } ?? ""), header says user \(header.userId) cipher \(header.cipherId)"))
                }
            }
            try reader.forEachUserIndexEntry { user, key, value in
                report.indexEntriesChecked += 1
                guard let user, value.count == 8 else {
                    report.problems.append(VerifyProblem(sequence: nil, kind: .malformedIndexEntry,
                        message: "user index entry (key of \(key.count) bytes, value of \(value.count)) does not parse"))
                    return true
                }
                try check(user: user, cipher: nil, sequence: readBE(value, at: 0, as: UInt64.self))
                return true
            }
            try reader.forEachItemIndexEntry { parts, key, value in
                report.indexEntriesChecked += 1
                guard let parts, value.count == 8, parts.generation <= readBE(value, at: 0, as: UInt64.self) else {
                    report.problems.append(VerifyProblem(sequence: nil, kind: .malformedIndexEntry,
                        message: "item index entry (key of \(key.count) bytes, value of \(value.count)) does not parse"))
                    return true
                }
                try check(user: parts.user, cipher: parts.cipher, sequence: readBE(value, at: 0, as: UInt64.self))
                return true
            }
            try reader.transaction.scan(index) { key, _ in
                report.indexEntriesChecked += 1
                guard let entry = IndexKey.parse(key) else {
                    report.problems.append(VerifyProblem(sequence: nil, kind: .malformedIndexEntry,
                        message: "index key of \(key.count) bytes does not parse"))
                    return true
                }
                try check(user: entry.user, cipher: entry.cipher, sequence: entry.sequence)
                return true
            }
        }

        report.problems += try verifyHeads(tips: tips, lastDamaged: lastDamaged, keys: keys, report: &report)

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

    /// The compaction snapshots: framing always, MACs with the user's key, every per-item record
    /// carrying its snapshot's horizon, and the count of per-item records. Seeds each compacted
    /// user's chain tip with the snapshot's chain value, so the first retained event must name it.
    func verifySnapshots(keys: [String: SealingKey], tips: inout [String: ChainTip], horizons: inout [String: UInt64],
                         report: inout VerifyReport) throws -> [VerifyProblem] {
        guard let snapshots else { return [] }
        var problems: [VerifyProblem] = []
        var items: [String: [(cipherId: String, horizon: UInt64)]] = [:]
        var declared: [String: Int] = [:]
        try read { reader in
            try reader.transaction.scan(snapshots) { key, value in
                report.snapshotRecordsChecked += 1
                let bytes = Array(value)
                if key.first == SnapshotRecord.snapshotTag {
                    guard let (info, headerLength) = SnapshotRecord.parse(bytes), Array(key) == SnapshotRecord.key(userId: info.userId) else {
                        problems.append(VerifyProblem(sequence: nil, kind: .malformedSnapshot, message: "a compaction snapshot (\(bytes.count) bytes) does not parse"))
                        return true
                    }
                    if let key = keys[info.userId], !Envelope.macMatches(bytes, headerLength: headerLength, key: key.snapshots) {
                        problems.append(VerifyProblem(sequence: info.horizon, kind: .snapshotAuthenticationFailed,
                            message: "the compaction snapshot of user \(info.userId) failed authentication (tampered, or wrong key)"))
                        return true
                    }
                    horizons[info.userId] = info.horizon
                    declared[info.userId] = info.itemCount
                    tips[info.userId] = ChainTip(sequence: info.horizon, mac: info.chain, formatVersion: Envelope.chainedFormatVersion)
                } else {
                    guard let item = SnapshotRecord.parseItem(bytes), Array(key) == SnapshotRecord.itemKey(userId: item.userId, cipherId: item.cipherId) else {
                        problems.append(VerifyProblem(sequence: nil, kind: .malformedSnapshot, message: "a per-item snapshot record (\(bytes.count) bytes) does not parse"))
                        return true
                    }
                    if let key = keys[item.userId], !Envelope.macMatches(bytes, headerLength: item.headerLength, key: key.snapshots) {
                        problems.append(VerifyProblem(sequence: item.horizon, kind: .snapshotAuthenticationFailed,
                            message: "the kept versions of item \(item.cipherId) (user \(item.userId)) failed authentication (tampered, or wrong key)"))
                        return true
                    }
                    items[item.userId, default: []].append((item.cipherId, item.horizon))
                }
                return true
            }
        }
        for user in Set(items.keys).union(declared.keys).sorted() {
            let horizon = horizons[user]
            let records = items[user] ?? []
            for record in records where record.horizon != horizon {
                problems.append(VerifyProblem(sequence: record.horizon, kind: .snapshotMismatch,
                    message: "the kept versions of item \(record.cipherId) (user \(user)) are from a compaction at \(record.horizon), not the user's snapshot\(horizon.map { " at \($0)" } ?? ""): an old record was put back"))
            }
            if let count = declared[user], count != records.count {
                problems.append(VerifyProblem(sequence: horizon, kind: .snapshotMismatch,
                    message: "the compaction snapshot of user \(user) lists \(count) items with kept versions, the store holds \(records.count): records were removed or added"))
            }
        }
        return problems
    }

    /// The last event of a user seen by the walk.
    struct ChainTip {
        let sequence: UInt64
        let mac: [UInt8]
        let formatVersion: UInt8
    }

    /// Why `envelope` does not link to `tip` (its user's previous event in the log), or nil.
    /// Format 1 events carry no link; the first format 2 event after them names the last one's MAC.
    static func checkLink(_ envelope: Envelope, after tip: ChainTip?) -> String? {
        guard let named = envelope.header.previousMAC else { return nil }
        let user = envelope.header.userId
        guard let tip else {
            guard named != Envelope.chainStart else { return nil }
            return "user \(user)'s first event in the log names a previous event: the events of this user before it were removed"
        }
        guard !named.elementsEqual(tip.mac) else { return nil }
        return "does not follow user \(user)'s event \(tip.sequence), the one before it in the log (the chain of that user's MACs is broken): an event between them was removed, or events were moved"
    }

    /// Each user's sealed head record against the last event the walk saw: parse always, MAC
    /// with the user's key, and last sequence and chain value against the log.
    func verifyHeads(tips: [String: ChainTip], lastDamaged: UInt64, keys: [String: SealingKey], report: inout VerifyReport) throws -> [VerifyProblem] {
        var problems: [VerifyProblem] = []
        var headed: Set<String> = []
        guard let heads else { return [] }
        try read { reader in
            try reader.transaction.scan(heads) { key, value in
                report.headsChecked += 1
                let bytes = Array(value)
                guard let head = HeadRecord(bytes: bytes), Array(key) == IndexKey.checkpointPrefix(head.userId) else {
                    problems.append(VerifyProblem(sequence: nil, kind: .malformedHead, message: "a head record (\(bytes.count) bytes) does not parse"))
                    return true
                }
                let user = head.userId
                headed.insert(user)
                if let key = keys[user], !head.authenticate(bytes, key: key) {
                    problems.append(VerifyProblem(sequence: head.lastSequence, kind: .headAuthenticationFailed,
                        message: "the head record of user \(user) failed authentication (tampered, or wrong key)"))
                    return true
                }
                // A damaged record after the user's last sound event was reported in the walk,
                // and explains a mismatch here only when it is the event the head names: with
                // no record at all at that sequence the tail was removed, damage or not (a
                // damaged record used to hide a removed tail behind its own report).
                if lastDamaged > (tips[user]?.sequence ?? 0),
                   try reader.transaction.get(events, key: sequenceKey(head.lastSequence)) != nil { return true }
                guard let tip = tips[user] else {
                    problems.append(VerifyProblem(sequence: head.lastSequence, kind: .truncated,
                        message: "the head record of user \(user) says its last event is \(head.lastSequence), but the log holds no event of that user: they were removed"))
                    return true
                }
                if tip.sequence < head.lastSequence {
                    problems.append(VerifyProblem(sequence: head.lastSequence, kind: .truncated,
                        message: "the head record of user \(user) says its last event is \(head.lastSequence), but the log's last event of that user is \(tip.sequence): the events after it were removed"))
                } else if tip.sequence != head.lastSequence || tip.mac != head.chain {
                    problems.append(VerifyProblem(sequence: tip.sequence, kind: .truncated,
                        message: "the head record of user \(user) (last event \(head.lastSequence)) does not match the log's last event of that user (\(tip.sequence)): the head or the events were altered"))
                }
                return true
            }
        }
        for (user, tip) in tips.sorted(by: { $0.key < $1.key }) where tip.formatVersion >= Envelope.chainedFormatVersion && !headed.contains(user) {
            problems.append(VerifyProblem(sequence: tip.sequence, kind: .malformedHead,
                message: "user \(user) has chained (format 2) events but no head record: it was removed, so a removed tail would go unnoticed"))
        }
        return problems
    }

    static func reason(_ error: any Error) -> String {
        if case EnvelopeError.malformed(_, let reason) = error { return reason }
        return "\(error)"
    }
}

extension IndexKey {
    /// Parses an index key back into user, optional cipher and sequence.
    static func parse(_ key: UnsafeRawBufferPointer) -> (user: String, cipher: String?, sequence: UInt64)? {
        // A merge's entry: its generation first (at or before its sequence), then as `0x02`.
        var start = 0
        if key.first == itemTag {
            guard key.count >= 9 + 2 + 8 else { return nil }
            start = 8
        } else {
            guard key.count >= 2 + 8, key[0] == userTag || key[0] == cipherTag else { return nil }
        }
        let userLength = Int(key[start + 1])
        guard start + 2 + userLength + 8 <= key.count else { return nil }
        let user = String(decoding: key[start + 2..<start + 2 + userLength], as: UTF8.self)
        var offset = start + 2 + userLength
        var cipher: String?
        if key[0] != userTag {
            guard offset < key.count else { return nil }
            let cipherLength = Int(key[offset])
            offset += 1
            guard offset + cipherLength + 8 == key.count else { return nil }
            cipher = String(decoding: key[offset..<offset + cipherLength], as: UTF8.self)
            offset += cipherLength
        }
        guard offset + 8 == key.count else { return nil }
        let sequence = readBE(key, at: offset, as: UInt64.self)
        if start > 0, readBE(key, at: 1, as: UInt64.self) > sequence { return nil }
        return (user, cipher, sequence)
    }
}
