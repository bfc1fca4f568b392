import Foundation

/// What a crash of `vaultlog` prints: one line, never memory. A crash here is nearly always
/// LMDB reading a damaged `data.mdb` (it trusts its page headers); Swift's own crash report
/// would print the registers and the memory they point at, which may hold bytes of the store
/// and of keys, and at a terminal wait for a debugger. With `SWIFT_BACKTRACE` set in the
/// environment the handlers are not installed and Swift's report comes back (to debug).
///
/// The handler runs in a signal context: it only writes a message prepared before and calls
/// `_exit` (exit code 4, a damaged store, as `verify` reports one).
enum CrashReport {
    /// The signals a damaged file (or a bug) crashes with.
    static let signals: [(Int32, String)] = [
        (SIGSEGV, "SIGSEGV"), (SIGBUS, "SIGBUS"), (SIGABRT, "SIGABRT"), (SIGILL, "SIGILL"), (SIGFPE, "SIGFPE"), (SIGTRAP, "SIGTRAP"),
    ]

    /// Per signal number, the message (C strings made before any handler runs, never freed).
    nonisolated(unsafe) static let messages: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?> = {
        let table = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: 65)
        table.initialize(repeating: nil, count: 65)
        for (number, name) in signals {
            let text = "\nerror: vaultlog crashed (\(name)), most likely reading a damaged data.mdb: check the store with 'vaultlog verify DIR', "
                + "which reports such damage without crashing; a crash report (SWIFT_BACKTRACE=enable=yes) prints memory, which may hold secrets\n"
            table[Int(number)] = strdup(text)
        }
        return table
    }()

    /// Installs the handlers, unless the environment sets `SWIFT_BACKTRACE`.
    static func install() {
        guard ProcessInfo.processInfo.environment["SWIFT_BACKTRACE"] == nil else { return }
        _ = messages
        for (number, _) in signals {
            var action = sigaction()
            #if os(Linux)
            action.__sigaction_handler.sa_handler = { signal in CrashReport.report(signal) }
            #else
            action.__sigaction_u.__sa_handler = { signal in CrashReport.report(signal) }
            #endif
            sigemptyset(&action.sa_mask)
            action.sa_flags = 0
            sigaction(number, &action, nil)
        }
    }

    private static func report(_ signal: Int32) {
        if signal >= 0, signal < 65, let message = messages[Int(signal)] {
            _ = write(STDERR_FILENO, message, strlen(message))
        }
        _exit(4)
    }
}
