import ArgumentParser
import Foundation
import VaultCrypto

/// `vaultlog decrypt --key BASE64 ENCSTRING`: one Bitwarden EncString.
struct Decrypt: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Decrypt one Bitwarden EncString with a key and print the plaintext.",
        discussion: """
        The key is the base64 of 64 bytes (AES-256 key ‖ HMAC-SHA256 key: a user key, cipher key \
        or stretched master key) for type-2 EncStrings ("2.iv|ct|mac"), whose MAC is checked \
        before anything is decrypted; or of 32 bytes (a bare AES-256 key) for legacy type-0 \
        EncStrings ("0.iv|ct"). A MAC mismatch exits with 3.
        The plaintext is printed as UTF-8 text; --base64 prints the raw bytes as base64 instead \
        (for keys and binary data).

        Give a real key with --key-file (the base64 in a file): --key puts the key on the command \
        line, where every user of the machine can read it (ps, /proc/PID/cmdline) and the shell \
        history keeps it. --key is for published test vectors.

        Example (a Bitwarden SDK test vector):
          vaultlog decrypt --key AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+Pw== \\
            '2.2NokAMS6llUxk26oueMqrA==|6k0QD71SJLy2WEBDkV4esiTrgkP/z7eoSedSesGLGYE=|PE4sb0jpAwZW+tnyPuW43eeWvSxjvdw3xMJlPGbDlYI='
          Bitwarden SDK test vector
        """
    )

    @Option(help: ArgumentHelp("The key: base64 of 64 bytes (type 2) or 32 bytes (type 0). Visible to other users in ps: for test vectors only.",
                               valueName: "base64"))
    var key: String?

    @Option(name: .customLong("key-file"), help: ArgumentHelp("Read the key (the same base64) from this file.", valueName: "file"))
    var keyFile: String?

    @Flag(help: "Print the decrypted bytes as base64 instead of UTF-8 text.")
    var base64 = false

    @Argument(help: ArgumentHelp("The EncString, e.g. 2.iv|ciphertext|mac (quote it: '|' is a shell pipe).", valueName: "encstring"))
    var encString: String

    func validate() throws {
        switch (key, keyFile) {
        case (nil, nil): throw ValidationError("the key is missing: add --key-file FILE (or --key BASE64 for a test vector)")
        case (.some, .some): throw ValidationError("give the key once: --key-file or --key, not both")
        case (.some(let key), nil): _ = try parsedKey(key, source: "--key")
        case (nil, .some): break   // read in run(), where an unreadable file is a key error (exit 3)
        }
        _ = try parsedEncString()
    }

    private func parsedKey(_ text: String, source: String) throws -> [UInt8] {
        guard let bytes = Base64.decode(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw ValidationError("\(source) is not base64")
        }
        guard bytes.count == 64 || bytes.count == 32 else {
            throw ValidationError("\(source) decodes to \(bytes.count) bytes; expected 64 (enc ‖ mac) or 32 (AES only, type-0 EncStrings)")
        }
        return bytes
    }

    private func keyBytes() throws -> [UInt8] {
        if let keyFile {
            do {
                return try parsedKey(try Secrets.readFile(keyFile, what: "key"), source: "the key in \(keyFile)")
            } catch let error as ValidationError {
                throw CLIError.key(error.message)
            }
        }
        return try parsedKey(key ?? "", source: "--key")
    }

    private func parsedEncString() throws -> EncString {
        do {
            return try EncString(encString.trimmingCharacters(in: .whitespacesAndNewlines))
        } catch {
            throw ValidationError("not an EncString: \(error)")
        }
    }

    func run() throws {
        try reportingErrors(storePath: nil) {
            let keyBytes = try keyBytes()
            let value = try parsedEncString()
            let plaintext: [UInt8]
            do {
                if keyBytes.count == 64 {
                    plaintext = try value.decrypt(key: SymmetricCryptoKey(bytes: keyBytes))
                } else {
                    guard value.type == .aesCbc256B64 else {
                        throw CLIError.key("a 32-byte key decrypts only type-0 EncStrings; this one is type \(value.type.rawValue): give the 64-byte key")
                    }
                    // The AES half of a 64-byte key built around the 32 bytes (the MAC half is unused).
                    let aes = try SymmetricCryptoKey(bytes: keyBytes + [UInt8](repeating: 0, count: 32)).encryptionKey
                    plaintext = try value.decryptLegacy(aesKey: aes)
                }
            } catch VaultCryptoError.authenticationFailed {
                throw CLIError.key("MAC check failed: wrong key, or the EncString was altered; nothing was decrypted")
            } catch VaultCryptoError.decryptionFailed {
                throw CLIError.key("decryption failed (bad padding): wrong key, or the EncString was altered")
            }
            if base64 {
                Console.out(Base64.encode(plaintext))
            } else {
                guard let text = String(validating: plaintext, as: UTF8.self) else {
                    throw CLIError.usage("the plaintext (\(plaintext.count) bytes) is not UTF-8 text; add --base64 to print it as base64")
                }
                Console.out(text)
            }
        }
    }
}
