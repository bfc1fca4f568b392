import Foundation
import Logging
import Synchronization

/// Where the CLI writes: results on stdout, notes, errors and progress on stderr.
enum Console {
    /// One line of results.
    static func out(_ line: String) {
        print(line)
        if flushEachLine.load(ordering: .relaxed) { fflush(nil) }
    }

    /// Set by commands whose output is read as it happens (the demo, even through `| tee`):
    /// each line is flushed at once instead of when the buffer fills.
    static let flushEachLine = Atomic<Bool>(false)

    /// One line for the person at the terminal (notes, warnings, errors), never mixed into results.
    static func error(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// A note about what the output does or does not contain.
    static func note(_ line: String) {
        error("note: \(line)")
    }

    /// Whether stderr is a terminal: progress is shown only then, so logs and pipes stay clean.
    static var stderrIsTerminal: Bool { isatty(2) == 1 }

    /// This binary as a command a user can paste: its absolute path when it was started by a
    /// path (`make demo` runs it from `.build/debug`, which is not on the PATH), its bare name
    /// when the shell found it on the PATH.
    static var selfCommand: String {
        let first = CommandLine.arguments.first ?? "vaultlog"
        guard first.contains("/") else { return first }
        return shellQuoted(URL(fileURLWithPath: first).standardizedFileURL.path)
    }

    /// `text` as one shell word (single-quoted when it holds anything but safe characters).
    static func shellQuoted(_ text: String) -> String {
        let safe = text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_./:=@+,%".contains($0)) }
        if safe && !text.isEmpty { return text }
        return "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// One JSON value on one line (JSON Lines), keys sorted so output is stable.
    static func json(_ value: some Encodable) throws {
        out(try jsonText(value, pretty: false))
    }

    /// One JSON document, indented for people who read it too.
    static func jsonDocument(_ value: some Encodable) throws {
        out(try jsonText(value, pretty: true))
    }

    static func jsonText(_ value: some Encodable, pretty: Bool) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted] : [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// Library diagnostics (warnings and worse) go to stderr, never to stdout.
    static func logger(_ label: String) -> Logger {
        var logger = Logger(label: label) { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .warning
        return logger
    }
}

/// A progress line on stderr for long work, shown only when stderr is a terminal and
/// redrawn at most every 1/10 s.
final class ProgressLine {
    private let label: String
    private let unit: String
    private let enabled: Bool
    private let logEvery: TimeInterval?
    private let started = Date()
    private var lastDraw = Date.distantPast
    private var drawn = false

    /// On a terminal the line redraws itself; elsewhere (a log file, CI) nothing is printed
    /// unless `logEvery` is given, and then one plain line every `logEvery` seconds.
    init(_ label: String, unit: String = "events", enabled: Bool = Console.stderrIsTerminal, logEvery: TimeInterval? = nil) {
        self.label = label
        self.unit = unit
        self.enabled = enabled
        self.logEvery = enabled ? nil : logEvery
        if logEvery != nil, !enabled { lastDraw = started }
    }

    func update(_ done: Int, of total: Int) {
        let now = Date()
        let percent = total > 0 ? done * 100 / total : 100
        if let logEvery {
            guard now.timeIntervalSince(lastDraw) >= logEvery else { return }
            lastDraw = now
            let elapsed = Int(now.timeIntervalSince(started))
            FileHandle.standardError.write(Data("\(label) \(done)/\(total) \(unit) (\(percent)%), \(elapsed) s\n".utf8))
            return
        }
        guard enabled else { return }
        guard done >= total || now.timeIntervalSince(lastDraw) >= 0.1 else { return }
        lastDraw = now
        drawn = true
        FileHandle.standardError.write(Data("\r\(label) \(done)/\(total) \(unit) (\(percent)%)\u{1B}[K".utf8))
    }

    /// Ends the line so later output starts on a fresh one.
    func finish() {
        guard enabled, drawn else { return }
        FileHandle.standardError.write(Data("\n".utf8))
    }
}
