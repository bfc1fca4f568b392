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

    /// Runs `body` with terminal echo off when stdin is a terminal (restored afterwards). While
    /// echo is off, SIGINT and SIGTERM first restore the terminal and then end the process as
    /// they would have (their default action): Ctrl-C at the prompt must not leave the shell
    /// with echo off.
    private static func withEchoOff<T>(_ body: () -> T) -> T {
        var saved = termios()
        guard stdinIsTerminal, tcgetattr(0, &saved) == 0 else { return body() }
        savedTerminal.pointee = saved
        var previous = (interrupt: sigaction(), terminate: sigaction())
        _ = sigaction(SIGINT, nil, &previous.interrupt)
        _ = sigaction(SIGTERM, nil, &previous.terminate)
        _ = signal(SIGINT, restoreTerminalAndReraise)
        _ = signal(SIGTERM, restoreTerminalAndReraise)
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        _ = tcsetattr(0, TCSAFLUSH, &quiet)
        defer {
            _ = tcsetattr(0, TCSAFLUSH, &saved)
            _ = sigaction(SIGINT, &previous.interrupt, nil)
            _ = sigaction(SIGTERM, &previous.terminate, nil)
        }
        return body()
    }
}

/// The terminal settings from before echo went off, for ``restoreTerminalAndReraise(_:)``:
/// written before the handler is installed, so the handler only reads it.
nonisolated(unsafe) private let savedTerminal = UnsafeMutablePointer<termios>.allocate(capacity: 1)

/// The handler of SIGINT and SIGTERM while echo is off. Only async-signal-safe calls: puts the
/// terminal back (discarding a half-typed secret, so the shell does not read it), restores the
/// default action and raises the signal again, which ends the process once the handler returns.
private func restoreTerminalAndReraise(_ signalNumber: Int32) {
    _ = tcsetattr(0, TCSAFLUSH, savedTerminal)
    _ = signal(signalNumber, SIG_DFL)
    _ = raise(signalNumber)
}
