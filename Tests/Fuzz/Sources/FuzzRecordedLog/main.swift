// Fuzzes the JSON Lines export parser that `vaultlog import` and the replay of recorded logs
// (`Fixtures/logs/*.jsonl`) use: the metadata line, then envelope lines checked against their
// envelopes' headers, plus the `.expect.json` expectation decoder. Any bytes must parse or
// throw, never trap; a parsed envelope line must write back to a line that parses the same.
import CFuzzerDriver
import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import Replay

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let raw = UnsafeRawBufferPointer(start: data, count: size)
    // Lines as an import reads them: split at "\n", a trailing "\r" dropped.
    var lines = raw.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { line in
        String(decoding: line.last == UInt8(ascii: "\r") ? line.dropLast() : line[...], as: UTF8.self)
    }
    if lines.last == "" { lines.removeLast() }
    if let first = lines.first {
        _ = try? ExportFormat.metadata(line: first)
    }
    for line in lines.dropFirst() {
        guard let envelope = try? ExportFormat.envelope(line: line) else { continue }
        guard let written = try? ExportFormat.encode(ExportFormat.EnvelopeLine(envelope)),
              let again = try? ExportFormat.envelope(line: written),
              again.bytes == envelope.bytes, again.header == envelope.header else {
            fatalError("an envelope line does not write back to a line that parses the same")
        }
    }
    _ = try? JSONDecoder().decode(RecordedLog.Expectation.self, from: Data(raw))
    return 0
}

exit(vaultlog_fuzz_main(CommandLine.argc, CommandLine.unsafeArgv))
