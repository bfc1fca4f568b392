import EventLog
import Foundation
import OfflineSync
import VaultCrypto

/// The JSON Lines export of a store (`vaultlog export` / `vaultlog import`), documented in
/// `Docs/CLI.md`: a metadata line, then one line per sealed envelope, in sequence order.
/// Envelopes are carried byte for byte (base64), so they stay sealed and still verify.
enum ExportFormat {
    /// `format` of the metadata line.
    static let name = "vaultlog-export"
    /// The version this build writes and reads.
    static let version = 1

    /// The first line.
    struct Metadata: Codable {
        var format: String
        var version: Int
        var storeFormatVersion: Int
        var envelopeFormatVersion: UInt8
        /// Envelope lines that follow (an import refuses a file with fewer or more).
        var eventCount: Int
        var lastSequence: UInt64
        /// Stored accounts (email, KDF, protected user key: no secret in clear), so the
        /// imported store unlocks with `--email` too.
        var accounts: [StoredAccount]
    }

    /// One envelope line. The header fields repeat what is inside `envelope` so the file is
    /// readable with `jq`; an import checks that they agree.
    struct EnvelopeLine: Codable {
        var sequence: UInt64
        var formatVersion: UInt8
        var userId: String
        var cipherId: String
        var eventType: UInt16
        var type: String
        var recordedAtMillis: Int64
        /// The stored envelope bytes, base64.
        var envelope: String

        init(_ envelope: Envelope) {
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
    }

    static func encode(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}

/// Reads a text file line by line with bounded memory (`getline`).
final class LineReader {
    private let file: UnsafeMutablePointer<FILE>
    private var buffer: UnsafeMutablePointer<CChar>?
    private var capacity = 0
    /// 1-based number of the line last returned.
    private(set) var lineNumber = 0

    init(path: String) throws {
        guard let file = fopen(path, "r") else {
            throw CLIError.storage("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        self.file = file
    }

    deinit {
        free(buffer)
        fclose(file)
    }

    /// The next line without its newline, or nil at the end of the file.
    func next() -> String? {
        let length = getline(&buffer, &capacity, file)
        guard length >= 0, let buffer else { return nil }
        lineNumber += 1
        var bytes = UnsafeRawBufferPointer(start: buffer, count: length)
        if bytes.last == UInt8(ascii: "\n") { bytes = UnsafeRawBufferPointer(rebasing: bytes.dropLast()) }
        if bytes.last == UInt8(ascii: "\r") { bytes = UnsafeRawBufferPointer(rebasing: bytes.dropLast()) }
        return String(decoding: bytes, as: UTF8.self)
    }
}
