import Foundation
import VaultCrypto
import VaultModel

/// The tokens of a session. Secrets: never log them.
public struct TokenSet: Sendable, Codable, Equatable, CustomStringConvertible {
    /// The bearer token for API calls.
    public var accessToken: String
    /// The token that buys a new access token (`grant_type=refresh_token`).
    public var refreshToken: String
    /// When the access token expires, by the client's clock.
    public var expiresAt: Date

    /// Creates a token set (for restoring a saved session).
    public init(accessToken: String, refreshToken: String, expiresAt: Date) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresAt = expiresAt
    }

    /// The expiry only; both tokens are redacted.
    public var description: String { "TokenSet(<redacted>, expires \(expiresAt))" }
}

/// What a successful ``BitwardenClient/login(email:password:)`` returns: the unlocked user key
/// and the material to store for offline unlock.
public struct LoginResult: Sendable, CustomStringConvertible {
    /// The server's user id (the access token's `sub`).
    public let userId: String
    /// The email the user logged in with.
    public let email: String
    /// The decrypted 64-byte user key. Key material.
    public let userKey: SymmetricCryptoKey
    /// The account's KDF settings (from prelogin).
    public let kdf: KdfConfig
    /// The master-password salt prelogin named, when it named one; nil means the email.
    public let salt: String?
    /// The user key wrapped by the stretched master key (`Key`), for offline unlock.
    public let protectedUserKey: EncString
    /// The RSA private key wrapped by the user key (`PrivateKey`), if the account has one.
    public let privateKey: EncString?
    /// The session's tokens.
    public let tokens: TokenSet

    /// What to tell the user when the account's KDF settings are ones Bitwarden accepts but calls
    /// weak (PBKDF2 below 600,000 iterations), or nil: a guess of the master password is checked
    /// offline at the KDF's cost by anyone who has the device's store. The client also logs it
    /// at login (notice level): an app shows this text, a log is for its developers.
    public var kdfWarning: String? { kdf.weaknessWarning }

    /// The email, user id and KDF settings; no key material or tokens.
    public var description: String { "LoginResult(\(email), user \(userId), \(kdf))" }
}

/// A folder (`FolderResponseModel`); the name is encrypted with the user key.
public struct Folder: Sendable, Codable, Equatable {
    /// The server's id.
    public var id: String
    /// The encrypted name.
    public var name: EncString
    /// When the server last changed it.
    public var revisionDate: BitwardenDate?

    /// Creates a folder value.
    public init(id: String, name: EncString, revisionDate: BitwardenDate? = nil) {
        self.id = id
        self.name = name
        self.revisionDate = revisionDate
    }
}

/// The parts of `profile` in `/api/sync` a client needs.
public struct Profile: Sendable, Codable, Equatable {
    /// The user id.
    public var id: String
    /// The account email.
    public var email: String
    /// The display name, if set.
    public var name: String?
    /// The protected user key.
    public var key: EncString?
    /// The wrapped RSA private key.
    public var privateKey: EncString?
    /// Changes when the password changes or sessions are revoked.
    public var securityStamp: String?
}

/// A full `GET /api/sync` reply (the parts a client uses).
public struct SyncResponse: Sendable, Decodable {
    /// The user's profile.
    public var profile: Profile
    /// Folders.
    public var folders: [Folder]
    /// Every item, trashed ones included (non-nil `deletedDate`).
    public var ciphers: [Cipher]
}

/// `{"object":"list","data":[...]}`.
struct ListResponse<Element: Decodable>: Decodable {
    var data: [Element]
}

/// Prelogin reply (`kdf`, `kdfIterations`, ...); any casing.
struct PreloginResponse {
    var kdf: KdfConfig
}

/// Reads a JSON object with case-insensitive keys (token replies use PascalCase extras).
struct LooseJSON {
    let values: [String: Any]

    init?(_ data: Data) {
        guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else { return nil }
        var lowered: [String: Any] = [:]
        for (key, value) in object { lowered[key.lowercased()] = value }
        values = lowered
    }

    func string(_ key: String) -> String? { values[key.lowercased()] as? String }

    /// A whole number, exactly: nil for a fraction, for a value beyond 64 bits (`1e300`) or for
    /// a string (never a wrapped or truncated value).
    func int(_ key: String) -> Int? {
        guard let value = values[key.lowercased()] else { return nil }
        if let i = value as? Int { return i }   // bridges only when exact
        guard let d = value as? Double, d.isFinite, d.rounded() == d else { return nil }
        return Int(exactly: d)
    }

    /// Whether the object has `key` (any casing) with a non-null value.
    func has(_ key: String) -> Bool {
        guard let value = values[key.lowercased()] else { return false }
        return !(value is NSNull)
    }
}
