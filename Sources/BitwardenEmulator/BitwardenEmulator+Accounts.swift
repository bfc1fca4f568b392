import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import VaultCrypto
import VaultModel
import _CryptoExtras
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension BitwardenEmulator {
    // MARK: Accounts

    /// Creates an account the way a client registers: a PBKDF2 master key from `password`, a new
    /// user key, its protected form, and an RSA-2048 key pair whose private key is a type-2
    /// EncString of its PKCS#8 DER under the user key (one key pair per process: see `accountKeyPair()`).
    ///
    /// - Parameter iterations: PBKDF2 iterations (at least 5,000; tests use 5,000 for speed).
    /// - Throws: ``EmulatorError/accountExists(_:)`` or a KDF error.
    @discardableResult
    public func createAccount(email: String, password: String, iterations: Int = 600_000) throws -> EmulatorAccount {
        try createAccount(email: email, password: password, kdf: .pbkdf2(iterations: iterations))
    }

    /// Creates an account whose master key is derived with `kdf` (PBKDF2 or Argon2id; checked
    /// against Bitwarden's ranges first).
    @discardableResult
    public func createAccount(email: String, password: String, kdf: KdfConfig) throws -> EmulatorAccount {
        try kdf.validate()
        let masterKey = try MasterKey.derive(password: password, email: email, kdf: kdf)
        let userKey = SymmetricCryptoKey.generate(using: configuration.random)
        let protected = masterKey.encryptUserKey(userKey, random: configuration.random)
        let pair = try Self.accountKeyPair()
        let privateKey = EncString.encrypt(pair.privateKeyDER, key: userKey, random: configuration.random)
        return try createAccount(
            email: email, kdf: kdf, masterPasswordHash: masterKey.passwordHash(password: password),
            protectedUserKey: protected, userKey: userKey, privateKey: privateKey,
            publicKey: Base64.encode(pair.publicKeyDER))
    }

    /// An account's RSA key pair (DER): PKCS#8 private key, SubjectPublicKeyInfo public key.
    struct AccountKeyPair: Sendable {
        let privateKeyDER: [UInt8]
        let publicKeyDER: [UInt8]
    }

    private static let keyPair = Mutex<AccountKeyPair?>(nil)

    /// The RSA-2048 key pair every account this process's emulators create gets, each wrapped
    /// under its own user key. A client makes its own at registration; the emulator only stores
    /// and returns it and never uses it, and making one (prime search) took about a fifth of a
    /// simulated seed's time when every account got a new one.
    static func accountKeyPair() throws -> AccountKeyPair {
        try keyPair.withLock { cached in
            if let cached { return cached }
            let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            let made = AccountKeyPair(privateKeyDER: Array(rsa.pkcs8DERRepresentation), publicKeyDER: Array(rsa.publicKey.derRepresentation))
            cached = made
            return made
        }
    }

    /// Creates an account from existing material, for published vectors such as the reference's
    /// T8 account: the server only needs the master-password hash and the protected user key.
    ///
    /// - Parameters:
    ///   - masterPasswordHash: base64 server-authorization hash (PBKDF2 of the master key, 1 round).
    ///   - userKey: the key `protectedUserKey` wraps; kept for tests, never sent.
    ///   - privateKey: the wrapped RSA private key, if the account has one.
    @discardableResult
    public func createAccount(email: String, kdf: KdfConfig, masterPasswordHash: String, protectedUserKey: EncString,
                              userKey: SymmetricCryptoKey, privateKey: EncString? = nil, publicKey: String? = nil,
                              name: String? = nil) throws -> EmulatorAccount {
        let email = email.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !email.isEmpty else { throw EmulatorError.invalidArgument("email must not be empty") }
        try kdf.validate()
        var iterations = 0, memory: Int?, parallelism: Int?
        switch kdf {
        case .pbkdf2(let i): iterations = i
        case .argon2id(let i, let m, let p): iterations = i; memory = m; parallelism = p
        }
        let stored: StoredAccount = try core.state.withLock { state in
            guard state.account(email: email) == nil else { throw EmulatorError.accountExists(email) }
            let now = core.nowTicks()
            let account = StoredAccount(
                id: core.newID(), email: email, name: name, kdfType: kdf.kdfType, kdfIterations: iterations,
                kdfMemory: memory, kdfParallelism: parallelism, masterPasswordHash: masterPasswordHash,
                protectedUserKey: protectedUserKey.serialized, privateKey: privateKey?.serialized, publicKey: publicKey,
                userKey: userKey.exportBase64(), securityStamp: configuration.random.uuidString(),
                creationTicks: now, revisionTicks: now)
            state.accounts[account.id] = account
            return account
        }
        configuration.logger.debug("emulator: created account", metadata: ["email": "\(email)", "id": "\(stored.id)"])
        return try stored.publicAccount()
    }

    /// Every account.
    public var accounts: [EmulatorAccount] {
        core.state.withLock { state in
            state.accounts.values.sorted { $0.creationTicks == $1.creationTicks ? $0.email < $1.email : $0.creationTicks < $1.creationTicks }
        }.compactMap { try? $0.publicAccount() }
    }

    /// The account with this email (case-insensitive), if any.
    public func account(email: String) -> EmulatorAccount? {
        core.state.withLock { $0.account(email: email) }.flatMap { try? $0.publicAccount() }
    }

    /// Ends every session of the user, as "deauthorize sessions" does: the security stamp
    /// rotates (access tokens answer 401) and refresh tokens stop working (the client must log in).
    public func revokeSessions(userId: String) {
        core.state.withLock { state in
            state.accounts[userId]?.securityStamp = configuration.random.uuidString()
            state.refreshTokens = state.refreshTokens.filter { $0.value.userId != userId }
        }
    }

    /// The account revision date (what `GET /api/accounts/revision-date` reports).
    public func accountRevisionDate(userId: String) -> BitwardenDate? {
        core.state.withLock { $0.accounts[userId]?.revisionTicks }.map { BitwardenDate(ticksSince1970: $0) }
    }
}
