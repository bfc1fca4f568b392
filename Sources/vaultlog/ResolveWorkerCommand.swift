import ArgumentParser
import BitwardenAPI
import BitwardenAPINIO
import Foundation
@_spi(Tools) import OfflineSync
import Replay
import VaultLogTesting

/// `vaultlog resolve-worker prepare|resolve`: the child processes of the resolver kill test
/// (`Docs/Reliability.md`, `Tests/CLITests/ResolverKillTests.swift`). `prepare` makes a store
/// with a seeded mixed offline workload against a running server (`vaultlog serve`);
/// `resolve` resolves it and syncs, printing each server side effect the moment it succeeds.
/// The parent SIGKILLs `resolve` at random moments, runs it again until it exits 0, and checks
/// the server against the simulation's invariants. Hidden from `--help`: a tool for tests, not for users.
struct ResolveWorker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resolve-worker",
        abstract: "Prepare an offline workload, or resolve it against a server (resolver kill-test child).",
        shouldDisplay: false,
        subcommands: [Prepare.self, Resolve.self]
    )

    /// The server and the account both modes work with.
    struct Account: ParsableArguments {
        @Option(help: ArgumentHelp("The server's base URL (self-hosted layout: URL/api, URL/identity).", valueName: "url"))
        var server: String

        @Option(help: "The account's email.")
        var email: String

        @Option(name: .customLong("password-file"), help: ArgumentHelp("The account's master password, from this file.", valueName: "file"))
        var passwordFile: String

        func url() throws -> URL {
            guard let url = URL(string: server), url.scheme == "http" || url.scheme == "https" else {
                throw CLIError.usage("--server \(server) is not an http(s) URL")
            }
            return url
        }

        func password() throws -> String {
            guard let text = try? String(contentsOfFile: passwordFile, encoding: .utf8) else {
                throw CLIError.usage("cannot read the password file \(passwordFile)")
            }
            return text.trimmingCharacters(in: .newlines)
        }
    }

    /// The file `prepare` writes and the kill test reads: who the user is and what the user
    /// and the other device did (``Simulation/check(journal:pending:server:)``'s input).
    struct PreparedWorkload: Codable {
        var userId: String
        var pending: Int
        var journal: [ScenarioJournalEntry]
    }

    /// A line on stdout, written at once (no buffering): the parent may kill us right after.
    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    struct Prepare: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a store with a seeded offline workload (Simulation.offlineWorkload) against a running server.")

        @Argument(help: ArgumentHelp("The store directory to create (must not exist).", valueName: "dir"))
        var directory: String

        @OptionGroup var account: Account

        @Option(help: "Seed of the workload.")
        var seed: UInt64 = 1

        @Option(help: "Items on the server before the device goes offline.")
        var items = 10

        @Option(help: "Random steps of the workload (a password burst counts as one).")
        var operations = 40

        @Option(help: ArgumentHelp("Write the user id, pending count and journal here (JSON).", valueName: "file"))
        var journal: String

        func validate() throws {
            if FileManager.default.fileExists(atPath: directory) { throw ValidationError("\(directory) already exists") }
            guard items >= 0, operations >= 0 else { throw ValidationError("--items and --operations must not be negative") }
        }

        func run() async throws {
            try await reportingErrorsAsync(storePath: directory) {
                var runner = ScenarioRunner()
                runner.server = .remote(try account.url())
                runner.keepStore = true
                runner.storePath = directory
                runner.logger = Console.logger("vaultlog.prepare")
                let user = ScenarioUser(ref: "u1", email: account.email, password: try account.password())
                let outcome = try await runner.run(Simulation.offlineWorkload(seed: seed, user: user, items: items, operations: operations))
                let prepared = PreparedWorkload(userId: outcome.userIds["u1"] ?? "", pending: outcome.actual.pending?["u1"] ?? 0,
                                                journal: outcome.journal)
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                try encoder.encode(prepared).write(to: URL(fileURLWithPath: journal))
                let offline = outcome.journal.filter(\.offline).count
                let other = outcome.journal.filter { $0.action.isAnotherDevice }.count
                ResolveWorker.say("prepared seed \(seed): \(offline) offline edits, \(other) other-device changes, \(prepared.pending) pending")
            }
        }
    }

    struct Resolve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Resolve the store's pending changes and sync until nothing is pending; exit 1 if something stays pending.")

        @Argument(help: ArgumentHelp("The store directory.", valueName: "dir"))
        var directory: String

        @OptionGroup var account: Account

        @Option(help: "Items resolved at once (ResolverOptions.concurrency).")
        var concurrency = 16

        @Option(help: "Syncs to try; failed items are put back into retries between them.")
        var attempts = 4

        @Option(help: "Milliseconds to wait before resolving after a run that died holding the store's resolution lock (ResolverOptions.settleAfterInterruptedRun; default 2000).")
        var settleMs = 2000

        func validate() throws {
            guard concurrency >= 1 else { throw ValidationError("--concurrency must be at least 1") }
            guard settleMs >= 0 else { throw ValidationError("--settle-ms must be at least 0") }
            guard attempts >= 1 else { throw ValidationError("--attempts must be at least 1") }
        }

        func run() async throws {
            try await reportingErrorsAsync(storePath: directory) {
                guard FileManager.default.fileExists(atPath: (directory as NSString).appendingPathComponent("data.mdb")) else {
                    throw CLIError.storage("\(directory) holds no store (data.mdb); run 'resolve-worker prepare' first")
                }
                var storeOptions = VaultLogStoreOptions()
                storeOptions.logger = Console.logger("vaultlog.resolve")
                storeOptions.eventLog.logger = Console.logger("vaultlog.resolve")
                let store = try VaultLogStore(path: directory, options: storeOptions)
                defer { store.close() }
                let password = try account.password()
                let userId = try store.unlockBlocking(email: account.email, masterPassword: password)
                var clientConfiguration = BitwardenClientConfiguration.selfHosted(try account.url())
                clientConfiguration.transport = AsyncHTTPClientTransport(timeout: clientConfiguration.timeout)
                let client = BitwardenClient(configuration: clientConfiguration)
                _ = try await client.login(email: account.email, password: password)
                ResolveWorker.say("pending \(try store.pendingCount(userId: userId))")

                var options = ResolverOptions()
                options.concurrency = concurrency
                options.settleAfterInterruptedRun = .milliseconds(settleMs)
                // Printed after the effect and before its outcome event: the crash window.
                let observed = EffectObservingServer(client) { effect in ResolveWorker.say("effect \(effect)") }
                let resolver = OfflineSyncResolver(store: store, server: observed, options: options, logger: Console.logger("vaultlog.resolve"))
                let sync = SyncService(store: store, server: client, resolver: resolver, logger: Console.logger("vaultlog.resolve"))
                for _ in 0..<attempts {
                    let result: SyncResult
                    do {
                        result = try await sync.fetchSync(userId: userId, forceSync: true)
                    } catch where error.serverErrorKind == .unavailable {
                        // A failed /api/sync (the test injects 5xx): nothing was replaced; try again.
                        ResolveWorker.say("sync failed: \(error)")
                        continue
                    }
                    let report = result.resolution
                    for item in report?.items ?? [] {
                        if item.outcome == .skipped {
                            ResolveWorker.say("skipped \(item.cipherId) \(item.changeType.rawValue) until \(item.nextRetryAt.map { "\($0)" } ?? "retried"): \(item.error ?? "")")
                        } else if let error = item.error {
                            ResolveWorker.say("failed \(item.cipherId) \(item.changeType.rawValue) \(item.outcome.rawValue): \(error)")
                        } else {
                            ResolveWorker.say("resolved \(item.cipherId) \(item.changeType.rawValue) \(item.outcome.rawValue)")
                        }
                    }
                    if result.isCurrent {
                        ResolveWorker.say("done: nothing pending")
                        return
                    }
                    // Items failed in this run or an earlier, killed one wait for their retry
                    // time; the test's faults are one-shot, so they go back into retries now.
                    try await resolver.retryDeadLetters(userId: userId)
                }
                ResolveWorker.say("still pending: \(try store.pendingCount(userId: userId))")
                throw ExitCode(ExitStatus.problemsFound.rawValue)
            }
        }
    }
}
