import ArgumentParser
import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto

/// How a reading command gets a user key. Secrets never come from argv: the master password
/// from a file, stdin, the `VAULTLOG_PASSWORD` environment variable or a prompt without echo;
/// the user key from a file.
struct KeyOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Unlock the stored account of this email (the master password from --password-file, --password-stdin, VAULTLOG_PASSWORD or a prompt).",
                               valueName: "email"))
    var email: String?

    @Option(name: .customLong("password-file"),
            help: ArgumentHelp("Read the master password from this file (one trailing newline is ignored).", valueName: "file"))
    var passwordFile: String?

    @Flag(name: .customLong("password-stdin"), help: "Read the master password from the first line of stdin.")
    var passwordStdin = false

    @Option(name: .customLong("user-key-file"),
            help: ArgumentHelp("Use the user key in this file: the base64 of the 64-byte Bitwarden user key.", valueName: "file"))
    var userKeyFile: String?

    @Option(help: ArgumentHelp("The user (id) to show and whose key is given; needed with --user-key-file when the store has several users.",
                               valueName: "user-id"))
    var user: String?

    func validate() throws {
        if email != nil {
            if passwordFile == nil && !passwordStdin && Secrets.environment("VAULTLOG_PASSWORD") == nil && !Secrets.stdinIsTerminal {
                throw ValidationError("--email needs the master password: add --password-file FILE or --password-stdin, set VAULTLOG_PASSWORD, or run it at a terminal to be asked")
            }
            if passwordFile != nil && passwordStdin {
                throw ValidationError("give the master password once: --password-file or --password-stdin, not both")
            }
            if userKeyFile != nil {
                throw ValidationError("give one key: --email (with a password) or --user-key-file, not both")
            }
        } else if passwordFile != nil || passwordStdin {
            throw ValidationError("a master password needs --email to say whose account it unlocks")
        }
    }

    /// Whether a key was given at all.
    var hasKey: Bool { email != nil || userKeyFile != nil }

    /// The note printed when no key was given.
    static let headersOnlyNote = "no key given: showing headers only (bodies need --email E with --password-file F, --password-stdin or VAULTLOG_PASSWORD, or --user-key-file F)"

    /// Unlocks the store with the given key and returns the user it belongs to, or nil when
    /// no key was given. Wrong keys fail with exit code 3.
    func unlock(_ store: VaultLogStore) throws -> UnlockedUser? {
        guard let unlocked = try resolve(accounts: store.storedAccounts(), users: StoreAccess.userIds(store),
                                         where: "in \(store.log.path)") else { return nil }
        if let file = userKeyFile {
            try checkKey(unlocked, store: store, file: file)
        }
        store.unlock(userId: unlocked.userId, userKey: unlocked.userKey)
        return unlocked
    }

    /// What a reading command (`events`, `items`, `history`) starts with: the store unlocked
    /// with the given key (a note on stderr when there is none: only headers can be shown), and
    /// the users it shows: the key's user, or `--user`, or every user. An unknown `--user` is a
    /// usage error.
    func unlockForReading(_ store: VaultLogStore) throws -> (unlocked: UnlockedUser?, users: [String]) {
        let unlocked = try unlock(store)
        if unlocked == nil { Console.note(Self.headersOnlyNote) }
        let users = try StoreAccess.userIds(store)
        guard let only = unlocked?.userId ?? user else { return (unlocked, users) }
        guard users.contains(only) else { throw CLIError.usage("the store has no user \(only)") }
        return (unlocked, [only])
    }

    /// The key and its user, from the stored `accounts` (for `--email`) or the key file; nil
    /// when no key was given. `users` are the users the key may belong to.
    func resolve(accounts: [StoredAccount], users: [String], where place: String) throws -> UnlockedUser? {
        if let email {
            let password = try readPassword()
            let normalized = email.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
            guard let account = accounts.first(where: { $0.email.lowercased() == normalized }) else {
                let known = accounts.map(\.email)
                throw CLIError.key("no account for \(email) is stored \(place)"
                    + (known.isEmpty ? " (none is)" : " (stored: \(known.joined(separator: ", ")))")
                    + "; use --user-key-file instead")
            }
            let userKey: SymmetricCryptoKey
            do {
                let salt = MasterKey.salt(email: account.email, preloginSalt: account.salt)
                let master = try MasterKey.derive(password: password, salt: salt, kdf: account.kdf)
                userKey = try master.decryptUserKey(account.protectedUserKey)
            } catch VaultCryptoError.authenticationFailed {
                throw CLIError.key("wrong master password for \(email) (or the store's account record is stale); check the password, or use --user-key-file")
            }
            if let user, user != account.userId {
                throw CLIError.usage("--user \(user) does not match the account of \(email) (user \(account.userId))")
            }
            return UnlockedUser(userId: account.userId, userKey: userKey, email: account.email)
        }
        guard let userKeyFile else { return nil }
        let key = try readUserKey(userKeyFile)
        return UnlockedUser(userId: try pickUser(users), userKey: key, email: nil)
    }

    /// The user a `--user-key-file` belongs to: `--user`, or the only user.
    func pickUser(_ users: [String]) throws -> String {
        if let user {
            guard users.contains(user) else {
                throw CLIError.usage("there is no user \(user)" + (users.isEmpty ? "" : " (users: \(users.joined(separator: ", ")))"))
            }
            return user
        }
        switch users.count {
        case 0: throw CLIError.usage("there are no users yet, so there is nothing a user key could open")
        case 1: return users[0]
        default: throw CLIError.usage("there are several users (\(users.joined(separator: ", "))): say whose key this is with --user")
        }
    }

    private func readPassword() throws -> String {
        if let passwordFile { return try Secrets.readFile(passwordFile, what: "master password") }
        if passwordStdin { return try Secrets.readStdinLine(what: "master password", option: "--password-stdin") }
        if let value = Secrets.environment("VAULTLOG_PASSWORD") { return value }
        return try Secrets.prompt("Master password for \(email ?? "the account"): ", what: "master password")
    }

    private func readUserKey(_ path: String) throws -> SymmetricCryptoKey {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw CLIError.key("cannot read the user key file \(path) (missing or unreadable)")
        }
        guard let key = try? SymmetricCryptoKey(base64: text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw CLIError.key("\(path) does not hold a user key: expected the base64 of 64 bytes")
        }
        return key
    }

    /// A wrong user key is reported as a key problem (exit 3), not as a damaged store: the key
    /// is right if any of the user's first few events authenticates under it.
    private func checkKey(_ unlocked: UnlockedUser, store: VaultLogStore, file: String) throws {
        let userId = unlocked.userId
        let sealing = unlocked.sealingKey
        let sample = try store.log.read { reader in
            try reader.sequences(userId: userId, cipherId: nil).prefix(3).compactMap { try? reader.envelope(at: $0) }
        }
        guard !sample.isEmpty else {
            // A user compacted down to no event: the snapshot is what the key must open.
            do {
                _ = try store.log.read { try $0.snapshot(userId: userId, key: sealing) }
            } catch {
                throw CLIError.key("the user key in \(file) does not open the compaction snapshot of user \(userId) (wrong key or wrong --user); if you are sure of the key, run 'vaultlog verify'")
            }
            return
        }
        guard sample.contains(where: { $0.authenticate(key: sealing) }) else {
            throw CLIError.key("the user key in \(file) does not open the events of user \(userId) (wrong key or wrong --user); if you are sure of the key, run 'vaultlog verify'")
        }
    }
}

/// A user whose key the command holds.
struct UnlockedUser {
    let userId: String
    let userKey: SymmetricCryptoKey
    let email: String?

    var sealingKey: SealingKey { SealingKey(userKey: userKey) }
}
