import Foundation
import Testing
import VaultCrypto
import VaultJSON
@testable import VaultModel

/// Keys and fixtures shared by the VaultModel tests. The fixtures are produced by
/// `Resources/make_fixtures.py` (Python `cryptography`), an implementation independent of ours.
enum Fixtures {
    /// SHA-512("vaultlog fixture user key"), as in make_fixtures.py.
    static let userKey = try! SymmetricCryptoKey(
        base64: "dNSLwyDQJtl6XCXrZmEcEhvtqj/RjqFwaMbHCvCknxiZQQL8jdQLbHxcQcsNY9Oxlq/GjLnmJc2XYpeRPWAYHw==")
    /// SHA-512("vaultlog fixture cipher key"), wrapped as `key` in cipher_login.json.
    static let cipherKey = try! SymmetricCryptoKey(
        base64: "Zr0k6hesRd4ey1N8ca2DAq6Jl5EI4l4kgTNK4UGPKU2Hx8OdUA3lTjE2+dcDg+8+Kh5yYXuZT32+LI7xnewvxg==")

    static func data(_ name: String) throws -> Data {
        let url = try #require(Bundle.module.url(forResource: name, withExtension: "json", subdirectory: "Resources"))
        return try Data(contentsOf: url)
    }

    static func cipher(_ name: String) throws -> Cipher {
        try JSONDecoder().decode(Cipher.self, from: data(name))
    }
}

func encodeJSON(_ value: some Encodable) throws -> Data {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return try encoder.encode(value)
}

func decodeJSON<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
    try JSONDecoder().decode(type, from: data)
}

/// Whether every key and value of `original` is in `candidate` (objects may gain keys, e.g.
/// explicit nulls; nothing may be lost or changed).
func isContained(_ original: JSONValue, in candidate: JSONValue) -> Bool {
    switch (original, candidate) {
    case (.object(let lhs), .object(let rhs)):
        return lhs.allSatisfy { key, value in rhs[key].map { isContained(value, in: $0) } ?? false }
    case (.array(let lhs), .array(let rhs)):
        return lhs.count == rhs.count && zip(lhs, rhs).allSatisfy { isContained($0, in: $1) }
    default:
        return original == candidate
    }
}

/// One sample of every item type, with custom fields, history and (for logins) URIs and a passkey.
enum Samples {
    static let date = try! BitwardenDate("2024-05-01T12:00:00.0000000Z")

    static var common: [FieldView] {
        [FieldView(type: .hidden, name: "PIN", value: "1234"), FieldView(type: .text, name: "Note", value: "plain")]
    }

    static var history: [PasswordHistoryView] {
        [PasswordHistoryView(password: "prior-pw-9", lastUsedDate: date)]
    }

    static var all: [CipherView] {
        var login = LoginView(username: "alice", password: "s3cret!", passwordRevisionDate: date, totp: "otpauth://totp/x?secret=JBSWY3DP")
        login.uris = [LoginUriView(uri: "https://example.com", uriChecksum: "abc=", match: .host)]
        var passkey = Fido2CredentialView()
        passkey.credentialId = "cred-1"
        passkey.keyValue = "MIGHAgEAMBMGByqGSM49AgEG"
        passkey.rpId = "example.com"
        passkey.counter = "0"
        passkey.discoverable = "true"
        passkey.creationDate = date
        login.fido2Credentials = [passkey]

        var card = CardView()
        card.cardholderName = "Alice Example"
        card.number = "4111111111111111"
        card.code = "123"
        card.expMonth = "12"
        card.expYear = "2030"

        var identity = IdentityView()
        identity.firstName = "Alice"
        identity.lastName = "Example"
        identity.ssn = "078-05-1120"
        identity.email = "alice@example.com"

        var ssh = SSHKeyView()
        ssh.privateKey = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA==\n-----END OPENSSH PRIVATE KEY-----"
        ssh.publicKey = "ssh-ed25519 AAAAC3Nz alice"
        ssh.fingerprint = "SHA256:abcdef"

        return [
            CipherView(type: .login, name: "Login item", notes: "n", login: login, fields: common, passwordHistory: history),
            CipherView(type: .secureNote, name: "Note item", notes: "the note text", secureNote: CipherSecureNote(), fields: common),
            CipherView(type: .card, name: "Card item", card: card, fields: common),
            CipherView(type: .identity, name: "Identity item", identity: identity),
            CipherView(type: .sshKey, name: "SSH item", sshKey: ssh),
            CipherView(type: .bankAccount, name: "Bank item", bankAccount: TextFieldsView(values: ["accountNumber": "12345678", "bankName": "Example Bank"])),
            CipherView(type: .driversLicense, name: "License item", driversLicense: TextFieldsView(values: ["licenseNumber": "D123"], extra: ["issued": .integer(2020)])),
            CipherView(type: .passport, name: "Passport item", passport: TextFieldsView(values: ["passportNumber": "P987"])),
        ]
    }
}
