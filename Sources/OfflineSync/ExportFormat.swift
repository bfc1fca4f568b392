import EventLog
import Foundation
import VaultCrypto
import VaultJSON
import VaultModel

/// The JSON Lines export of a store (`vaultlog export` / `vaultlog import`, and the recorded
/// logs under `Fixtures/logs/`), documented in `Docs/CLI.md`: a metadata line, then one line
/// per sealed envelope, in sequence order. Envelopes are carried byte for byte (base64), so
/// they stay sealed and still verify.
///
/// The parsing of one line lives here, as pure functions over the line's text, so the CLI, the
/// replay of recorded logs and the fuzz targets (`Tests/Fuzz`) read exports with the same code.
///
/// ```swift
/// let metadata = try ExportFormat.metadata(line: firstLine)
/// let envelope = try ExportFormat.envelope(line: secondLine)   // header checked against the line
/// ```
public enum ExportFormat {
    /// `format` of the metadata line.
    public static let name = "vaultlog-export"
    /// The version this build writes and reads.
    public static let version = 1

    /// The first line.
    public struct Metadata: Codable, Sendable {
        /// Always ``ExportFormat/name``: what makes the file recognisable.
        public var format: String
        /// The export format's version (``ExportFormat/version``).
        public var version: Int
        /// The store format the events were written in.
        public var storeFormatVersion: Int
        /// The newest envelope format among the events.
        public var envelopeFormatVersion: UInt8
        /// Envelope lines that follow (an import refuses a file with fewer or more).
        public var eventCount: Int
        /// The store's last sequence when it was exported.
        public var lastSequence: UInt64
        /// Stored accounts (email, KDF, protected user key: no secret in clear), so the
        /// imported store unlocks with `--email` too.
        public var accounts: [StoredAccount]
        /// Each user's sealed head record (user id → base64), so the imported store still
        /// detects a removed tail. Absent in exports written before envelope format 2.
        public var heads: [String: String]?
        /// The compaction snapshots and their per-item records, sealed (base64), so an imported
        /// compacted store folds and verifies from its horizons. Absent when nothing was compacted.
        public var snapshots: [String]?

        /// A metadata line from its fields.
        public init(format: String, version: Int, storeFormatVersion: Int, envelopeFormatVersion: UInt8,
                    eventCount: Int, lastSequence: UInt64, accounts: [StoredAccount], heads: [String: String]? = nil,
                    snapshots: [String]? = nil) {
            self.format = format
            self.version = version
            self.storeFormatVersion = storeFormatVersion
            self.envelopeFormatVersion = envelopeFormatVersion
            self.eventCount = eventCount
            self.lastSequence = lastSequence
            self.accounts = accounts
            self.heads = heads
            self.snapshots = snapshots
        }
    }

    /// One envelope line. The header fields repeat what is inside `envelope` so the file is
    /// readable with `jq`; an import checks that they agree.
    public struct EnvelopeLine: Codable, Sendable {
        /// The event's sequence.
        public var sequence: UInt64
        /// The envelope's format version.
        public var formatVersion: UInt8
        /// The user the event belongs to.
        public var userId: String
        /// The item the event is about.
        public var cipherId: String
        /// The event type's number.
        public var eventType: UInt16
        /// The event type's name (`updated`, `resolved`...).
        public var type: String
        /// When it was recorded, milliseconds since 1970 UTC.
        public var recordedAtMillis: Int64
        /// The stored envelope bytes, base64.
        public var envelope: String

        /// The line for a stored envelope.
        public init(_ envelope: Envelope) {
            let header = envelope.header
            sequence = header.sequence
            formatVersion = header.formatVersion
            userId = header.userId
            cipherId = header.cipherId
            eventType = header.eventType
            type = VaultEventType(rawValue: header.eventType)?.description ?? "unknown(\(header.eventType))"
            recordedAtMillis = header.recordedAtMillis
            self.envelope = Base64.encode(envelope.bytes)
        }

        init(sequence: UInt64, formatVersion: UInt8, userId: String, cipherId: String, eventType: UInt16, type: String,
             recordedAtMillis: Int64, envelope: String) {
            self.sequence = sequence
            self.formatVersion = formatVersion
            self.userId = userId
            self.cipherId = cipherId
            self.eventType = eventType
            self.type = type
            self.recordedAtMillis = recordedAtMillis
            self.envelope = envelope
        }
    }

    /// Why a line is not what an export holds there; `reason` is written for a person and
    /// callers add the file and line number.
    public struct LineError: Error, Equatable, Sendable, CustomStringConvertible {
        /// What is wrong with the line.
        public let reason: String
        /// The reason.
        public var description: String { reason }
    }

    /// Compact JSON with sorted keys: one line of the export.
    public static func encode(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// Parses and checks the metadata line (format name, a version this build reads).
    public static func metadata(line: String) throws(LineError) -> Metadata {
        let metadata = try decode(Metadata.self, line, what: "a vaultlog export metadata line")
        guard metadata.format == name else {
            throw LineError(reason: "format is '\(metadata.format)', expected '\(name)'")
        }
        guard metadata.version <= version else {
            throw LineError(reason: "export version \(metadata.version) is newer than this build reads (\(version)); upgrade VaultLog")
        }
        return metadata
    }

    /// Parses one envelope line: the JSON, the base64, the envelope, and the agreement of the
    /// line's header fields with the envelope's own header.
    public static func envelope(line: String) throws(LineError) -> Envelope {
        try checked(try decode(EnvelopeLine.self, line, what: "an envelope line"))
    }

    /// The envelope a parsed line carries, checked against the line's header fields.
    /// `decoded`: the envelope's bytes when the caller has decoded `entry.envelope` already.
    static func checked(_ entry: EnvelopeLine, decoded: [UInt8]? = nil) throws(LineError) -> Envelope {
        guard let bytes = decoded ?? Base64.decode(entry.envelope) else {
            throw LineError(reason: "\"envelope\" is not base64")
        }
        let envelope: Envelope
        do {
            envelope = try Envelope(bytes: bytes)
        } catch {
            throw LineError(reason: "the envelope does not parse: \(error)")
        }
        let header = envelope.header
        if header.sequence == entry.sequence, header.userId == entry.userId, header.cipherId == entry.cipherId,
           header.eventType == entry.eventType, header.recordedAtMillis == entry.recordedAtMillis,
           header.formatVersion == entry.formatVersion {
            return envelope
        }
        let mismatches = [
            header.sequence == entry.sequence ? nil : "sequence \(header.sequence) vs \(entry.sequence)",
            header.userId == entry.userId ? nil : "userId",
            header.cipherId == entry.cipherId ? nil : "cipherId",
            header.eventType == entry.eventType ? nil : "eventType \(header.eventType) vs \(entry.eventType)",
            header.recordedAtMillis == entry.recordedAtMillis ? nil : "recordedAtMillis",
            header.formatVersion == entry.formatVersion ? nil : "formatVersion",
        ].compactMap { $0 }
        throw LineError(reason: "the line's fields disagree with its envelope's header (\(mismatches.joined(separator: ", ")))")
    }

    /// One line's JSON as `type`; otherwise "not `what` (the reason)".
    static func decode<T: Decodable>(_ type: T.Type, _ line: String, what: String) throws(LineError) -> T {
        do {
            return try JSONTapeDecoder().decode(type, from: line.utf8)
        } catch {
            throw LineError(reason: "not \(what) (\(reason(error)))")
        }
    }

    /// A decoding error in a few words, naming the field.
    static func reason(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): return "missing field \"\(key.stringValue)\""
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            return "wrong type at \"\(context.codingPath.map(\.stringValue).joined(separator: "."))\""
        case DecodingError.dataCorrupted(let context):
            return context.codingPath.isEmpty ? "not JSON" : "bad value at \"\(context.codingPath.map(\.stringValue).joined(separator: "."))\""
        default: return "\(error)"
        }
    }
}
