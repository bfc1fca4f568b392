import ArgumentParser
import BitwardenAPI
import Foundation
@_spi(Tools) import OfflineSync
import Replay
import VaultCrypto

/// `vaultlog demo`: the main job, end to end.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the offline-edit story end to end and explain what the resolver did.",
        discussion: """
        With no options: starts the embedded Bitwarden-compatible emulator on loopback, creates an \
        account, syncs five items, goes offline (the client's transport points at a closed port), \
        edits them (a new item, seven password changes, a trash move, a permanent delete) while \
        "another device" edits two of them, comes back, syncs, and prints what the resolver did: \
        backups made, winners, ids mapped. The store it leaves is yours to inspect; the commands \
        are printed at the end. Exits 1 if any expectation of the story fails.

        With --server URL --email E --password-file F the same story runs against any \
        Bitwarden-compatible server (self-hosted layout URL/api, URL/identity) and an existing \
        account: "another device" is a second login. Items it creates are named "VaultLog demo: …".

        Examples:
          vaultlog demo
          vaultlog demo --dir /tmp/demo-store --record demo-scenario.json
          vaultlog demo --server https://vault.example.com --email me@example.com --password-file pw.txt
        """
    )

    @Option(help: ArgumentHelp("Where to create the store (must not exist yet). Default: a new directory under the temporary directory.",
                               valueName: "dir"))
    var dir: String?

    @Flag(help: "Keep the embedded emulator running after the story (until Ctrl-C), to point a client at it.")
    var keep = false

    @Option(help: ArgumentHelp("Run against this Bitwarden-compatible server instead of the embedded emulator.", valueName: "url"))
    var server: String?

    @Option(help: ArgumentHelp("The account's email (with --server).", valueName: "email"))
    var email: String?

    @Option(name: .customLong("password-file"), help: ArgumentHelp("The account's master password, from this file (with --server).", valueName: "file"))
    var passwordFile: String?

    @Option(help: ArgumentHelp("Also write the run as a replayable scenario fixture to this file (embedded emulator only).", valueName: "file"))
    var record: String?

    @Flag(name: .customLong("insecure-http"), help: "Allow --server over plain http to a host that is not loopback (the master-password hash and tokens cross the network unencrypted).")
    var insecureHTTP = false

    @OptionGroup(title: "Key derivation of the embedded emulator's account (default PBKDF2, 5000 iterations)")
    var kdf: KdfOptions

    func validate() throws {
        if let server {
            guard email != nil, passwordFile != nil else {
                throw ValidationError("--server needs the account: add --email E --password-file F")
            }
            if record != nil { throw ValidationError("--record needs the embedded emulator (its clock makes the scenario replayable); drop --server") }
            if keep { throw ValidationError("--keep keeps the embedded emulator running; it has no meaning with --server") }
            if let url = URL(string: server) {
                var check = BitwardenClientConfiguration.selfHosted(url)
                check.allowInsecureHTTP = insecureHTTP
                guard check.permits(url) else {
                    throw ValidationError("--server \(server) is plain http to another machine: the master-password hash and tokens would cross "
                        + "the network unencrypted. Use https, or add --insecure-http if you accept that")
                }
            }
            if kdf.isSet { throw ValidationError("--kdf and its settings are for the embedded emulator's account; a real server says how its account derives keys") }
        } else if email != nil || passwordFile != nil {
            throw ValidationError("--email and --password-file go with --server; the embedded emulator makes its own account")
        }
        if let dir, FileManager.default.fileExists(atPath: dir) {
            throw ValidationError("\(dir) already exists: give a new directory, the demo never writes into an existing one")
        }
    }

    func run() async throws {
        // Line by line even into a pipe (`demo | tee`): the story is read as it happens.
        Console.flushEachLine.store(true, ordering: .relaxed)
        let storePath = dir ?? (NSTemporaryDirectory() as NSString).appendingPathComponent("vaultlog-demo-\(UUID().uuidString.prefix(8).lowercased())")
        var runner = ScenarioRunner()
        runner.keepStore = true
        runner.storePath = storePath
        runner.keepServerRunning = keep
        runner.logger = Console.logger("vaultlog.demo")
        if server != nil {
            // A real server answers slowly (the KDF, the network): say what the run waits for.
            runner.onProgress = { Console.error("  \($0)…") }
        }
        let email: String, password: String
        if let server {
            guard let url = URL(string: server), url.scheme == "http" || url.scheme == "https" else {
                throw CLIError.usage("--server \(server) is not an http(s) URL")
            }
            runner.allowInsecureHTTP = insecureHTTP
            runner.server = .remote(url)
            email = self.email!
            do {
                password = try String(contentsOfFile: passwordFile!, encoding: .utf8).trimmingCharacters(in: .newlines)
            } catch {
                throw CLIError.key("cannot read the password file \(passwordFile!)")
            }
        } else {
            email = "demo@vaultlog.example"
            password = "correct horse battery staple \(UUID().uuidString.prefix(6))"
        }
        let accountKdf = server == nil ? try kdf.config(defaultPbkdf2Iterations: 5_000) : nil
        let scenario = DemoStory.scenario(email: email, password: password, exactNames: server == nil, kdf: accountKdf)
        Console.error(server == nil ? "Starting the embedded Bitwarden-compatible emulator on 127.0.0.1 (account key derivation: \(accountKdf ?? .default))…"
                                    : "Running against \(server!)…")

        let outcome: ScenarioOutcome
        do {
            outcome = try await runner.run(scenario)
        } catch {
            // The run never finished its story: the half-made store is of no use, and the
            // directory was the demo's own (it refuses an existing one).
            try? FileManager.default.removeItem(atPath: storePath)
            throw CLIError.classify(error, storePath: storePath)
        }

        // Tell the story from the log the run left.
        let store = try VaultLogStore(path: storePath)
        defer { store.close() }
        let userId = try store.unlockBlocking(email: email, masterPassword: password)
        let userKey = try store.userKey(userId: userId)
        Console.out("VaultLog demo — \(server == nil ? "embedded emulator" : server!), account \(email)")
        Console.out("Synced 5 items, went offline, edited, came back and synced. What the resolver did:")
        for line in try DemoStory.narrate(outcome, store: store, userKey: userKey) { Console.out(line) }
        let pending = try store.pendingCount(userId: userId)
        Console.out("Pending now: \(pending). Events in the log: \(try store.log.eventCount()).")

        if let record {
            var recorded = scenario
            recorded.expect = outcome.actual
            recorded.expect.deadLetters = nil
            do {
                // The scenario holds the account's master password: owner-only.
                try SecretFile.write(Array(recorded.encoded()), to: record)
            } catch {
                throw CLIError.storage("cannot write the scenario to \(record): \(error)")
            }
            Console.out("Recorded the run as a scenario: \(record) (replay it with: \(Console.selfCommand) replay \(Console.shellQuoted(record)))")
        }

        let passwordPath = storePath + "-password.txt"
        if server == nil { try? SecretFile.write(Array(password.utf8), to: passwordPath) }
        let q = Console.shellQuoted
        let keyArgs = "--email \(q(email)) --password-file \(q(server == nil ? passwordPath : passwordFile!))"
        let bank = outcome.itemIds["bank"]?.last ?? "ITEM"
        let vaultlog = Console.selfCommand
        let directory = q(storePath)
        Console.out("")
        Console.out("The log is in \(storePath). Inspect it (each line runs as printed):")
        Console.out("  \(vaultlog) info \(directory)")
        Console.out("  \(vaultlog) history \(directory) \(bank) \(keyArgs)")
        Console.out("  \(vaultlog) events \(directory) \(keyArgs)")
        Console.out("  \(vaultlog) pending \(directory) --at 20 \(keyArgs)")
        Console.out("  \(vaultlog) verify \(directory) \(keyArgs)")

        if !outcome.passed {
            Console.error("The story did not go as expected:")
            for line in outcome.mismatches { Console.error("  \(line)") }
            throw ExitCode(ExitStatus.problemsFound.rawValue)
        }
        Console.out("Every expectation of the story held: nothing lost, nothing pending, backups where they belong.")
        if keep, outcome.runningServer != nil, let url = outcome.serverURL {
            Console.out("")
            Console.out("The emulator keeps running at \(url) (account \(email), password in \(passwordPath)); Ctrl-C stops it.")
            while true { try await Task.sleep(for: .seconds(3600)) }
        }
    }
}
