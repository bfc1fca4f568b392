import ArgumentParser
import EventLog
import LMDB

/// The `vaultlog` root command. Each subcommand is its own type in its own file; keep this
/// root small. `main()` maps argument-parser's usage errors to exit code 2 (`Docs/CLI.md`).
@main
struct VaultlogCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vaultlog",
        abstract: "VaultLog: the offline-edit log of Bitwarden-compatible vaults. Run the demo, serve the emulator, inspect and check stores, replay fixtures.",
        discussion: """
        Reading commands never change a store and never create one. Bodies are decrypted only when \
        you give a key (--email with --password-file or --password-stdin, or --user-key-file); \
        without one you see headers only. Exit codes: 0 ok, 1 problems found, 2 usage, \
        3 key/authentication, 4 I/O or corrupt store (see Docs/CLI.md).
        """,
        version: VaultlogCommand.versionText,
        subcommands: [Demo.self, ServeCommand.self, ReplayScenarios.self, Simulate.self, Info.self, Events.self, Pending.self, Items.self, History.self, UserKey.self, Verify.self, Compact.self, Upgrade.self, Export.self, Import.self, Decrypt.self, KdfCommand.self, StressWriter.self, ResolveWorker.self]
    )

    /// This release of the CLI and library.
    static let release = "0.5.0"

    /// What `vaultlog --version` prints: the release, the formats it writes (and reads back to
    /// format 1), and the LMDB it runs on.
    static var versionText: String {
        "vaultlog \(release) (store format \(EventLogStore.storeFormatVersion), envelope format \(Envelope.currentFormatVersion); \(Environment.libraryVersion))"
    }

    static func main() async {
        CrashReport.install()
        await mainWithDocumentedExitCodes()
    }
}
