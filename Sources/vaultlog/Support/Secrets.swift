import Foundation

/// Reading secrets (master passwords, tokens) without putting them on the command line, where
/// every user of the machine can read them in `ps` and `/proc/PID/cmdline`.
enum Secrets {
    /// Whether stdin is a terminal (a person can be prompted).
    static var stdinIsTerminal: Bool { isatty(0) == 1 }

    /// The first line of `path`; one trailing newline (`\n` or `\r\n`) ends the line and is not
    /// part of the secret. `what` names the secret in errors ("master password").
    static func readFile(_ path: String, what: String) throws -> String {
        var text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw CLIError.key("cannot read the \(what) file \(path) (missing, unreadable or not UTF-8)")
        }
        if text.hasSuffix("\n") || text.hasSuffix("\r\n") { text.removeLast() }
        guard !text.isEmpty else { throw CLIError.key("the \(what) in \(path) is empty") }
        return text
    }

    /// One line from stdin. When stdin is a terminal the typing is not echoed.
    static func readStdinLine(what: String, option: String) throws -> String {
        let line = withEchoOff { readLine(strippingNewline: true) }
        guard let line, !line.isEmpty else { throw CLIError.key("\(option): stdin was empty; pipe the \(what) in") }
        return line
    }

    /// Asks the person at the terminal for a secret, without echo; the prompt goes to stderr.
    static func prompt(_ prompt: String, what: String) throws -> String {
        // Echo goes off before the prompt is shown, so nothing typed after it can be echoed.
        let line = withEchoOff { () -> String? in
            FileHandle.standardError.write(Data(prompt.utf8))
            return readLine(strippingNewline: true)
        }
        FileHandle.standardError.write(Data("\n".utf8))
        guard let line, !line.isEmpty else { throw CLIError.key("no \(what) was typed") }
        return line
    }

    /// The value of environment variable `name`, if set and not empty.
    static func environment(_ name: String) -> String? {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else { return nil }
        return value
    }

    /// Runs `body` with terminal echo off when stdin is a terminal (restored afterwards).
    private static func withEchoOff<T>(_ body: () -> T) -> T {
        var saved = termios()
        guard stdinIsTerminal, tcgetattr(0, &saved) == 0 else { return body() }
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        _ = tcsetattr(0, TCSAFLUSH, &quiet)
        defer { _ = tcsetattr(0, TCSAFLUSH, &saved) }
        return body()
    }
}
