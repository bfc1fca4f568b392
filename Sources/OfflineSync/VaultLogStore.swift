import EventLog
import Foundation
import LMDB
import Logging
import Synchronization
import VaultCrypto
import VaultModel

/// Where the domain gets the current time and new ids.
public struct VaultDependencies: Sendable {
    /// The current time.
    public var now: @Sendable () -> Date
    /// A new unique id (temporary cipher ids, backup markers).
    public var makeId: @Sendable () -> String
    /// IVs and keys.
    public var random: any RandomSource

    public init(now: @escaping @Sendable () -> Date = { Date() },
                makeId: @escaping @Sendable () -> String = { UUID().uuidString.lowercased() },
                random: any RandomSource = SystemRandomSource()) {
        self.now = now
        self.makeId = makeId
        self.random = random
    }

    /// Deterministic dependencies for tests and replays: a hand-moved clock, and ids, IVs and
    /// keys from a seeded generator (ids and randomness drawn from separate streams).
    public static func deterministic(seed: UInt64, clock: ManualClock) -> VaultDependencies {
        let ids = SeededRandomSource(seed: seed ^ 0x1D5)
        return VaultDependencies(now: { clock.now }, makeId: { uuidString(ids.bytes(16)) },
                                 random: SeededRandomSource(seed: seed))
    }
}

/// Formats 16 bytes as a lowercase version-4 UUID string.
func uuidString(_ raw: [UInt8]) -> String {
    var bytes = raw
    bytes[6] = (bytes[6] & 0x0F) | 0x40
    bytes[8] = (bytes[8] & 0x3F) | 0x80
    let hex = bytes.map { String(format: "%02x", $0) }.joined()
    let h = Array(hex)
    return "\(String(h[0..<8]))-\(String(h[8..<12]))-\(String(h[12..<16]))-\(String(h[16..<20]))-\(String(h[20..<32]))"
}

/// A clock tests and simulations move by hand.
public final class ManualClock: Sendable {
    private let state: Mutex<Date>

    public init(_ start: Date = Date(timeIntervalSince1970: 1_767_225_600)) { state = Mutex(start) }

    /// The current time.
    public var now: Date { state.withLock { $0 } }

    /// Moves the clock forward.
    public func advance(by seconds: TimeInterval) { state.withLock { $0 += seconds } }

    /// Sets the clock.
    public func set(_ date: Date) { state.withLock { $0 = date } }
}

/// Options for ``VaultLogStore``.
public struct VaultLogStoreOptions: Sendable {
    /// Storage options (map size, durability, read-only).
    public var eventLog = EventLogOptions()
    /// Time, ids, randomness.
    public var dependencies = VaultDependencies()
    /// Save a sealed projection checkpoint after folding this many new events.
    public var checkpointInterval = 1000
    /// Save a pending-set checkpoint (headers only) after folding this many headers, so the
    /// pending count of a long log is read without scanning it (0 = never).
    public var pendingCheckpointInterval = 10_000
    public var logger = Logger(label: "vaultlog.offlinesync")

    public init() {}
}

/// A change to the local vault cache, committed in the same transaction as its event.
public enum LocalChange: Sendable {
    case upsert(Cipher)
    case delete(cipherId: String)
}

/// What the store keeps about an account so the vault can be unlocked offline with the master
/// password (the encrypted user key, never the password or any plaintext key).
public struct StoredAccount: Codable, Sendable, Equatable {
    public var userId: String
    public var email: String
    public var kdf: KdfConfig
    /// The user key wrapped by the stretched master key (`Key` of the token response).
    public var protectedUserKey: EncString
    /// The master-password salt the server named at prelogin, when it named one; nil (absent in
    /// records written before it existed) means the email.
    public var salt: String?

    public init(userId: String, email: String, kdf: KdfConfig, protectedUserKey: EncString, salt: String? = nil) {
        self.userId = userId
        self.email = email
        self.kdf = kdf
        self.protectedUserKey = protectedUserKey
        self.salt = salt
    }
}

/// The keys of an unlocked user.
struct UnlockedKeys: Sendable {
    let userKey: SymmetricCryptoKey
    let sealing: SealingKey
}

/// The opened store of one device: the event log, the local vault cache (`ciphers`), and the
/// unlocked sessions. The entry point the repository, resolver and sync build on.
///
/// ```swift
/// let store = try VaultLogStore(path: dir)
/// try store.unlock(userId: uid, email: email, masterPassword: pw, kdf: .default, protectedUserKey: key)
/// let repository = VaultRepository(store: store, userId: uid, server: client)
/// ```
public final class VaultLogStore: Sendable {
    /// The underlying log.
    public let log: EventLogStore
    /// Injected time, ids and randomness.
    public let dependencies: VaultDependencies
    let ciphers: Database
    let accounts: Database
    /// Per user, the pending set from headers as of a sequence (see ``PendingCheckpoint``);
    /// nil for a read-only store written before it existed.
    let pendingCheckpoints: Database?
    let checkpointInterval: Int
    let pendingCheckpointInterval: Int
    let logger: Logger
    private let sessions = Mutex<[String: UnlockedKeys]>([:])
    /// Each unlocked user's projection and the sequence of its newest checkpoint.
    private let projections = Mutex<[String: (projection: Projection, checkpointedAt: UInt64)]>([:])
    private let observers = Mutex<[UUID: (userId: String, continuation: AsyncStream<Int>.Continuation)]>([:])

    /// Opens (creating if needed) the store at `path`.
    public init(path: String, options: VaultLogStoreOptions = VaultLogStoreOptions()) throws {
        var logOptions = options.eventLog
        logOptions.random = options.dependencies.random
        log = try EventLogStore(path: path, options: logOptions)
        ciphers = try log.openDatabase("ciphers")
        accounts = try log.openDatabase("accounts")
        pendingCheckpoints = options.eventLog.environment.readOnly ? try? log.openDatabase("pending") : try log.openDatabase("pending")
        dependencies = options.dependencies
        checkpointInterval = options.checkpointInterval
        pendingCheckpointInterval = options.pendingCheckpointInterval
        logger = options.logger
    }

    /// Closes the store (also done when it is released).
    public func close() { log.environment.close() }

    // MARK: Sessions

    /// Unlocks `userId` with its user key.
    public func unlock(userId: String, userKey: SymmetricCryptoKey) {
        sessions.withLock { $0[userId] = UnlockedKeys(userKey: userKey, sealing: SealingKey(userKey: userKey)) }
    }

    /// Unlocks with the master password: derives the master key, unwraps the protected user key.
    /// A wrong password fails with `VaultCryptoError.authenticationFailed` and changes nothing;
    /// KDF settings out of Bitwarden's ranges fail with `VaultCryptoError.invalidKdfParameters`
    /// before any derivation.
    @discardableResult
    public func unlock(userId: String, email: String, masterPassword: String, kdf: KdfConfig,
                       protectedUserKey: EncString, salt: String? = nil) throws -> SymmetricCryptoKey {
        let master = try MasterKey.derive(password: masterPassword, salt: MasterKey.salt(email: email, preloginSalt: salt), kdf: kdf)
        let userKey = try master.decryptUserKey(protectedUserKey)
        unlock(userId: userId, userKey: userKey)
        return userKey
    }

    /// Locks `userId`: its keys and decrypted projection leave memory (best effort: Swift
    /// cannot guarantee no copy survives elsewhere in the heap).
    public func lock(userId: String) {
        _ = sessions.withLock { $0.removeValue(forKey: userId) }
        _ = projections.withLock { $0.removeValue(forKey: userId) }
    }

    // MARK: Accounts

    /// Remembers what unlocking `account.userId` with the master password needs (email, KDF,
    /// protected user key: all safe at rest, as Bitwarden clients store them). Replaces an
    /// earlier record of the same user.
    public func saveAccount(_ account: StoredAccount) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let bytes = Array(try encoder.encode(account))
        try log.write { txn in try txn.transaction.put(accounts, key: Array(account.userId.utf8), value: bytes) }
    }

    /// Every stored account, by user id order.
    public func storedAccounts() throws -> [StoredAccount] {
        try log.read { reader in
            var out: [StoredAccount] = []
            try reader.transaction.scan(accounts) { key, value in  // from the first key: LMDB rejects an empty seek key
                do {
                    out.append(try JSONDecoder().decode(StoredAccount.self, from: Data(value)))
                } catch {
                    throw OfflineSyncError.corruptAccount(userId: String(decoding: key, as: UTF8.self), reason: "\(error)")
                }
                return true
            }
            return out
        }
    }

    /// Unlocks the stored account of `email` with its master password and returns its user
    /// id. Throws ``OfflineSyncError/unknownAccount(_:)`` when no account of that email is
    /// stored, and `VaultCryptoError.authenticationFailed` for a wrong password.
    @discardableResult
    public func unlock(email: String, masterPassword: String) throws -> String {
        let normalized = email.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        guard let account = try storedAccounts().first(where: { $0.email.lowercased() == normalized }) else {
            throw OfflineSyncError.unknownAccount(email)
        }
        try unlock(userId: account.userId, email: account.email, masterPassword: masterPassword,
                   kdf: account.kdf, protectedUserKey: account.protectedUserKey, salt: account.salt)
        return account.userId
    }

    /// Whether `userId` is unlocked.
    public func isUnlocked(userId: String) -> Bool { sessions.withLock { $0[userId] != nil } }

    func keys(_ userId: String) throws -> UnlockedKeys {
        guard let keys = sessions.withLock({ $0[userId] }) else { throw OfflineSyncError.vaultLocked(userId: userId) }
        return keys
    }

    /// The user key of an unlocked user.
    public func userKey(userId: String) throws -> SymmetricCryptoKey { try keys(userId).userKey }

    /// The key that seals an unlocked user's events (for `EventLogStore.verify(keys:)`).
    public func sealingKey(userId: String) throws -> SealingKey { try keys(userId).sealing }

    // MARK: Local vault cache

    static func cipherKey(_ userId: String, _ cipherId: String) -> [UInt8] {
        let user = Array(userId.utf8)
        return [UInt8(truncatingIfNeeded: user.count)] + user + Array(cipherId.utf8)
    }

    static func userPrefix(_ userId: String) -> [UInt8] {
        let user = Array(userId.utf8)
        return [UInt8(truncatingIfNeeded: user.count)] + user
    }

    /// The local copy of an item, or nil.
    public func localCipher(userId: String, id: String) throws -> Cipher? {
        try log.read { reader in try Self.localCipher(reader.transaction, ciphers, userId, id) }
    }

    static func localCipher(_ txn: Transaction, _ db: Database, _ userId: String, _ id: String) throws -> Cipher? {
        guard let bytes = try txn.get(db, key: cipherKey(userId, id)) else { return nil }
        do {
            return try JSONDecoder().decode(Cipher.self, from: Data(bytes))
        } catch {
            throw OfflineSyncError.corruptLocalCipher(cipherId: id, reason: "\(error)")
        }
    }

    /// All local items of a user.
    public func localCiphers(userId: String) throws -> [Cipher] {
        try log.read { reader in
            let prefix = Self.userPrefix(userId)
            var out: [Cipher] = []
            try reader.transaction.scan(ciphers, from: prefix) { key, value in
                guard key.starts(with: prefix) else { return false }
                do {
                    out.append(try JSONDecoder().decode(Cipher.self, from: Data(value)))
                } catch {
                    throw OfflineSyncError.corruptLocalCipher(cipherId: String(decoding: key.dropFirst(prefix.count), as: UTF8.self), reason: "\(error)")
                }
                return true
            }
            return out
        }
    }

    func apply(_ change: LocalChange, userId: String, in txn: Transaction) throws {
        switch change {
        case .upsert(let cipher):
            guard let id = cipher.id else { throw OfflineSyncError.missingCipherId }
            try txn.put(ciphers, key: Self.cipherKey(userId, id), value: Array(try JSONEncoder().encode(cipher)))
        case .delete(let id):
            try txn.delete(ciphers, key: Self.cipherKey(userId, id))
        }
    }

    /// Applies local changes without an event (the online path, where the server already has them).
    public func applyLocal(_ changes: [LocalChange], userId: String) throws {
        try log.write { txn in for change in changes { try apply(change, userId: userId, in: txn.transaction) } }
    }

    /// ``applyLocal(_:userId:)`` from async code, committed on the log's writer thread.
    public func applyLocal(_ changes: [LocalChange], userId: String) async throws {
        try await log.writeAsync { txn in for change in changes { try self.apply(change, userId: userId, in: txn.transaction) } }
    }

    /// Replaces a user's local items with a full sync's, keeping the local copy of every item
    /// that is pending (a sync never hides a pending edit). With `ifLastSequence`, does so only
    /// if the log's last sequence still equals it — checked in the same write transaction, so
    /// an edit appended after the caller counted pending changes is never overwritten (SS-2).
    /// Returns false when that check failed and nothing was changed.
    @discardableResult
    public func replaceCiphers(userId: String, ciphers serverCiphers: [Cipher], ifLastSequence expected: UInt64? = nil,
                               appending event: (type: VaultEventType, body: OutcomeBody)? = nil) throws -> Bool {
        let replaced = try log.write(try replacement(userId: userId, ciphers: serverCiphers, ifLastSequence: expected, appending: event))
        if replaced && event != nil { notifyObservers(userId: userId) }
        return replaced
    }

    /// ``replaceCiphers(userId:ciphers:ifLastSequence:appending:)`` from async code: the
    /// transaction commits on the log's writer thread.
    @discardableResult
    public func replaceCiphers(userId: String, ciphers serverCiphers: [Cipher], ifLastSequence expected: UInt64? = nil,
                               appending event: (type: VaultEventType, body: OutcomeBody)? = nil) async throws -> Bool {
        let replaced = try await log.writeAsync(
            try replacement(userId: userId, ciphers: serverCiphers, ifLastSequence: expected, appending: event))
        if replaced && event != nil { notifyObservers(userId: userId) }
        return replaced
    }

    /// The write transaction of a sync's replace, for either form.
    private func replacement(userId: String, ciphers serverCiphers: [Cipher], ifLastSequence expected: UInt64?,
                             appending event: (type: VaultEventType, body: OutcomeBody)?) throws
        -> @Sendable (LogTransaction) throws -> Bool {
        let keys = event == nil ? nil : try keys(userId)
        // Unlocked: the authenticated projection, brought up to date inside the transaction.
        let session = sessions.withLock { $0[userId] }
        let projected = try session.map { _ in try projection(userId: userId) }
        return { [self] txn -> Bool in
            let reader = txn.reader
            if let expected, try reader.lastSequence() != expected { return false }
            let pendingIds: [String: PendingChangeType]
            if var current = projected, let session {
                try foldTail(into: &current, reader: reader, key: session.sealing)
                pendingIds = Self.pendingState(of: current).pending
            } else {
                pendingIds = try headerProjection(reader, userId: userId, fromCheckpoint: false).projection.pending
            }
            let prefix = Self.userPrefix(userId)
            var existing: [[UInt8]] = []
            try txn.transaction.scan(ciphers, from: prefix) { key, _ in
                guard key.starts(with: prefix) else { return false }
                existing.append(Array(key))
                return true
            }
            for key in existing {
                let id = String(decoding: key.dropFirst(prefix.count), as: UTF8.self)
                if pendingIds[id] == nil { try txn.transaction.delete(ciphers, key: key) }
            }
            for cipher in serverCiphers {
                guard let id = cipher.id, pendingIds[id] == nil else { continue }
                try apply(.upsert(cipher), userId: userId, in: txn.transaction)
            }
            if let event, let keys {
                try txn.append(NewEvent(userId: userId, cipherId: "", eventType: event.type.rawValue,
                                        recordedAtMillis: Self.millis(event.body.at.date),
                                        body: VaultEvent.encode(.outcome(event.body))), key: keys.sealing)
            }
            return true
        }
    }

    // MARK: Events

    /// Appends one event and applies `localChanges` in the same durable write transaction:
    /// both commit or neither does. `beforeCommit` runs inside the transaction after the
    /// writes (tests inject failures there).
    @discardableResult
    public func append(userId: String, cipherId: String, type: VaultEventType, body: VaultEvent.Body,
                       localChanges: [LocalChange] = [],
                       beforeCommit: ((LogTransaction) throws -> Void)? = nil) throws -> UInt64 {
        try append(userId: userId, events: [PlannedEvent(cipherId: cipherId, type: type, body: body)],
                   localChanges: localChanges, beforeCommit: beforeCommit).last!
    }

    /// An event to append with ``append(userId:events:localChanges:beforeCommit:)``.
    public struct PlannedEvent: Sendable {
        public var cipherId: String
        public var type: VaultEventType
        public var body: VaultEvent.Body

        public init(cipherId: String, type: VaultEventType, body: VaultEvent.Body) {
            self.cipherId = cipherId
            self.type = type
            self.body = body
        }
    }

    /// Appends several events and applies `localChanges`, all in one durable transaction.
    @discardableResult
    public func append(userId: String, events: [PlannedEvent], localChanges: [LocalChange] = [],
                       beforeCommit: ((LogTransaction) throws -> Void)? = nil) throws -> [UInt64] {
        let (keys, newEvents) = try prepare(userId: userId, events: events)
        let sequences = try log.write { txn -> [UInt64] in
            for change in localChanges { try apply(change, userId: userId, in: txn.transaction) }
            let sequences = try txn.append(newEvents, key: keys.sealing)
            try beforeCommit?(txn)
            return sequences
        }
        notifyObservers(userId: userId)
        return sequences
    }

    /// Appends one event and applies `localChanges` in one durable transaction, from async
    /// code: the commit and its flushes run on the log's writer thread, so no Swift
    /// concurrency thread blocks on them. (The same name without `await` is the blocking form,
    /// for synchronous callers; in async code the compiler picks this one.)
    @discardableResult
    public func append(userId: String, cipherId: String, type: VaultEventType, body: VaultEvent.Body,
                       localChanges: [LocalChange] = []) async throws -> UInt64 {
        try await append(userId: userId, events: [PlannedEvent(cipherId: cipherId, type: type, body: body)],
                         localChanges: localChanges).last!
    }

    /// Appends several events and applies `localChanges` in one durable transaction, from async
    /// code, on the log's writer thread (see the single-event form).
    @discardableResult
    public func append(userId: String, events: [PlannedEvent], localChanges: [LocalChange] = []) async throws -> [UInt64] {
        let (keys, newEvents) = try prepare(userId: userId, events: events)
        let sequences = try await log.writeAsync { txn -> [UInt64] in
            for change in localChanges { try self.apply(change, userId: userId, in: txn.transaction) }
            return try txn.append(newEvents, key: keys.sealing)
        }
        notifyObservers(userId: userId)
        return sequences
    }

    private func prepare(userId: String, events: [PlannedEvent]) throws -> (UnlockedKeys, [NewEvent]) {
        let keys = try keys(userId)
        let newEvents = try events.map { event -> NewEvent in
            let at: Date
            switch event.body {
            case .operation(let op): at = op.at.date
            case .outcome(let outcome): at = outcome.at.date
            }
            return NewEvent(userId: userId, cipherId: event.cipherId, eventType: event.type.rawValue,
                            recordedAtMillis: Self.millis(at), body: try VaultEvent.encode(event.body))
        }
        return (keys, newEvents)
    }

    /// Milliseconds since 1970 for an envelope header; a date outside Int64's range (only a
    /// crafted clock can make one) is clamped instead of trapping.
    static func millis(_ date: Date) -> Int64 {
        let millis = (date.timeIntervalSince1970 * 1000).rounded()
        guard millis.isFinite else { return millis > 0 ? .max : .min }
        return Int64(exactly: millis) ?? (millis > 0 ? .max : .min)
    }

    /// Decoded events of a user (optionally one item), in order. Needs the key.
    public func events(userId: String, cipherId: String? = nil, after: UInt64 = 0) throws -> [VaultEvent] {
        let keys = try keys(userId)
        return try log.envelopes(userId: userId, cipherId: cipherId, after: after).map { try VaultEvent(envelope: $0, key: keys.sealing) }
    }

    /// One decoded event by sequence (e.g. an intermediate version of an item).
    public func event(at sequence: UInt64, userId: String) throws -> VaultEvent? {
        let keys = try keys(userId)
        guard let envelope = try log.envelope(at: sequence), envelope.header.userId == userId else { return nil }
        return try VaultEvent(envelope: envelope, key: keys.sealing)
    }

    // MARK: Projection

    /// The user's projection: the newest checkpoint plus the fold of the events after it
    /// (cached in memory while unlocked). Saves a new checkpoint when the tail was long.
    public func projection(userId: String) throws -> Projection {
        let keys = try keys(userId)
        var (projection, checkpointedAt) = try projections.withLock { $0[userId] } ?? {
            let loaded = try loadCheckpoint(userId: userId, keys: keys)
            return (loaded, loaded.lastSequence)
        }()
        try fold(into: &projection, userId: userId, upTo: .max, key: keys.sealing)
        // Checkpoint once enough events were folded since the last one, so a reopen folds
        // at most `checkpointInterval` events.
        if projection.lastSequence - checkpointedAt >= UInt64(checkpointInterval) {
            try saveCheckpoint(projection, keys: keys)
            checkpointedAt = projection.lastSequence
        }
        projections.withLock { $0[userId] = (projection, checkpointedAt) }
        return projection
    }

    /// The projection as of `sequence` (time travel): the newest checkpoint at or before it,
    /// plus the events up to it.
    public func projection(userId: String, at sequence: UInt64) throws -> Projection {
        let keys = try keys(userId)
        var projection = try loadCheckpoint(userId: userId, keys: keys, atOrBefore: sequence)
        try fold(into: &projection, userId: userId, upTo: sequence, key: keys.sealing)
        return projection
    }

    /// Events read per batch of a fold: bounds memory however long the log is.
    static let foldBatch = 4096

    /// Folds the user's events after `projection.lastSequence` up to `sequence` into it, in
    /// batches of ``foldBatch`` read in one short transaction each; each batch is opened and
    /// decoded on all cores, then applied in order.
    func fold(into projection: inout Projection, userId: String, upTo sequence: UInt64, key: SealingKey) throws {
        while true {
            let batch = try log.read { try $0.envelopes(userId: userId, after: projection.lastSequence, limit: Self.foldBatch) }
                .filter { $0.header.sequence <= sequence }
            guard !batch.isEmpty else { return }
            // One event that cannot be opened or decoded quarantines its item only.
            apply(batch, to: &projection, key: key)
            guard batch.count == Self.foldBatch else { return }
        }
    }

    /// Folds the user's events after `projection.lastSequence` as `reader` sees them (inside a
    /// write transaction: the state a decision in that transaction acts on).
    func foldTail(into projection: inout Projection, reader: LogReader, key: SealingKey) throws {
        while true {
            let batch = try reader.envelopes(userId: projection.userId, after: projection.lastSequence, limit: Self.foldBatch)
            guard !batch.isEmpty else { return }
            apply(batch, to: &projection, key: key)
            guard batch.count == Self.foldBatch else { return }
        }
    }

    /// Folds opened events into `projection`; one that cannot be opened or decoded quarantines its item.
    private func apply(_ batch: [Envelope], to projection: inout Projection, key: SealingKey) {
        for (envelope, result) in zip(batch, Self.decodeEach(batch, key: key)) {
            switch result {
            case .success(let event): projection.apply(event)
            case .failure(let error):
                logger.error("event cannot be read; its item is quarantined", metadata: [
                    "sequence": "\(envelope.header.sequence)", "cipher": "\(envelope.header.cipherId)", "error": "\(error)"])
                projection.quarantine(envelope.header, reason: "\(error)")
            }
        }
    }

    /// Opens and decodes envelopes, in parallel for large batches (order kept). An operation
    /// that a later operation on the same item in the batch supersedes has its snapshot left
    /// undecoded (``VaultEvent/operationSummary(header:plaintext:placeholder:)``): the fold
    /// keeps only the newest snapshot, and decoding the cipher is most of a fold's cost.
    static func decode(_ envelopes: [Envelope], key: SealingKey) throws -> [VaultEvent] {
        try decodeEach(envelopes, key: key).map { try $0.get() }
    }

    /// ``decode(_:key:)`` with one result per envelope, so one bad event does not hide the others.
    static func decodeEach(_ envelopes: [Envelope], key: SealingKey) -> [Result<VaultEvent, any Error>] {
        var latest: [String: Int] = [:]
        for (i, envelope) in envelopes.enumerated() where VaultEventType(rawValue: envelope.header.eventType)?.isOperation == true {
            latest[envelope.header.cipherId] = i
        }
        let lastOperation = latest
        let placeholder = Cipher(type: .login)
        @Sendable func decodeOne(_ i: Int) throws -> VaultEvent {
            let envelope = envelopes[i]
            if lastOperation[envelope.header.cipherId].map({ $0 > i }) == true {
                let plaintext = try envelope.open(key: key)
                if let event = VaultEvent.operationSummary(header: envelope.header, plaintext: plaintext, placeholder: placeholder) {
                    return event
                }
                return try VaultEvent(header: envelope.header, plaintext: plaintext)
            }
            return try VaultEvent(envelope: envelope, key: key)
        }
        let cores = ProcessInfo.processInfo.activeProcessorCount
        guard envelopes.count >= 256, cores > 1 else { return envelopes.indices.map { i in Result { try decodeOne(i) } } }
        let results = UnsafeMutableBufferPointer<Result<VaultEvent, any Error>?>.allocate(capacity: envelopes.count)
        results.initialize(repeating: nil)
        defer { results.deinitialize(); results.deallocate() }
        nonisolated(unsafe) let output = results
        let chunks = cores * 4
        DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
            for i in (envelopes.count * chunk / chunks)..<(envelopes.count * (chunk + 1) / chunks) {
                output[i] = Result { try decodeOne(i) }
            }
        }
        return results.map { $0! }
    }

    func loadCheckpoint(userId: String, keys: UnlockedKeys, atOrBefore sequence: UInt64 = .max) throws -> Projection {
        guard let (_, payload) = try log.latestCheckpoint(userId: userId, atOrBefore: sequence, key: keys.sealing) else {
            return Projection(userId: userId)
        }
        do {
            return try JSONDecoder().decode(Projection.self, from: Data(payload))
        } catch {
            logger.warning("ignoring unreadable checkpoint", metadata: ["user": "\(userId)", "error": "\(error)"])
            return Projection(userId: userId)
        }
    }

    /// Seals and stores `projection` as a checkpoint at its last sequence.
    public func saveCheckpoint(_ projection: Projection) throws {
        try saveCheckpoint(projection, keys: keys(projection.userId))
    }

    func saveCheckpoint(_ projection: Projection, keys: UnlockedKeys) throws {
        guard projection.lastSequence > 0 else { return }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try log.saveCheckpoint(userId: projection.userId, sequence: projection.lastSequence,
                               payload: Array(try encoder.encode(projection)), key: keys.sealing)
    }

    /// The pending state a decision may act on (which items keep their local copy in a sync,
    /// whether an edit goes to the server or into the log).
    ///
    /// Unlocked: from the authenticated projection (every event's MAC checked, sealed
    /// checkpoints), never from the unsealed pending checkpoint, which anyone who can write the
    /// file can rewrite. An item with an event that cannot be read counts as pending (an update
    /// when its change type is unknown), so nothing treats it as settled. Locked (no key, so
    /// nothing can be authenticated): the fold of every header from the first, skipping the
    /// checkpoint; headers are covered by the MACs `verify` checks.
    public func pendingState(userId: String) throws -> HeaderProjection {
        if isUnlocked(userId: userId) {
            return Self.pendingState(of: try projection(userId: userId))
        }
        return try log.read { try headerProjection($0, userId: userId, fromCheckpoint: false).projection }
    }

    /// The pending ids and change types of an authenticated projection.
    static func pendingState(of projection: Projection) -> HeaderProjection {
        var state = HeaderProjection()
        state.lastSequence = projection.lastSequence
        for (id, change) in projection.pending {
            state.pending[id] = change.changeType
            if change.uncertainCreate { state.uncertainCreates.insert(id) }
        }
        for id in (projection.quarantined ?? [:]).keys where state.pending[id] == nil {
            state.pending[id] = .update
        }
        return state
    }

    /// Pending items and their change types from headers alone, for the pending count a locked
    /// vault shows (a badge). Starts from the user's pending checkpoint and folds the headers
    /// after it; when that tail was long, saves a new checkpoint (unless the store is
    /// read-only). The checkpoint is unsealed, so this is a hint: decisions use
    /// ``pendingState(userId:)``, and `vaultlog verify` compares the checkpoint with the log.
    public func pendingFromHeaders(userId: String) throws -> HeaderProjection {
        let (projection, folded) = try log.read { try headerProjection($0, userId: userId) }
        if pendingCheckpointInterval > 0, folded >= pendingCheckpointInterval, let db = pendingCheckpoints,
           !log.environment.options.readOnly {
            do {
                try log.write { txn in
                    // Only if no newer checkpoint was saved meanwhile.
                    let stored = PendingCheckpoint.decode(try txn.transaction.get(db, key: Self.userPrefix(userId)))
                    guard (stored?.lastSequence ?? 0) < projection.lastSequence else { return }
                    try txn.transaction.put(db, key: Self.userPrefix(userId), value: PendingCheckpoint.encode(projection))
                }
            } catch {
                logger.warning("could not save the pending checkpoint", metadata: ["user": "\(userId)", "error": "\(error)"])
            }
        }
        return projection
    }

    /// The user's pending set from the checkpoint (unless `fromCheckpoint` is false) plus the
    /// headers after it, and how many headers were folded.
    func headerProjection(_ reader: LogReader, userId: String, fromCheckpoint: Bool = true) throws -> (projection: HeaderProjection, folded: Int) {
        var projection = HeaderProjection()
        if fromCheckpoint, let db = pendingCheckpoints, let bytes = try reader.transaction.get(db, key: Self.userPrefix(userId)) {
            if let stored = PendingCheckpoint.decode(bytes), try Self.isEventOf(userId, stored.lastSequence, reader) {
                projection = stored
            } else {
                logger.warning("ignoring an unreadable pending checkpoint", metadata: ["user": "\(userId)"])
            }
        }
        var folded = 0
        try reader.forEachHeader(userId: userId, after: projection.lastSequence) { header in
            projection.apply(header)
            folded += 1
            return true
        }
        return (projection, folded)
    }

    /// Whether `sequence` is one of the user's events (a pending checkpoint must end at one).
    static func isEventOf(_ userId: String, _ sequence: UInt64, _ reader: LogReader) throws -> Bool {
        try sequence == 0 || reader.hasEvent(userId: userId, at: sequence)
    }

    /// Pending count from headers (works while locked; a hint, see ``pendingFromHeaders(userId:)``).
    public func pendingCount(userId: String) throws -> Int { try pendingFromHeaders(userId: userId).count }

    /// A stream of the user's pending count (for a UI badge): the current count first, then
    /// a new value after every change to the log.
    public func pendingCountUpdates(userId: String) -> AsyncStream<Int> {
        let (stream, continuation) = AsyncStream<Int>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let token = UUID()
        observers.withLock { $0[token] = (userId, continuation) }
        continuation.onTermination = { [weak self] _ in _ = self?.observers.withLock { $0.removeValue(forKey: token) } }
        continuation.yield((try? pendingCount(userId: userId)) ?? 0)
        return stream
    }

    func notifyObservers(userId: String) {
        let targets = observers.withLock { $0.values.filter { $0.userId == userId }.map(\.continuation) }
        guard !targets.isEmpty, let count = try? pendingCount(userId: userId) else { return }
        for continuation in targets { continuation.yield(count) }
    }

    // MARK: Logout

    /// Removes everything of a user: events, checkpoints, local items, session. The one
    /// non-append mutation of the log.
    public func logout(userId: String) throws {
        try log.write { txn in
            try txn.deleteUser(userId)
            let prefix = Self.userPrefix(userId)
            var keys: [[UInt8]] = []
            try txn.transaction.scan(ciphers, from: prefix) { key, _ in
                guard key.starts(with: prefix) else { return false }
                keys.append(Array(key))
                return true
            }
            for key in keys { try txn.transaction.delete(ciphers, key: key) }
            try txn.transaction.delete(accounts, key: Array(userId.utf8))
            if let pendingCheckpoints { try txn.transaction.delete(pendingCheckpoints, key: Self.userPrefix(userId)) }
        }
        lock(userId: userId)
        notifyObservers(userId: userId)
    }

    /// ``logout(userId:)``, then closes this store and rewrites its file without free pages
    /// (``Environment/compactFile(at:)``). Deleted records stay in LMDB's free pages until they
    /// are reused: the logged-out account's wrapped user key and its sealed events would still
    /// be in `data.mdb`. After this they are not. The store is closed when this returns (also
    /// when the compaction fails: the logout has happened, the file still holds free pages);
    /// open it again to go on. Every other handle on the directory must be closed first.
    @discardableResult
    public func logoutAndClose(userId: String) throws -> Environment.Compaction {
        try logout(userId: userId)
        let path = log.environment.path
        close()
        return try Environment.compactFile(at: path)
    }
}

/// The stored form of a user's ``HeaderProjection``: only what the plaintext headers already
/// show (cipher ids and change types), so it is kept unsealed and read while locked.
/// `[version 1][lastSequence u64 BE][count u32 BE]` then per item `[idLength u8][id][type u8]`;
/// the type byte's high bit marks a create that may have reached the server.
enum PendingCheckpoint {
    static let types = PendingChangeType.allCases

    static func encode(_ projection: HeaderProjection) -> [UInt8] {
        var out: [UInt8] = [1]
        withUnsafeBytes(of: projection.lastSequence.bigEndian) { out.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(projection.pending.count).bigEndian) { out.append(contentsOf: $0) }
        for (id, type) in projection.pending.sorted(by: { $0.key < $1.key }) {
            let bytes = Array(id.utf8.prefix(255))
            out.append(UInt8(bytes.count))
            out.append(contentsOf: bytes)
            // The high bit marks a create that may have reached the server.
            out.append(UInt8(types.firstIndex(of: type)!) | (projection.uncertainCreates.contains(id) ? 0x80 : 0))
        }
        return out
    }

    /// Nil when the bytes are not a checkpoint this build reads (then the fold starts over).
    static func decode(_ bytes: [UInt8]?) -> HeaderProjection? {
        guard let bytes, bytes.count >= 13, bytes[0] == 1 else { return nil }
        func be(_ range: Range<Int>) -> UInt64 { bytes[range].reduce(0) { $0 << 8 | UInt64($1) } }
        var projection = HeaderProjection()
        projection.lastSequence = be(1..<9)
        let count = Int(be(9..<13))
        var offset = 13
        for _ in 0..<count {
            guard offset < bytes.count else { return nil }
            let length = Int(bytes[offset])
            offset += 1
            guard offset + length < bytes.count, let id = String(validating: bytes[offset..<offset + length], as: UTF8.self) else { return nil }
            offset += length
            let raw = Int(bytes[offset] & 0x7F)
            if bytes[offset] & 0x80 != 0 { projection.uncertainCreates.insert(id) }
            offset += 1
            guard raw < types.count else { return nil }
            projection.pending[id] = types[raw]
        }
        return offset == bytes.count ? projection : nil
    }
}

extension VaultLogStore {
    /// ``EventLogStore/verify(keys:batchSize:progress:)`` plus the checks of this store's own
    /// records: every pending checkpoint must equal the fold of its user's headers up to its
    /// sequence, and, for a user who is unlocked, the authenticated projection at that
    /// sequence. A mismatch means the unsealed checkpoint was altered (it is only a hint for a
    /// locked vault's pending count; nothing acts on it), and is reported with its user.
    public func verify(keys: [String: SealingKey] = [:], progress: ((Int, Int) -> Void)? = nil) throws -> VerifyReport {
        var report = try log.verify(keys: keys, progress: progress)
        report.problems += try verifyPendingCheckpoints()
        return report
    }

    /// The pending-checkpoint part of ``verify(keys:progress:)``.
    public func verifyPendingCheckpoints() throws -> [VerifyProblem] {
        guard let db = pendingCheckpoints else { return [] }
        var stored: [(userId: String?, bytes: [UInt8])] = []
        try log.read { reader in
            try reader.transaction.scan(db) { key, value in
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
                var fold = HeaderProjection()
                try reader.forEachHeader(userId: user) { header in
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
