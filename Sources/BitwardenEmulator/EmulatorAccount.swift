import Foundation
import VaultCrypto

/// An account on the emulator, as the test or demo that created it needs to see it.
///
/// A real server never knows the user key; the emulator keeps it only so tests can encrypt
/// items for the account and check what a client decrypted.
public struct EmulatorAccount: Sendable, CustomStringConvertible {
    /// The server's id of the user (a UUID string), the token's `sub` claim.
    public let userId: String
    /// The login email (also the KDF salt, trimmed and lowercased).
    public let email: String
    /// The 64-byte user key that encrypts the vault. Key material: never log it.
    public let userKey: SymmetricCryptoKey
    /// How the master key is derived from the master password.
    public let kdf: KdfConfig
    /// The user key wrapped by the stretched master key (`Key` in the token response).
    public let protectedUserKey: EncString
    /// The RSA private key (PKCS#8 DER) wrapped by the user key (`PrivateKey`), if any.
    public let privateKey: EncString?
    /// The RSA public key, base64 SubjectPublicKeyInfo DER, if any.
    public let publicKey: String?

    /// The email, user id and KDF; never the key material.
    public var description: String { "EmulatorAccount(\(email), id \(userId), \(kdf))" }
}

/// Account material as stored by the emulator (and its state file).
struct StoredAccount: Codable, Sendable {
    var id: String
    var email: String
    var name: String?
    var kdfType: Int
    var kdfIterations: Int
    var kdfMemory: Int?
    var kdfParallelism: Int?
    /// Base64 server-authorization master-password hash (what the token request sends).
    var masterPasswordHash: String
    var protectedUserKey: String
    var privateKey: String?
    var publicKey: String?
    /// Base64 of the 64-byte user key (test-only knowledge; see ``EmulatorAccount/userKey``).
    var userKey: String
    var securityStamp: String
    var creationTicks: Int64
    var revisionTicks: Int64

    var kdf: KdfConfig {
        (try? KdfConfig(kdfType: kdfType, iterations: kdfIterations, memoryMiB: kdfMemory, parallelism: kdfParallelism))
            ?? .pbkdf2(iterations: kdfIterations)
    }

    func publicAccount() throws -> EmulatorAccount {
        EmulatorAccount(
            userId: id, email: email, userKey: try SymmetricCryptoKey(base64: userKey), kdf: kdf,
            protectedUserKey: try EncString(protectedUserKey), privateKey: try privateKey.map { try EncString($0) },
            publicKey: publicKey)
    }
}
