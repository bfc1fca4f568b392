import Foundation
import VaultCrypto
import VaultJSON

/// Decrypted login details.
public struct LoginView: Sendable, Equatable {
    /// Username.
    public var username: String?
    /// Password.
    public var password: String?
    /// When the password last changed.
    public var passwordRevisionDate: BitwardenDate?
    /// TOTP secret or `otpauth://` URI.
    public var totp: String?
    /// Websites and apps.
    public var uris: [LoginUriView]?
    /// Stored passkeys.
    public var fido2Credentials: [Fido2CredentialView]?
    /// Whether to auto-fill on page load.
    public var autofillOnPageLoad: Bool?
    /// Legacy single URI.
    public var uri: String?
    /// Fields this version does not know, as received.
    public var extra: [String: JSONValue]

    /// Creates login details.
    public init(
        username: String? = nil, password: String? = nil, passwordRevisionDate: BitwardenDate? = nil,
        totp: String? = nil, uris: [LoginUriView]? = nil, fido2Credentials: [Fido2CredentialView]? = nil,
        autofillOnPageLoad: Bool? = nil, uri: String? = nil, extra: [String: JSONValue] = [:]
    ) {
        self.username = username
        self.password = password
        self.passwordRevisionDate = passwordRevisionDate
        self.totp = totp
        self.uris = uris
        self.fido2Credentials = fido2Credentials
        self.autofillOnPageLoad = autofillOnPageLoad
        self.uri = uri
        self.extra = extra
    }
}

/// A decrypted login URI.
public struct LoginUriView: Sendable, Equatable {
    /// The URI.
    public var uri: String?
    /// Base64 SHA-256 of the URI. Bitwarden clients drop a URI whose checksum does not match
    /// (for items with a per-cipher key), so pass `sha256:` to
    /// ``CipherView/encrypt(userKey:random:generateCipherKey:sha256:)`` to regenerate it.
    public var uriChecksum: String?
    /// How the URI is matched.
    public var match: UriMatchType?
    /// Fields this version does not know, as received.
    public var extra: [String: JSONValue]
    /// The URI and checksum as decrypted, to catch a checksum left stale by an edit. Not part
    /// of equality.
    var decrypted = Remembered<(uri: String?, checksum: String?)>(nil)

    /// Creates a login URI.
    public init(uri: String?, uriChecksum: String? = nil, match: UriMatchType? = nil, extra: [String: JSONValue] = [:]) {
        self.uri = uri
        self.uriChecksum = uriChecksum
        self.match = match
        self.extra = extra
    }
}

/// A decrypted passkey. `keyValue` is a private key: never printed.
public struct Fido2CredentialView: DecryptedTextRecord, Equatable {
    /// Credential id.
    public var credentialId: String?
    /// Key type (`"public-key"`).
    public var keyType: String?
    /// Algorithm (`"ECDSA"`).
    public var keyAlgorithm: String?
    /// Curve (`"P-256"`).
    public var keyCurve: String?
    /// Private key (base64 PKCS#8).
    public var keyValue: String?
    /// Relying-party id.
    public var rpId: String?
    /// Relying-party name.
    public var rpName: String?
    /// User handle.
    public var userHandle: String?
    /// User name.
    public var userName: String?
    /// User display name.
    public var userDisplayName: String?
    /// Signature counter, as text.
    public var counter: String?
    /// Discoverable flag, as text (`"true"`/`"false"`).
    public var discoverable: String?
    /// When the passkey was created.
    public var creationDate: BitwardenDate?
    /// Fields this version does not know, as received.
    public var extra: [String: JSONValue] = [:]

    /// Creates an empty credential; set the fields you need.
    public init() {}

    static var textFields: [(name: String, path: WritableKeyPath<Self, String?>)] {
        [
            ("credentialId", \.credentialId), ("keyType", \.keyType), ("keyAlgorithm", \.keyAlgorithm),
            ("keyCurve", \.keyCurve), ("keyValue", \.keyValue), ("rpId", \.rpId), ("rpName", \.rpName),
            ("userHandle", \.userHandle), ("userName", \.userName), ("userDisplayName", \.userDisplayName),
            ("counter", \.counter), ("discoverable", \.discoverable),
        ]
    }
}
