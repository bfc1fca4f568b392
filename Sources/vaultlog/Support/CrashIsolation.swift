import ArgumentParser
import Foundation

/// A read of a store that may be damaged, done by a child process (this binary again) so that a
/// crash ends the child, not the command. LMDB trusts its page headers: damaged ones make it
/// read outside its map (SIGSEGV, SIGBUS) or fail one of its assertions (SIGABRT). The parent
/// turns such a death into an error a person can act on, with exit code 4.
///
/// The child runs with `SWIFT_BACKTRACE=enable=no` unless the environment already sets
/// `SWIFT_BACKTRACE`: Swift's crash report would otherwise print the registers with the memory
/// they point at (bytes of the store and of the key) on stdout, and at a terminal wait 30 s for
/// a debugger. Setting the variable yourself brings the report back.
enum CrashIsolation {
    /// The hidden flag that tells the command it is the child and does its work itself.
    static let inThisProcessFlag = "--in-this-process"

    /// The signals a damaged file can cause, by name for the message.
    static let crashSignals: [Int32: String] = [
        SIGSEGV: "SIGSEGV", SIGBUS: "SIGBUS", SIGABRT: "SIGABRT", SIGILL: "SIGILL", SIGFPE: "SIGFPE", SIGTRAP: "SIGTRAP",
    ]

    /// Runs this binary again with the same arguments and ``inThisProcessFlag`` after the
    /// subcommand's name, on the same stdin, stdout and stderr, and ends as it ended: its exit
    /// status (thrown as `ExitCode` when not 0), or, when it died by a crash signal, a
    /// ``CLIError/storage(_:)`` naming `data.mdb` in `storePath`. Any other signal (Ctrl-C,
    /// SIGTERM, SIGKILL) ends this process too, as it would have without the child.
    static func runInChild(storePath: String) throws {
        let executable = Bundle.main.executableURL ?? URL(fileURLWithPath: "/proc/self/exe")
        var arguments = Array(CommandLine.arguments.dropFirst())
        arguments.insert(inThisProcessFlag, at: min(1, arguments.count))
        var environment = ProcessInfo.processInfo.environment
        if environment["SWIFT_BACKTRACE"] == nil { environment["SWIFT_BACKTRACE"] = "enable=no" }
        let child = Process()
        child.executableURL = executable
        child.arguments = arguments
        child.environment = environment
        do {
            try child.run()
        } catch {
            throw CLIError.storage("cannot start \(executable.path) to read the store (\(error)); check that the binary is still in place")
        }
        child.waitUntilExit()
        let status = child.terminationStatus
        guard child.terminationReason == .uncaughtSignal else {
            if status != 0 { throw ExitCode(status) }
            return
        }
        guard let name = crashSignals[status] else {
            _ = signal(status, SIG_DFL)
            _ = raise(status)
            throw ExitCode(128 + status)
        }
        if Console.stderrIsTerminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }   // the child's progress line
        let dataFile = (storePath as NSString).appendingPathComponent("data.mdb")
        throw CLIError.storage("\(dataFile) is damaged in a way LMDB cannot read (the reading process crashed with \(name)); "
                               + "restore the store from a backup or an export")
    }
}
