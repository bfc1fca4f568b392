import ArgumentParser
import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto

/// `vaultlog user-key DIR --email E --out FILE`: writes the file `--user-key-file` reads.
struct UserKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user-key",
        abstract: "Write an account's user key to a file (0600), for --user-key-file.",
        discussion: """
        Unlocks the account of --email stored in the store with its master password (from \
        --password-file, --password-stdin, VAULTLOG_PASSWORD or a prompt without echo) and \
        writes the base64 of the 64-byte user key to FILE: created readable by the owner only, \
        replaced atomically, never printed. The key opens every event of that user without the \
        password and without the KDF's cost; keep it like the password. An existing FILE is \
        refused unless --force.

        Example:
          vaultlog user-key store --email alice@example.com --password-file pw.txt --out alice.key
          vaultlog events store --user-key-file alice.key
        """
    )

    @Argument(help: ArgumentHelp("The store directory (holding data.mdb).", valueName: "dir"))
    var directory: String

    @Option(help: ArgumentHelp("Where to write the key (mode 0600).", valueName: "file"))
    var out: String

    @Flag(help: "Replace an existing --out file.")
    var force = false

    @OptionGroup(title: "Account")
    var key: KeyOptions

    func validate() throws {
        if key.email == nil { throw ValidationError("give the account with --email (its master password unlocks the user key)") }
    }

    func run() throws {
        try reportingErrors(storePath: directory) {
            if !force, FileManager.default.fileExists(atPath: out) {
                throw CLIError.usage("\(out) already exists; add --force to replace it")
            }
            let store = try StoreAccess.openForReading(directory)
            defer { store.close() }
            guard let unlocked = try key.unlock(store) else { throw CLIError.usage("give the account with --email") }
            do {
                try SecretFile.write(Array((unlocked.userKey.exportBase64() + "\n").utf8), to: out)
            } catch {
                throw CLIError.storage("cannot write \(out): \(error)")
            }
            Console.out("wrote the user key of \(unlocked.email ?? unlocked.userId) (user \(unlocked.userId)) to \(out)")
        }
    }
}
