import Dispatch
import Synchronization
import UnixSignals

/// Ctrl-C (SIGINT) and SIGTERM during long work, as a flag the work checks between chunks
/// (swift-service-lifecycle's `UnixSignalsSequence` traps the signals). The command then stops
/// through its normal error path, so what it was writing is removed (an export's `FILE.partial`,
/// an import's new store) instead of the process dying mid-write, and it exits 130.
final class Interruption: Sendable {
    private let received: Received

    private final class Received: Sendable {
        let signal = Mutex<UnixSignal?>(nil)
    }

    /// Traps SIGINT and SIGTERM; returns once they are trapped.
    init() {
        let received = Received()
        let trapped = DispatchSemaphore(value: 0)
        Task.detached {
            let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
            trapped.signal()
            for await signal in signals {
                received.signal.withLock { $0 = $0 ?? signal }
            }
        }
        trapped.wait()
        self.received = received
    }

    /// Throws ``CLIError/interrupted(_:)`` once a signal has arrived.
    func check() throws {
        if let signal = received.signal.withLock({ $0 }) { throw CLIError.interrupted(signal) }
    }
}

extension CLIError {
    /// The user stopped the command (Ctrl-C) or it was told to terminate.
    static func interrupted(_ signal: UnixSignal) -> CLIError {
        CLIError(.interrupted, "stopped by \(signal); nothing was left behind")
    }
}
