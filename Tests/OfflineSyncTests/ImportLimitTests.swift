import EventLog
import Foundation
import Testing
import VaultCrypto
@_spi(Tools) @testable import OfflineSync
import VaultLogTesting
import VaultLogTestSupport

/// What an import refuses before it holds or stores it: a line longer than an export writes
/// (a 300 MB line used to be read whole, taking 918 MB), and sequences no store reaches (an
/// envelope at 2^64 − 1 left the store with no sequence for a new event).
@Suite struct ImportLimitTests {
    /// The fixture's metadata line announcing `events` events up to `lastSequence`.
    func metadata(events: Int, lastSequence: UInt64) throws -> String {
        var object = try JSONSerialization.jsonObject(with: Data(try ExportFormatTests.lines()[0].utf8)) as! [String: Any]
        object["eventCount"] = events
        object["lastSequence"] = lastSequence
        return String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    func write(_ lines: [String], _ dir: TemporaryDirectory, _ name: String) throws -> String {
        let file = dir.file(name)
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: file))
        return file
    }

    func problem(_ body: () throws -> Void) -> ExportFile.Problem? {
        do { try body() } catch let problem as ExportFile.Problem { return problem } catch { Issue.record("\(error)") }
        return nil
    }

    @Test func anEnvelopeLineLongerThanTheLimit_isRefusedNamingTheLine_inBothPasses() throws {
        let dir = TemporaryDirectory("import-long-line", create: true)
        let long = #"{"cipherId":""# + String(repeating: "a", count: ExportFile.maximumEnvelopeLineBytes + 1) + #""}"#
        let file = try write([try metadata(events: 1, lastSequence: 1), long], dir, "long.jsonl")
        let checked = problem { _ = try ExportFile(path: file) }
        #expect(checked?.line == 2 && checked?.reason.contains("longer than 16 MiB") == true, "\(String(describing: checked))")

        let store = try VaultLogStore(path: dir.file("store"))
        defer { store.close() }
        let export = try ExportFile(path: file, checkingEveryLine: false)
        let single = problem { try store.importEvents(from: export) }
        #expect(single?.line == 2 && single?.reason.contains("longer than") == true, "\(String(describing: single))")
        #expect(try store.log.eventCount() == 0 && store.storedAccounts().isEmpty, "nothing of a refused file is stored")
    }

    /// Lines of every length around the reader's 64 KiB blocks, with and without `\r`, and a
    /// last line without a line end, read back exactly.
    @Test func linesAcrossBlockBoundaries_readBackExactly() throws {
        let dir = TemporaryDirectory("import-blocks", create: true)
        var random = SplitMix64(seed: 41)
        var expected: [String] = []
        var text = ""
        for n in 0..<60 {
            let length = n < 20 ? (1 << 16) - 10 + n : Int(random.next() % 200_000)
            let line = String(repeating: Character(UnicodeScalar(UInt8(97 + n % 26))), count: length)
            expected.append(line)
            text += line + (n % 3 == 0 ? "\r\n" : "\n")
        }
        text += "last"
        expected.append("last")
        let file = dir.file("blocks.txt")
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        let reader = try #require(ExportLineReader(path: file))
        var read: [String] = []
        while let line = try reader.withNextLine(limit: 1 << 20, path: file, { String(decoding: $0, as: UTF8.self) }) { read.append(line) }
        #expect(read.count == expected.count)
        #expect(read == expected)
        #expect(reader.lineNumber == expected.count)
    }

    @Test func aSequenceBeyondTheLimit_isRefused_andSoIsSuchALastSequence() throws {
        let dir = TemporaryDirectory("import-sequence", create: true)
        let key = SealingKey(userKey: SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 5)))
        let high = UInt64.max
        let header = EventHeader(sequence: high, userId: "user-a", cipherId: "c-1", eventType: 1, recordedAtMillis: 0,
                                 previousMAC: Envelope.chainStart)
        let envelope = try Envelope(bytes: try Envelope.seal(header: header, body: Array("{}".utf8), key: key,
                                                             iv: ArraySlice(repeating: 7, count: 16)))
        let line = try ExportFormat.encode(ExportFormat.EnvelopeLine(envelope))
        let file = try write([try metadata(events: 1, lastSequence: high), line], dir, "high.jsonl")
        let atLine = problem { _ = try ExportFile(path: file) }
        #expect(atLine?.line == 2 && atLine?.reason.contains("beyond") == true, "\(String(describing: atLine))")

        let empty = try write([try metadata(events: 0, lastSequence: high)], dir, "mark.jsonl")
        let atMetadata = problem { _ = try ExportFile(path: empty) }
        #expect(atMetadata?.line == 1 && atMetadata?.reason.contains("last sequence") == true, "\(String(describing: atMetadata))")
    }
}
