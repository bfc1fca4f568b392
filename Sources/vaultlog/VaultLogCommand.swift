import ArgumentParser

/// The `vaultlog` command line tool. Each subcommand is its own type in its own file; keep
/// this root small.
@main
struct VaultLogCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vaultlog",
        abstract: "Inspect and exercise VaultLog, the offline-editing log for Bitwarden-compatible vaults.",
        subcommands: [ServeCommand.self]
    )
}
