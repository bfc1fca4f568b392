import EventLog
import Foundation
import Testing
@testable import OfflineSync

/// The export line format shared by `vaultlog import`, the replay of recorded logs and the fuzz
/// targets: per-line parsing and its error reasons.
@Suite struct ExportFormatTests {
    static let log = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/logs/format-v1.jsonl")

    static func lines() throws -> [String] {
        try String(contentsOf: log, encoding: .utf8).split(separator: "\n").map(String.init)
    }

    @Test func envelopeLine_writtenBack_parsesToTheSameBytes() throws {
        let envelope = try ExportFormat.envelope(line: try Self.lines()[1])
        let again = try ExportFormat.envelope(line: try ExportFormat.encode(ExportFormat.EnvelopeLine(envelope)))
        #expect(again.bytes == envelope.bytes)
    }

    @Test func envelopeLine_whoseSequenceDisagreesWithItsEnvelope_isRefusedNamingTheField() throws {
        var object = try JSONSerialization.jsonObject(with: Data(try Self.lines()[1].utf8)) as! [String: Any]
        object["sequence"] = 99
        let line = String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
        #expect(throws: ExportFormat.LineError(reason: "the line's fields disagree with its envelope's header (sequence 1 vs 99)")) {
            try ExportFormat.envelope(line: line)
        }
    }

    @Test func metadataLine_ofANewerExportVersion_isRefused() throws {
        let line = try Self.lines()[0].replacingOccurrences(of: #""version":1"#, with: #""version":2"#)
        #expect(throws: ExportFormat.LineError(reason: "export version 2 is newer than this build reads (1); upgrade VaultLog")) {
            try ExportFormat.metadata(line: line)
        }
    }
}
