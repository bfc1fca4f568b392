import EventLog
import Foundation
import VaultJSON
import VaultModel

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
    /// The version the edit started from (the local copy of the server's item at
    /// ``baseRevisionDate``), on the first edit of an item with nothing pending: the base of the
    /// resolver's three-way merge with another device's change. Nil on later edits, creates and
    /// deletes (and on every edit written before the field existed).
    public var base: Cipher?

    /// The body of an offline operation on `cipher` (its new version, encrypted).
    public init(cipher: Cipher, passwordChanged: Bool, baseRevisionDate: BitwardenDate?, at: BitwardenDate, base: Cipher? = nil) {
        self.cipher = cipher
        self.passwordChanged = passwordChanged
        self.baseRevisionDate = baseRevisionDate
        self.at = at
        self.base = base
    }
}

/// The parts of an item a merge took from each side (a `pushed` outcome of a merge): names as
/// `CipherMerge` (VaultModel) gives them (`name`, `notes`, `folder`, `favorite`, `credential`, `uris`,
/// `field:<name>`...).
public struct MergedParts: Codable, Sendable, Equatable {
    /// Parts this device's offline change set.
    public var local: [String]
    /// Parts only another device changed (taken from the server's copy).
    public var server: [String]

    /// The parts of a merge.
    public init(local: [String], server: [String]) {
        self.local = local
        self.server = server
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
    /// The local change and another device's change touched different parts of the item, and
    /// the pushed version holds both (pushed): which parts came from each side.
    public var merged: MergedParts?
    /// The attachment a copy step is about (attachmentPlanned, attachmentCopied,
    /// attachmentUnavailable). Set after `init`; absent from every other body.
    public var attachment: AttachmentCopy? = nil
    /// A folder's encrypted name, an EncString under the user key (folderCreated,
    /// folderRenamed, folderMapped). Set after `init`; absent from every other body.
    public var folderName: String? = nil
    /// The folder an item named that the server no longer has (itemFolderMissing). Set after
    /// `init`; absent from every other body.
    public var folderId: String? = nil

    /// An outcome at `at` with the fields its type uses (see each property).
    public init(at: BitwardenDate, serverId: String? = nil, revisionDate: BitwardenDate? = nil,
                backupId: String? = nil, backupOf: ConflictSide? = nil, marker: String? = nil, reason: String? = nil,
                attempt: Int? = nil, nextRetryAt: BitwardenDate? = nil, deadLetter: Bool? = nil, pendingCount: Int? = nil,
                cipher: Cipher? = nil, purpose: CreatePurpose? = nil,
                sourceRevisionDate: BitwardenDate? = nil, sourceSequence: UInt64? = nil, serverUnreachable: Bool? = nil,
                merged: MergedParts? = nil) {
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
        self.merged = merged
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

}

