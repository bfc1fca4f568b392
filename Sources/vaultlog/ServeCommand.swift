import ArgumentParser
import BitwardenAPI
import BitwardenEmulator
import Dispatch
import Foundation
import Logging
import Synchronization
import UnixSignals
import VaultCrypto
import VaultLogTesting

extension EmulatorFlavor: ExpressibleByArgument {}

/// `vaultlog serve`: runs the Bitwarden-compatible emulator on loopback until interrupted.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run a Bitwarden-compatible server emulator on loopback (for demos and tests).",
        discussion: """
            Serves the self-hosted layout (BASE/api, BASE/identity) with in-memory state. Point a \
            Bitwarden client at the printed URL as a self-hosted server. Stop with Ctrl-C (SIGINT) \
            or SIGTERM; with --state the vault is saved to the file (mode 0600) on exit and loaded at \
            start. Fault injection: give an admin token (--admin-token-file or VAULTLOG_ADMIN_TOKEN) \
            and use the /admin routes (Docs/Emulator.md).

            Secrets never go on the command line, where `ps` shows them to every user: the accounts' \
            master password comes from --password-file, the VAULTLOG_PASSWORD environment variable, \
            or a prompt (no echo) when stdin is a terminal.

            Examples:
              VAULTLOG_PASSWORD=pw vaultlog serve --account alice@example.com --iterations 5000
              vaultlog serve --account bob@example.com --password-file pw.txt --kdf argon2id --memory 32
            """
    )

    @Option(help: "Address to listen on: a loopback address (127.0.0.0/8, ::1, localhost). Another needs --allow-remote.")
    var host = "127.0.0.1"

    @Flag(help: ArgumentHelp("Listen on an address other machines can reach. The emulator speaks plain HTTP: "
        + "master-password hashes, tokens and the /admin token cross the network readable by anyone on it."))
    var allowRemote = false

    @Option(help: "Port to listen on; 0 picks a free port (printed at start).")
    var port = 0

    @Option(name: .customLong("account"), help: ArgumentHelp(
        "Create an account with this email at start (repeatable); skipped if the state file already has it. "
            + "The master password comes from --password-file, VAULTLOG_PASSWORD or a prompt.", valueName: "email"))
    var accounts: [String] = []

    @Option(name: .customLong("password-file"), help: ArgumentHelp(
        "The master password of the --account accounts, from this file (one trailing newline is ignored).", valueName: "file"))
    var passwordFile: String?

    @OptionGroup(title: "Key derivation of the --account accounts")
    var kdf: KdfOptions

    @Option(help: "Which server to imitate: bitwarden or vaultwarden.")
    var flavor: EmulatorFlavor = .bitwarden

    @Option(help: ArgumentHelp("Latency added to every request, in milliseconds.", valueName: "ms"))
    var latency = 0

    @Option(help: ArgumentHelp("Extra random latency of up to this many milliseconds.", valueName: "ms"))
    var jitter = 0

    @Option(help: ArgumentHelp("Load the vault from this JSON file if it exists; save it there on exit.", valueName: "file"))
    var state: String?

    @Option(name: .customLong("admin-token-file"), help: ArgumentHelp(
        "Enable the /admin routes with the token in this file (at least 8 characters); clients send it in X-Admin-Token. "
            + "VAULTLOG_ADMIN_TOKEN does the same.", valueName: "file"))
    var adminTokenFile: String?

    @Option(help: ArgumentHelp("Seed ids, keys and jitter for a reproducible run (NOT secure; test vaults only).", valueName: "n"))
    var seed: UInt64?

    @Flag(help: "Print the start-up summary as JSON.")
    var json = false

    @Flag(help: "Log every request and fault (debug level) to standard error.")
    var verbose = false

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be between 0 and 65535, got \(port)") }
        guard allowRemote || BitwardenClientConfiguration.isLoopback(host: host) else {
            throw ValidationError("--host \(host) is not a loopback address: other machines could reach the emulator, which speaks "
                + "plain HTTP (passwords' hashes and tokens readable on the network); listen on 127.0.0.1, or add --allow-remote on a network you trust")
        }
        guard latency >= 0, jitter >= 0 else { throw ValidationError("--latency and --jitter must not be negative") }
        guard latency <= 600_000, jitter <= 600_000 else { throw ValidationError("--latency and --jitter must be at most 600000 ms") }
        for account in accounts where account.contains(":") {
            throw ValidationError("--account takes an email only (got '\(account.split(separator: ":").first ?? "")…'): "
                + "a password on the command line is visible to every user in ps; give it with --password-file or VAULTLOG_PASSWORD")
        }
        if !accounts.isEmpty, passwordFile == nil, Secrets.environment("VAULTLOG_PASSWORD") == nil, !Secrets.stdinIsTerminal {
            throw ValidationError("--account needs the master password: add --password-file FILE or set VAULTLOG_PASSWORD")
        }
        if accounts.isEmpty, passwordFile != nil { throw ValidationError("--password-file is the password of --account: add --account EMAIL") }
    }

    /// The admin token from --admin-token-file or VAULTLOG_ADMIN_TOKEN; nil when neither is given.
    private func adminToken() throws -> String? {
        let token: String
        if let adminTokenFile {
            token = try Secrets.readFile(adminTokenFile, what: "admin token")
        } else if let value = Secrets.environment("VAULTLOG_ADMIN_TOKEN") {
            token = value
        } else {
            return nil
        }
        guard token.count >= 8 else { throw CLIError.usage("the admin token must be at least 8 characters") }
        return token
    }

    /// The master password of the --account accounts.
    private func accountPassword() throws -> String {
        if let passwordFile { return try Secrets.readFile(passwordFile, what: "master password") }
        if let value = Secrets.environment("VAULTLOG_PASSWORD") { return value }
        return try Secrets.prompt("Master password for \(accounts.joined(separator: ", ")): ", what: "master password")
    }

    func run() async throws {
        try await reportingErrorsAsync(storePath: nil) { try await serve() }
    }

    private func serve() async throws {
        let adminToken = try adminToken()
        let kdfConfig = try kdf.config()
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
        let newAccounts = accounts.filter { emulator.account(email: $0) == nil }
        if !newAccounts.isEmpty {
            let password = try accountPassword()
            for email in newAccounts { try emulator.createAccount(email: email, password: password, kdf: kdfConfig) }
        }
        if latency > 0 || jitter > 0 {
            emulator.faults.setLatency(Double(latency) / 1000, jitter: Double(jitter) / 1000)
        }

        // Trapped before the server starts: a Ctrl-C from now on stops it cleanly.
        var signals = await UnixSignalsSequence(trapping: .sigint, .sigterm).makeAsyncIterator()
        let url = try await emulator.start(host: host, port: port)
        printSummary(url: url, emulator: emulator, admin: adminToken != nil)
        // A script reading the URL through a pipe must see it now, not at exit.
        fflush(nil)   // every C stream, stdout included (naming `stdout` is not concurrency-safe)

        let received = await signals.next()
        await emulator.stop()
        if let state {
            try emulator.save(to: state)
            FileHandle.standardError.write(Data("saved the vault to \(state)\n".utf8))
        }
        FileHandle.standardError.write(Data("stopped (\(received.map { "\($0)" } ?? "signal"))\n".utf8))
    }

    private func printSummary(url: URL, emulator: BitwardenEmulator, admin: Bool) {
        let accounts = emulator.accounts
        if json {
            let summary: [String: Any] = [
                "url": url.absoluteString, "api": url.appendingPathComponent("api").absoluteString,
                "identity": url.appendingPathComponent("identity").absoluteString, "flavor": flavor.rawValue,
                "admin": admin,
                "accounts": accounts.map { ["email": $0.email, "userId": $0.userId] },
            ]
            let data = (try? JSONSerialization.data(withJSONObject: summary, options: [.sortedKeys])) ?? Data()
            print(String(decoding: data, as: UTF8.self))
        } else {
            print("Bitwarden emulator (\(flavor)) listening on \(url.absoluteString)")
            print("  api:      \(url.appendingPathComponent("api").absoluteString)")
            print("  identity: \(url.appendingPathComponent("identity").absoluteString)")
            for account in accounts { print("  account:  \(account.email) (\(account.userId))") }
            if admin { print("  admin:    \(url.absoluteString)/admin/faults (header X-Admin-Token)") }
            print("Press Ctrl-C to stop.")
        }
        fflush(nil)   // flush stdout for scripts that read the URL
    }
}
