import ArgumentParser

/// The `vaultlog` root command.
///
/// Temporary root of the `cli` branch: at merge it is combined with the root written with
/// `serve` (the subcommand lists are joined; keep the `main()` below, which maps usage errors
/// to exit code 2 as `Docs/CLI.md` documents).
@main
struct VaultlogCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vaultlog",
        abstract: "Inspect and check a VaultLog store: the encrypted, append-only log of offline vault edits.",
        discussion: """
        Reading commands never change a store and never create one. Bodies are decrypted only when \
        you give a key (--email with --password-file or --password-stdin, or --user-key-file); \
        without one you see headers only. Exit codes: 0 ok, 1 problems found, 2 usage, \
        3 key/authentication, 4 I/O or corrupt store (see Docs/CLI.md).
        """,
        subcommands: [Demo.self, ReplayScenarios.self, Simulate.self, Info.self, Events.self, Pending.self, History.self, Verify.self, Export.self, Import.self, Decrypt.self, StressWriter.self]
    )

    static func main() async {
        await mainWithDocumentedExitCodes()
    }
}
