import ArgumentParser
import BitwardenEmulator
import Dispatch
import Foundation
import Logging
import Synchronization
import VaultCrypto

extension EmulatorFlavor: ExpressibleByArgument {}

/// `vaultlog serve`: runs the Bitwarden-compatible emulator on loopback until interrupted.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run a Bitwarden-compatible server emulator on loopback (for demos and tests).",
        discussion: """
            Serves the self-hosted layout (BASE/api, BASE/identity) with in-memory state. Point a \
            Bitwarden client at the printed URL as a self-hosted server. Stop with Ctrl-C (SIGINT) \
            or SIGTERM; with --state the vault is saved to the file on exit and loaded at start. \
            Fault injection: pass --admin-token and use the /admin routes (Docs/Emulator.md).
            """
    )

    @Option(help: "Address to listen on. Only loopback addresses are sensible: the emulator has no TLS.")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on; 0 picks a free port (printed at start).")
    var port = 0

    @Option(name: .customLong("account"), help: ArgumentHelp(
        "Create an account at start (repeatable). Skipped if the state file already has it.", valueName: "email:password"))
    var accounts: [String] = []

    @Option(help: "PBKDF2 iterations for --account (5000 to 2000000; Bitwarden's default is 600000).")
    var iterations = 600_000

    @Option(help: "Which server to imitate: bitwarden or vaultwarden.")
    var flavor: EmulatorFlavor = .bitwarden

    @Option(help: ArgumentHelp("Latency added to every request, in milliseconds.", valueName: "ms"))
    var latency = 0

    @Option(help: ArgumentHelp("Extra random latency of up to this many milliseconds.", valueName: "ms"))
    var jitter = 0

    @Option(help: ArgumentHelp("Load the vault from this JSON file if it exists; save it there on exit.", valueName: "file"))
    var state: String?

    @Option(help: ArgumentHelp("Enable the /admin routes; clients send this token in X-Admin-Token.", valueName: "token"))
    var adminToken: String?

    @Option(help: ArgumentHelp("Seed ids, keys and jitter for a reproducible run (NOT secure; test vaults only).", valueName: "n"))
    var seed: UInt64?

    @Flag(help: "Print the start-up summary as JSON.")
    var json = false

    @Flag(help: "Log every request and fault (debug level) to standard error.")
    var verbose = false

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be between 0 and 65535, got \(port)") }
        guard (5000...2_000_000).contains(iterations) else {
            throw ValidationError("--iterations must be between 5000 and 2000000, got \(iterations)")
        }
        guard latency >= 0, jitter >= 0 else { throw ValidationError("--latency and --jitter must not be negative") }
        for account in accounts {
            guard let colon = account.firstIndex(of: ":"), colon != account.startIndex,
                  account.index(after: colon) != account.endIndex else {
                throw ValidationError("--account expects EMAIL:PASSWORD, got '\(account)'")
            }
        }
        if let adminToken, adminToken.count < 8 {
            throw ValidationError("--admin-token must be at least 8 characters")
        }
    }

    func run() async throws {
        var logger = Logger(label: "vaultlog.emulator")
        logger.logLevel = verbose ? .debug : .warning
        let configuration = EmulatorConfiguration(
            flavor: flavor,
            random: seed.map { SeededRandomSource(seed: $0) } ?? SystemRandomSource(),
            adminToken: adminToken,
            logger: logger)
        let emulator: BitwardenEmulator
        if let state, FileManager.default.fileExists(atPath: state) {
            emulator = try BitwardenEmulator.load(from: state, configuration: configuration)
        } else {
            emulator = BitwardenEmulator(configuration: configuration)
        }
        for account in accounts {
            let colon = account.firstIndex(of: ":")!
            let email = String(account[..<colon])
            guard emulator.account(email: email) == nil else { continue }
            try emulator.createAccount(email: email, password: String(account[account.index(after: colon)...]), iterations: iterations)
        }
        if latency > 0 || jitter > 0 {
            emulator.faults.setLatency(Double(latency) / 1000, jitter: Double(jitter) / 1000)
        }

        let signals = SignalWaiter([SIGINT, SIGTERM])
        let url = try await emulator.start(host: host, port: port)
        printSummary(url: url, emulator: emulator)
        // A script reading the URL through a pipe must see it now, not at exit.
        fflush(nil)   // every C stream, stdout included (naming `stdout` is not concurrency-safe)

        let received = await signals.wait()
        await emulator.stop()
        if let state {
            try emulator.save(to: state)
            FileHandle.standardError.write(Data("saved the vault to \(state)\n".utf8))
        }
        FileHandle.standardError.write(Data("stopped (signal \(received))\n".utf8))
    }

    private func printSummary(url: URL, emulator: BitwardenEmulator) {
        let accounts = emulator.accounts
        if json {
            let summary: [String: Any] = [
                "url": url.absoluteString, "api": url.appendingPathComponent("api").absoluteString,
                "identity": url.appendingPathComponent("identity").absoluteString, "flavor": flavor.rawValue,
                "admin": adminToken != nil,
                "accounts": accounts.map { ["email": $0.email, "userId": $0.userId] },
            ]
            let data = (try? JSONSerialization.data(withJSONObject: summary, options: [.sortedKeys])) ?? Data()
            print(String(decoding: data, as: UTF8.self))
        } else {
            print("Bitwarden emulator (\(flavor)) listening on \(url.absoluteString)")
            print("  api:      \(url.appendingPathComponent("api").absoluteString)")
            print("  identity: \(url.appendingPathComponent("identity").absoluteString)")
            for account in accounts { print("  account:  \(account.email) (\(account.userId))") }
            if adminToken != nil { print("  admin:    \(url.absoluteString)/admin/faults (header X-Admin-Token)") }
            print("Press Ctrl-C to stop.")
        }
        fflush(nil)   // flush stdout for scripts that read the URL
    }
}

/// Waits for the first of some signals (their default action is disabled while waiting).
final class SignalWaiter: @unchecked Sendable {
    // DispatchSource is not Sendable; the sources are only touched in init and kept alive here.
    private var sources: [any DispatchSourceSignal] = []
    private let queue = DispatchQueue(label: "vaultlog.signals")
    private let state = Mutex<(received: Int32?, waiter: CheckedContinuation<Int32, Never>?)>((nil, nil))

    init(_ signals: [Int32]) {
        for number in signals {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { [weak self] in self?.fire(number) }
            source.resume()
            sources.append(source)
        }
    }

    private func fire(_ number: Int32) {
        let waiter = state.withLock { s -> CheckedContinuation<Int32, Never>? in
            guard s.received == nil else { return nil }
            s.received = number
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: number)
    }

    func wait() async -> Int32 {
        await withCheckedContinuation { continuation in
            let already = state.withLock { s -> Int32? in
                if let received = s.received { return received }
                s.waiter = continuation
                return nil
            }
            if let already { continuation.resume(returning: already) }
        }
    }
}
