import ArgumentParser
import Foundation
import VaultCrypto

/// `vaultlog kdf`: derives an account's keys from its master password, to check a derivation
/// against another implementation (a Bitwarden client, the SDK's test vectors).
struct KdfCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kdf",
        abstract: "Derive an account's master key, master-password hash and stretched key.",
        discussion: """
        Prints, in base64: the 32-byte master key (PBKDF2-SHA256 or Argon2id of the master \
        password, salted with the email trimmed and lowercased; Argon2id hashes that salt with \
        SHA-256 first), the master-password hash a client sends to the server at login \
        (PBKDF2-SHA256 of the master key, salted with the password, 1 iteration), and the 64-byte \
        stretched key that unwraps the user key (HKDF-Expand of the master key with "enc", then \
        "mac"). These are secrets of the account: run it only on test accounts or at a terminal \
        nobody else sees.

        The password comes from --password-file, --password-stdin, or a prompt without echo when \
        stdin is a terminal; never from the command line. Settings outside Bitwarden's ranges \
        exit 2 and name the range.

        Examples:
          vaultlog kdf --email test@bitwarden.com --password-file pw.txt --iterations 600000
          vaultlog kdf --email test_key --password-file pw.txt --kdf argon2id --iterations 4 --memory 32 --parallelism 2 --json
        """
    )

    @Option(help: ArgumentHelp("The account's email (the salt, trimmed and lowercased).", valueName: "email"))
    var email: String

    @Option(name: .customLong("password-file"),
            help: ArgumentHelp("Read the master password from this file (one trailing newline is ignored).", valueName: "file"))
    var passwordFile: String?

    @Flag(name: .customLong("password-stdin"), help: "Read the master password from the first line of stdin (not echoed at a terminal).")
    var passwordStdin = false

    @OptionGroup var kdf: KdfOptions

    @Flag(help: "Print {\"masterKey\", \"masterPasswordHash\", \"stretchedKey\"} as one JSON object.")
    var json = false

    func validate() throws {
        if passwordFile != nil && passwordStdin {
            throw ValidationError("give the master password once: --password-file or --password-stdin, not both")
        }
        if passwordFile == nil && !passwordStdin && !Secrets.stdinIsTerminal {
            throw ValidationError("the master password is needed: add --password-file FILE or --password-stdin")
        }
    }

    struct Output: Encodable {
        var masterKey: String
        var masterPasswordHash: String
        var stretchedKey: String
    }

    func run() throws {
        try reportingErrors(storePath: nil) { try derive() }
    }

    private func derive() throws {
        let config = try kdf.config()
        let password: String
        if let passwordFile {
            password = try Secrets.readFile(passwordFile, what: "master password")
        } else if passwordStdin {
            password = try Secrets.readStdinLine(what: "master password", option: "--password-stdin")
        } else {
            password = try Secrets.prompt("Master password for \(email): ", what: "master password")
        }
        if let warning = config.weaknessWarning { Console.note(warning) }
        let master = try MasterKey.derive(password: password, email: email, kdf: config)
        let output = Output(
            masterKey: Base64.encode(master.exportBytes()),
            masterPasswordHash: master.passwordHash(password: password, purpose: .serverAuthorization),
            stretchedKey: master.stretched().exportBase64())
        if json {
            try Console.json(output)
        } else {
            Console.out("kdf:                  \(config)")
            Console.out("master key:           \(output.masterKey)")
            Console.out("master password hash: \(output.masterPasswordHash)")
            Console.out("stretched key:        \(output.stretchedKey)")
        }
    }
}
