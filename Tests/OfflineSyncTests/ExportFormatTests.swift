import EventLog
import Foundation
import VaultCrypto
import VaultModel
import Testing
@_spi(Tools) @testable import OfflineSync
import VaultLogTesting
import VaultLogTestSupport

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

/// The export's hot path (hand-written lines, the flat reader) agrees with the `JSONEncoder` /
/// `JSONDecoder` path byte for byte and error for error, and a whole store survives the trip.
@Suite struct ExportFastPathTests {
    /// Envelopes with every kind of id an export can meet: plain UUIDs, and ids with quotes,
    /// backslashes, slashes, control characters and non-ASCII text.
    static func envelopes() throws -> [Envelope] {
        let dir = TemporaryDirectory("export-ids")
        let log = try EventLogStore(path: dir.path)
        let key = SealingKey(userKey: SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 3)))
        let ids = ["8a1b3c4d-0000-4000-8000-000000000001", #"a"quote"#, #"back\slash"#, "sl/ash", "tab\tnew\nline\u{1}\u{1F}",
                   "caf\u{E9} \u{1F512}", "", "\u{7F}del"]
        var events: [NewEvent] = []
        for (i, id) in ids.enumerated() {
            events.append(NewEvent(userId: ids[(i + 1) % ids.count].isEmpty ? "user" : ids[(i + 1) % ids.count], cipherId: id,
                                   eventType: [1, 2, 3, 4, 100, 101, 999][i % 7], recordedAtMillis: [0, -1, 1_700_000_000_123, .max][i % 4],
                                   body: Array(repeating: UInt8(i), count: i * 50)))
        }
        try log.append(events, key: key)
        var envelopes: [Envelope] = []
        try log.read { reader in try reader.forEachEnvelope(from: 1, to: .max) { envelopes.append($0); return true } }
        return envelopes + (try ExportFormatTests.lines().dropFirst().map { try ExportFormat.envelope(line: $0) })
    }

    @Test func handWrittenLine_isTheBytesJSONEncoderWrites() throws {
        for envelope in try Self.envelopes() {
            var fast: [UInt8] = []
            ExportFormat.appendLine(for: envelope, to: &fast)
            let slow = try ExportFormat.encode(ExportFormat.EnvelopeLine(envelope))
            #expect(String(decoding: fast, as: UTF8.self) == slow)
        }
    }

    @Test func fastReader_givesTheSameEnvelope_forEveryLine_andForOtherSpellingsOfIt() throws {
        for envelope in try Self.envelopes() {
            let line = try ExportFormat.encode(ExportFormat.EnvelopeLine(envelope))
            let spellings = [
                line,
                " { " + line.dropFirst().replacingOccurrences(of: ",", with: " ,\t").replacingOccurrences(of: ":", with: " : "),
                line.replacingOccurrences(of: "/", with: #"\/"#),                  // escaped slashes: strict path
                #"{"zExtra":1,"# + line.dropFirst(),                                // an unknown key: strict path
            ]
            for spelling in spellings {
                let parsed = try Array(spelling.utf8).withUnsafeBytes { try ExportFormat.envelope(lineBytes: $0) }
                #expect(parsed.bytes == envelope.bytes, "\(spelling)")
            }
        }
    }

    @Test func badLines_failWithTheSameReason_onBothPaths() throws {
        let line = try ExportFormatTests.lines()[1]
        let bad = [
            "", "{", "{}", "[]", line + "x", line.replacingOccurrences(of: #""sequence":"#, with: #""sequence":0"#),
            line.replacingOccurrences(of: #""eventType":"#, with: #""eventType":-"#),
            line.replacingOccurrences(of: #""formatVersion":"#, with: #""formatVersion":1000"#),
            line.replacingOccurrences(of: #""userId""#, with: #""user""#),
            line.replacingOccurrences(of: #""envelope":""#, with: #""envelope":"!"#),
            String(line.dropLast()),
        ]
        for text in bad {
            var slow: ExportFormat.LineError?
            do { _ = try ExportFormat.envelope(line: text) } catch { slow = error }
            var fast: ExportFormat.LineError?
            do { _ = try Array(text.utf8).withUnsafeBytes { try ExportFormat.envelope(lineBytes: $0) } } catch { fast = error as? ExportFormat.LineError }
            #expect(slow != nil && fast == slow, "\(text.prefix(80)): \(String(describing: slow)) vs \(String(describing: fast))")
        }
    }

    @Test func wholeStore_exportedAndImported_holdsTheSameEnvelopesAndAccounts_andASecondImportIsRefused() async throws {
        let h = try Harness()
        let account = StoredAccount(userId: h.userId, email: "a@example.com", kdf: .pbkdf2(iterations: 600_000),
                                    protectedUserKey: try EncString("2.kTtIypq9OLzd5iMMbU11pQ==|J4i3hTtGVdg7EZ+AQv/ujg==|QJpSpotQVpIW8j8dR/8l015WJzAIxBaOmrz4Uj/V1JA="))
        try h.store.saveAccount(account)
        // 5,000 items created offline, in batches: more than one 1 MiB chunk and many progress calls.
        let view = try Harness.login("Bank", password: "pw").encrypt(userKey: h.userKey, random: SeededRandomSource(seed: 9))
        for batch in 0..<10 {
            let events = (0..<500).map { i -> VaultLogStore.PlannedEvent in
                var cipher = view
                cipher.id = "item-\(batch)-\(i)"
                return .init(cipherId: cipher.id!, type: .created,
                             body: .operation(OperationBody(cipher: cipher, passwordChanged: false, baseRevisionDate: nil,
                                                            at: BitwardenDate(h.clock.now))))
            }
            try await h.store.append(userId: h.userId, events: events)
        }
        var chunks: [[UInt8]] = []
        var calls: [(Int, Int)] = []
        let written = try h.store.writeExport({ chunks.append(Array($0)) }, progress: { calls.append(($0, $1)) })
        #expect(written == 5000 && chunks.count > 1)
        #expect(calls.last! == (5000, 5000) && calls.dropLast().allSatisfy { $0.0 % 4096 == 0 && $0.1 == 5000 })

        let work = TemporaryDirectory("export-trip")
        try FileManager.default.createDirectory(atPath: work.path, withIntermediateDirectories: true)
        let file = work.path + "/store.jsonl"
        try Data(chunks.joined()).write(to: URL(fileURLWithPath: file))
        let export = try ExportFile(path: file)
        #expect(export.metadata.eventCount == 5000 && export.users == [h.userId])
        let copy = try VaultLogStore(path: work.path + "/copy")
        defer { copy.close() }
        try copy.importEvents(from: export)
        func envelopes(_ store: VaultLogStore) throws -> [[UInt8]] {
            try store.log.read { reader in
                var all: [[UInt8]] = []
                try reader.forEachEnvelope(from: 1, to: .max) { all.append($0.bytes); return true }
                return all
            }
        }
        #expect(try envelopes(copy) == envelopes(h.store))
        #expect(try copy.storedAccounts().map(\.email) == ["a@example.com"])
        #expect(try copy.log.verify(keys: [h.userId: SealingKey(userKey: h.userKey)]).isClean)

        #expect(throws: OfflineSyncError.storeNotEmpty(lastSequence: 5000)) { try copy.importEvents(from: export) }
        #expect(try copy.log.eventCount() == 5000, "a refused import changes nothing")
    }

    /// One pass (the file opened without checking its lines): a bad line in the middle, or a
    /// missing last line, stops the import with the line named and the store left empty.
    @Test func singlePassImport_ofABadFile_namesTheLine_andWritesNothing() throws {
        let work = TemporaryDirectory("export-single-pass")
        try FileManager.default.createDirectory(atPath: work.path, withIntermediateDirectories: true)
        let lines = try ExportFormatTests.lines()
        try #require(lines.count >= 4)
        var damaged = lines
        damaged[2] = damaged[2].replacingOccurrences(of: #""envelope":""#, with: #""envelope":"!"#)
        let cases: [(name: String, text: String, line: Int, reason: String)] = [
            ("damaged", damaged.joined(separator: "\n") + "\n", 3, "not base64"),
            ("truncated", lines.dropLast().joined(separator: "\n") + "\n", lines.count, "truncated"),
            ("reordered", ([lines[0], lines[2], lines[1]] + lines.dropFirst(3)).joined(separator: "\n") + "\n", 3, "is not after"),
        ]
        for (name, text, line, reason) in cases {
            let file = work.path + "/\(name).jsonl"
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            let export = try ExportFile(path: file, checkingEveryLine: false)
            let store = try VaultLogStore(path: work.path + "/\(name)-store")
            defer { store.close() }
            do {
                try store.importEvents(from: export)
                Issue.record("\(name): the import went through")
            } catch let problem as ExportFile.Problem {
                #expect(problem.line == line && problem.reason.contains(reason), "\(name): \(problem)")
            }
            #expect(try store.log.eventCount() == 0, "\(name): a refused import wrote events")
            #expect(try store.storedAccounts().isEmpty, "\(name): a refused import saved accounts")
        }
    }

    @Test func truncatedFile_isAProblemNamingTheLine() throws {
        let work = TemporaryDirectory("export-truncated")
        try FileManager.default.createDirectory(atPath: work.path, withIntermediateDirectories: true)
        let lines = try ExportFormatTests.lines()
        let file = work.path + "/cut.jsonl"
        try (lines.dropLast().joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        #expect(throws: ExportFile.Problem.self) { try ExportFile(path: file) }
        do { _ = try ExportFile(path: file) } catch let problem as ExportFile.Problem {
            #expect(problem.line == lines.count && problem.reason.contains("truncated"), "\(problem)")
        }
        #expect(throws: ExportFile.Problem(path: work.path + "/none", line: nil, reason: "cannot read the file (No such file or directory)")) {
            try ExportFile(path: work.path + "/none")
        }
    }
}
