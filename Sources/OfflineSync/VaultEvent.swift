import EventLog
import Foundation
import VaultModel

/// The event types VaultLog writes (the `eventType` of an envelope header). Codes are part of
/// the stored format: never renumber, only add.
public enum VaultEventType: UInt16, Sendable, Codable, CaseIterable, CustomStringConvertible {
    // Operations, appended by `VaultRepository` when an edit is saved offline.
    /// A new item (temporary id until the server assigns one).
    case created = 1
    /// An edit of an existing item.
    case updated = 2
    /// Moved to the trash (`deletedDate` set).
    case softDeleted = 3
    /// Permanently deleted; the local copy is removed.
    case hardDeleted = 4

    // Outcomes, appended by the resolver, the repository and sync.
    /// The local version is on the server (create or update); body has the server id and revision.
    case pushed = 100
    /// A temporary id was mapped to the server's id.
    case idMapped = 101
    /// A backup copy of the losing side was created on the server.
    case backupCreated = 102
    /// The server's copy won; it replaced the local copy.
    case serverCopyKept = 103
    /// The server no longer had the item (404); the local version was created again.
    case recreated = 104
    /// A soft or permanent delete was applied on the server.
    case deleteApplied = 105
    /// The server's copy changed since the delete; the delete was dropped and the server copy restored locally.
    case deleteDropped = 106
    /// The server no longer had the deleted item (404); cleaned up locally.
    case cleanedUp = 107
    /// A resolution attempt failed; body has the error, attempt number and next retry time.
    case resolutionFailed = 108
    /// Everything pending for this item is done.
    case resolved = 109
    /// An online operation succeeded, so any pending state of the item is obsolete.
    case clearedAfterOnlineSuccess = 110
    /// A dead-lettered item was put back into automatic retries on request.
    case retryRequested = 111
    /// The resolver is about to create an item on the server (a create, a re-create or a
    /// backup); body has the exact encrypted payload and its unique `marker` (the encrypted
    /// name string), so a retry after an uncertain failure finds the copy instead of posting twice.
    case createPlanned = 112
    /// The user discarded the item's pending change (a dead letter): the server's version wins
    /// locally. Body has the server's copy, or none when the server does not hold the item. The
    /// discarded version stays in the log (history, export).
    case changeDiscarded = 113
    /// A sync was aborted because changes are still pending (user-level; body has count and reasons).
    case syncAborted = 200
    /// A full sync replaced the local store (user-level).
    case syncApplied = 201
    /// The app marked the resolution reports up to a sequence as reviewed (user-level; body's
    /// `sourceSequence`), so every process on the store agrees on what is new.
    case reportsReviewed = 202

    /// What an event type records.
    public enum Kind: Sendable, Equatable {
        /// A user's offline operation on one item (appended by the repository).
        case operation
        /// What happened to one item's pending change (appended by the resolver, the repository).
        case outcome
        /// Something about the whole vault of a user (sync), with an empty cipher id.
        case userLevel
    }

    /// The kind of this event type. Exhaustive on purpose: a new event type does not compile
    /// until it is given a kind.
    public var kind: Kind {
        switch self {
        case .created, .updated, .softDeleted, .hardDeleted:
            .operation
        case .pushed, .idMapped, .backupCreated, .serverCopyKept, .recreated, .deleteApplied, .deleteDropped, .cleanedUp,
             .resolutionFailed, .resolved, .clearedAfterOnlineSuccess, .retryRequested, .createPlanned, .changeDiscarded:
            .outcome
        case .syncAborted, .syncApplied, .reportsReviewed:
            .userLevel
        }
    }

    /// True for the four offline operations.
    public var isOperation: Bool { kind == .operation }

    /// The case name, e.g. `"softDeleted"` or `"syncApplied"`.
    public var description: String {
        switch self {
        case .created: "created"
        case .updated: "updated"
        case .softDeleted: "softDeleted"
        case .hardDeleted: "hardDeleted"
        case .pushed: "pushed"
        case .idMapped: "idMapped"
        case .backupCreated: "backupCreated"
        case .serverCopyKept: "serverCopyKept"
        case .recreated: "recreated"
        case .deleteApplied: "deleteApplied"
        case .deleteDropped: "deleteDropped"
        case .cleanedUp: "cleanedUp"
        case .resolutionFailed: "resolutionFailed"
        case .resolved: "resolved"
        case .clearedAfterOnlineSuccess: "clearedAfterOnlineSuccess"
        case .retryRequested: "retryRequested"
        case .createPlanned: "createPlanned"
        case .changeDiscarded: "changeDiscarded"
        case .syncAborted: "syncAborted"
        case .syncApplied: "syncApplied"
        case .reportsReviewed: "reportsReviewed"
        }
    }

    /// Parses the name `description` prints.
    public init?(name: String) {
        guard let match = Self.allCases.first(where: { $0.description == name }) else { return nil }
        self = match
    }
}

/// Body of an operation event (schema version 1). Sealed in the envelope; documented in
/// `Docs/Projection.md`.
public struct OperationBody: Codable, Sendable, Equatable {
    /// Body schema version; readers upcast older versions.
    public var v: Int = 1
    /// The encrypted item exactly as it would be sent to the server.
    public var cipher: Cipher
    /// Whether this edit changed the login password (decided at append time by decrypt-compare).
    public var passwordChanged: Bool
    /// The server `revisionDate` the edit was based on (nil for creates).
    public var baseRevisionDate: BitwardenDate?
    /// When the user made the edit.
    public var at: BitwardenDate

    /// The body of an offline operation on `cipher` (its new version, encrypted).
    public init(cipher: Cipher, passwordChanged: Bool, baseRevisionDate: BitwardenDate?, at: BitwardenDate) {
        self.cipher = cipher
        self.passwordChanged = passwordChanged
        self.baseRevisionDate = baseRevisionDate
        self.at = at
    }
}

/// Which side of a conflict lost and was backed up.
public enum ConflictSide: String, Codable, Sendable {
    /// The server's copy was backed up (the local version was pushed over it).
    case server
    /// The local version was backed up (the server's copy was kept).
    case local
}

/// Body of an outcome event (schema version 1): the fields that apply to its type.
public struct OutcomeBody: Codable, Sendable, Equatable {
    /// The body's schema version.
    public var v: Int = 1
    /// When it happened.
    public var at: BitwardenDate
    /// The server id (pushed, idMapped, recreated).
    public var serverId: String?
    /// The server revision after the step.
    public var revisionDate: BitwardenDate?
    /// The backup's server id (backupCreated).
    public var backupId: String?
    /// Which side the backup preserves (backupCreated).
    public var backupOf: ConflictSide?
    /// The backup's encrypted name string, unique per backup: how a retry after an uncertain
    /// create finds the copy that may already exist.
    public var marker: String?
    /// Why: the rule applied, or the error text.
    public var reason: String?
    /// The attempt number (resolutionFailed).
    public var attempt: Int?
    /// When the item is tried again (resolutionFailed).
    public var nextRetryAt: BitwardenDate?
    /// The item became a dead letter: too many failed attempts (resolutionFailed).
    public var deadLetter: Bool?
    /// Pending count (syncAborted).
    public var pendingCount: Int?
    /// The planned payload (createPlanned): encrypted, exactly what is posted.
    public var cipher: Cipher?
    /// What a planned create is for (createPlanned, backupCreated).
    public var purpose: CreatePurpose?
    /// The version a backup preserves: the server revision it copied (backupOf server) or the
    /// local version's event sequence (backupOf local). A retry never backs up the same version twice.
    public var sourceRevisionDate: BitwardenDate?
    /// The local version's event sequence a backup preserves (backupOf local), or the latest
    /// local version a push sent (pushed).
    public var sourceSequence: UInt64?
    /// The failure was the server being out of reach (resolutionFailed): not an attempt, and
    /// not recorded again while it lasts.
    public var serverUnreachable: Bool?

    /// An outcome at `at` with the fields its type uses (see each property).
    public init(at: BitwardenDate, serverId: String? = nil, revisionDate: BitwardenDate? = nil,
                backupId: String? = nil, backupOf: ConflictSide? = nil, marker: String? = nil, reason: String? = nil,
                attempt: Int? = nil, nextRetryAt: BitwardenDate? = nil, deadLetter: Bool? = nil, pendingCount: Int? = nil,
                cipher: Cipher? = nil, purpose: CreatePurpose? = nil,
                sourceRevisionDate: BitwardenDate? = nil, sourceSequence: UInt64? = nil, serverUnreachable: Bool? = nil) {
        self.at = at
        self.serverId = serverId
        self.revisionDate = revisionDate
        self.backupId = backupId
        self.backupOf = backupOf
        self.marker = marker
        self.reason = reason
        self.attempt = attempt
        self.nextRetryAt = nextRetryAt
        self.deadLetter = deadLetter
        self.pendingCount = pendingCount
        self.cipher = cipher
        self.purpose = purpose
        self.sourceRevisionDate = sourceRevisionDate
        self.sourceSequence = sourceSequence
        self.serverUnreachable = serverUnreachable
    }
}

/// A decoded event: header plus typed body.
public struct VaultEvent: Sendable, Equatable {
    /// The decrypted body: what the user did, or what the resolver or a sync did.
    public enum Body: Sendable, Equatable {
        /// A user operation (create, update, trash, delete) with the item's new version.
        case operation(OperationBody)
        /// An outcome (resolver step, failure, sync), with the fields its type uses.
        case outcome(OutcomeBody)
    }

    /// The envelope's header: sequence, user, item, type, time (authenticated, not encrypted).
    public let header: EventHeader
    /// The event type named by the header.
    public let type: VaultEventType
    /// The decrypted body.
    public let body: Body

    /// The event's sequence in the log.
    public var sequence: UInt64 { header.sequence }
    /// The item the event is about.
    public var cipherId: String { header.cipherId }

    /// The operation body, if this is an operation.
    public var operation: OperationBody? {
        if case .operation(let body) = body { return body }
        return nil
    }

    /// The outcome body, if this is an outcome.
    public var outcome: OutcomeBody? {
        if case .outcome(let body) = body { return body }
        return nil
    }

    /// An event from its parts (tests, tools; the store decodes events from envelopes).
    public init(header: EventHeader, type: VaultEventType, body: Body) {
        self.header = header
        self.type = type
        self.body = body
    }

    /// Opens and decodes an envelope.
    public init(envelope: Envelope, key: SealingKey) throws {
        let plaintext = try envelope.open(key: key)
        try self.init(header: envelope.header, plaintext: plaintext)
    }

    /// The body schema versions (`v`) this build decodes.
    public static let bodySchemaVersions: ClosedRange<Int> = 1...1

    /// Decodes a body already opened.
    public init(header: EventHeader, plaintext: [UInt8]) throws {
        guard let type = VaultEventType(rawValue: header.eventType) else {
            throw OfflineSyncError.corruptEvent(sequence: header.sequence, reason: "unknown event type \(header.eventType)")
        }
        let decoder = JSONTapeDecoder()
        let version: Int
        do {
            if type.isOperation {
                let operation = try decoder.decode(OperationBody.self, from: plaintext)
                (body, version) = (.operation(operation), operation.v)
            } else {
                let outcome = try Self.bareOutcome(plaintext) ?? decoder.decode(OutcomeBody.self, from: plaintext)
                (body, version) = (.outcome(outcome), outcome.v)
            }
        } catch {
            throw OfflineSyncError.corruptEvent(sequence: header.sequence, reason: "body does not decode: \(error)")
        }
        // The body schema has one version so far; a later one is refused, not misread.
        guard Self.bodySchemaVersions.contains(version) else {
            throw OfflineSyncError.corruptEvent(sequence: header.sequence,
                reason: "body schema version \(version) is not one this build reads (\(Self.bodySchemaVersions.map(String.init).joined(separator: ", "))): written by a newer VaultLog; open the store with that version")
        }
        self.header = header
        self.type = type
    }

    /// What a fold needs of an operation that a later operation on the same item supersedes:
    /// its time, base revision and password flag, with `placeholder` for the snapshot. Read by
    /// scanning the canonical body (`{"at":…,["baseRevisionDate":…,]"cipher":{…},
    /// "passwordChanged":…,"v":1}`, sorted keys as ``encode(_:)`` writes) without decoding the
    /// cipher; nil for any other shape (the caller then decodes it fully).
    static func operationSummary(header: EventHeader, plaintext: [UInt8], placeholder: Cipher) -> VaultEvent? {
        guard let type = VaultEventType(rawValue: header.eventType), type.isOperation,
              let fields = operationFields(plaintext) else { return nil }
        return VaultEvent(header: header, type: type,
                          body: .operation(OperationBody(cipher: placeholder, passwordChanged: fields.passwordChanged,
                                                         baseRevisionDate: fields.baseRevisionDate, at: fields.at)))
    }

    /// An outcome body with nothing but its time, in the canonical form (`{"at":"…","v":1}`, a
    /// date of 28 characters), read without the JSON decoder: what most outcomes are (every
    /// `resolved`), and the decoder's keyed reads of the seventeen optional fields cost a fold
    /// about as much as all the rest of such an event. Nil for any other body (decode it).
    static func bareOutcome(_ plaintext: [UInt8]) -> OutcomeBody? {
        let prefix: StaticString = "{\"at\":", suffix: StaticString = ",\"v\":1}"
        let dateEnd = prefix.utf8CodeUnitCount + BitwardenDate.canonicalLength + 2
        guard plaintext.count == dateEnd + suffix.utf8CodeUnitCount else { return nil }
        return plaintext.withUnsafeBytes { p -> OutcomeBody? in
            guard memcmp(p.baseAddress!, prefix.utf8Start, prefix.utf8CodeUnitCount) == 0,
                  memcmp(p.baseAddress! + dateEnd, suffix.utf8Start, suffix.utf8CodeUnitCount) == 0,
                  let at = canonicalQuotedDate(p, at: prefix.utf8CodeUnitCount) else { return nil }
            return OutcomeBody(at: at)
        }
    }

    /// A date of the canonical length written as a JSON string at `offset` (its opening quote)
    /// in `bytes`, closed by a quote; nil otherwise. No byte of it can be a quote or a backslash
    /// once it reads as a date (the date parsers take only digits and `-+:.TtZz`), so a JSON
    /// decoder reads the same date there and nothing is scanned for escapes.
    static func canonicalQuotedDate(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> BitwardenDate? {
        let end = offset + 1 + BitwardenDate.canonicalLength
        guard end < bytes.count, bytes[offset] == UInt8(ascii: "\""), bytes[end] == UInt8(ascii: "\"") else { return nil }
        return try? BitwardenDate(utf8: UnsafeRawBufferPointer(rebasing: bytes[(offset + 1)..<end]))
    }

    /// The small fields of a canonical operation body and where its cipher's JSON object is,
    /// read without decoding the cipher; nil for any other shape.
    static func operationFields(_ plaintext: [UInt8]) -> OperationFields? {
        plaintext.withUnsafeBytes { operationFields(head: $0, tail: $0, count: $0.count) }
    }

    /// ``operationFields(_:)`` from the two ends of a body only: `head` its first bytes, `tail`
    /// its last bytes, `count` its length (the bytes between are not needed: the small fields
    /// come before the cipher's JSON and after it). Nil as well when a field runs past `head`
    /// (then read the whole body).
    static func operationFields(head: UnsafeRawBufferPointer, tail: UnsafeRawBufferPointer, count: Int) -> OperationFields? {
        let tailStart = count - tail.count
        /// Whether `literal` is at `offset`, wholly inside one of the two ends.
        func starts(_ literal: StaticString, at offset: Int) -> Bool {
            let n = literal.utf8CodeUnitCount
            if offset >= 0, offset + n <= head.count { return memcmp(head.baseAddress! + offset, literal.utf8Start, n) == 0 }
            if offset >= tailStart, offset + n <= count { return memcmp(tail.baseAddress! + (offset - tailStart), literal.utf8Start, n) == 0 }
            return false
        }
        /// A date written as a JSON string without escapes starting at `offset` (at its opening
        /// quote) inside `head`, and where it ends.
        func date(at offset: Int) -> (BitwardenDate, end: Int)? {
            guard offset < head.count, head[offset] == UInt8(ascii: "\"") else { return nil }
            if let date = canonicalQuotedDate(head, at: offset) { return (date, offset + BitwardenDate.canonicalLength + 2) }
            var i = offset + 1
            while i < head.count, head[i] != UInt8(ascii: "\""), head[i] != UInt8(ascii: "\\") { i += 1 }
            guard i < head.count, head[i] == UInt8(ascii: "\""),
                  let date = try? BitwardenDate(utf8: UnsafeRawBufferPointer(rebasing: head[(offset + 1)..<i])) else { return nil }
            return (date, i + 1)
        }
        guard starts("{\"at\":", at: 0), let (at, afterAt) = date(at: 6) else { return nil }
        var offset = afterAt
        var base: BitwardenDate?
        if starts(",\"baseRevisionDate\":", at: offset) {
            guard let (date, end) = date(at: offset + 20) else { return nil }
            base = date
            offset = end
        }
        guard starts(",\"cipher\":{", at: offset) else { return nil }
        let passwordChanged: Bool
        let cipherEnd: Int
        if starts("},\"passwordChanged\":true,\"v\":1}", at: count - 31) {
            passwordChanged = true
            cipherEnd = count - 30
        } else if starts("},\"passwordChanged\":false,\"v\":1}", at: count - 32) {
            passwordChanged = false
            cipherEnd = count - 31
        } else {
            return nil
        }
        guard offset + 10 <= cipherEnd else { return nil }
        return OperationFields(at: at, baseRevisionDate: base, passwordChanged: passwordChanged, cipher: (offset + 10)..<cipherEnd)
    }

    /// What ``operationFields(_:)`` reads.
    struct OperationFields: Sendable {
        var at: BitwardenDate
        var baseRevisionDate: BitwardenDate?
        var passwordChanged: Bool
        /// Where the cipher's JSON object is in the body.
        var cipher: Range<Int>
    }

    /// Encodes a body for appending.
    static func encode(_ body: Body) throws -> [UInt8] {
        switch body {
        case .operation(let op): return try encodeOperation(op, cipherJSON: encodeCipher(op.cipher))
        case .outcome(let outcome): return try canonicalEncoder().encode(outcome)
        }
    }

    /// The encoder of stored bodies: sorted keys, the canonical shape
    /// ``operationSummary(header:plaintext:placeholder:)`` reads (byte for byte what
    /// `JSONEncoder` with `.sortedKeys` writes).
    static func canonicalEncoder() -> SortedJSONEncoder {
        SortedJSONEncoder()
    }

    /// A cipher's JSON as a stored operation body holds it (and the local item cache, which
    /// then stores the same bytes without encoding the cipher a second time).
    static func encodeCipher(_ cipher: Cipher) throws -> [UInt8] {
        try canonicalEncoder().encode(cipher)
    }

    /// The operation body's JSON with `cipherJSON` (``encodeCipher(_:)`` of `op.cipher`) spliced
    /// in where the encoder puts it: byte for byte what encoding `op` whole gives (tested), at
    /// the cost of encoding the four small fields. The cipher is most of a save's encoding.
    static func encodeOperation(_ op: OperationBody, cipherJSON: [UInt8]) throws -> [UInt8] {
        /// `OperationBody` without its cipher: `{"at":…,["baseRevisionDate":…,]"passwordChanged":…,"v":…}`.
        struct Rest: Encodable {
            var at: BitwardenDate
            var baseRevisionDate: BitwardenDate?
            var passwordChanged: Bool
            var v: Int
        }
        let rest = try canonicalEncoder().encode(Rest(at: op.at, baseRevisionDate: op.baseRevisionDate,
                                                      passwordChanged: op.passwordChanged, v: op.v))
        let marker = Array(",\"passwordChanged\":".utf8)
        guard let split = rest.firstRange(of: marker)?.lowerBound else {
            preconditionFailure("the encoder wrote an operation body without passwordChanged")
        }
        var out: [UInt8] = []
        out.reserveCapacity(rest.count + cipherJSON.count + 10)
        out += rest[..<split]
        out += Array(",\"cipher\":".utf8)
        out += cipherJSON
        out += rest[split...]
        return out
    }
}

/// What a POST of the resolver is for. Stored as a string in outcome bodies: `create`,
/// `recreate`, `backup` and `passwordOverflow-N` (N ≥ 1, the part of an overflow copy).
public enum CreatePurpose: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The first POST of an item created on this device.
    case create
    /// An item this device edited was deleted on the server; it is posted again.
    case recreate
    /// A backup of the losing side of a conflict, or of the version before a password burst.
    case backup
    /// Part `part` (from 1) of the copies holding passwords that overflow the item's history.
    case passwordOverflow(part: Int)

    /// The stored form.
    public var description: String {
        switch self {
        case .create: "create"
        case .recreate: "recreate"
        case .backup: "backup"
        case .passwordOverflow(let part): "passwordOverflow-\(part)"
        }
    }

    /// Parses the stored form; nil for anything else.
    public init?(_ text: String) {
        switch text {
        case "create": self = .create
        case "recreate": self = .recreate
        case "backup": self = .backup
        default:
            let prefix = "passwordOverflow-"
            guard text.hasPrefix(prefix), let part = Int(text.dropFirst(prefix.count)), part >= 1,
                  String(part) == text.dropFirst(prefix.count) else { return nil }
            self = .passwordOverflow(part: part)
        }
    }

    /// Whether this is any part of an overflow copy.
    public var isPasswordOverflow: Bool {
        if case .passwordOverflow = self { return true }
        return false
    }

    /// Decodes the stored form (a JSON string, see ``init(_:)``); throws `DecodingError` for
    /// anything else.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let purpose = CreatePurpose(text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription:
                "unknown create purpose '\(text)' (expected create, recreate, backup or passwordOverflow-N)")
        }
        self = purpose
    }

    /// Encodes the stored form, ``description``, as a JSON string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
