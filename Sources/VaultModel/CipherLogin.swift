import Foundation
import VaultCrypto
import VaultJSON

/// Login details of a cipher (`login`): username, password, TOTP seed, URIs and passkeys.
public struct CipherLogin: Codable, Sendable, Equatable {
    /// Encrypted username.
    public var username: EncString?
    /// Encrypted password.
    public var password: EncString?
    /// When the password last changed.
    public var passwordRevisionDate: BitwardenDate?
    /// Encrypted TOTP secret or `otpauth://` URI.
    public var totp: EncString?
    /// Websites and apps this login is for.
    public var uris: [CipherLoginUri]?
    /// Stored passkeys.
    public var fido2Credentials: [CipherFido2Credential]?
    /// Whether to auto-fill on page load (nil = user default).
    public var autofillOnPageLoad: Bool?
    /// Legacy single encrypted URI, still sent by some servers.
    public var uri: EncString?
    /// Fields this version does not know, kept verbatim.
    public var extra: [String: JSONValue]

    /// Creates login details.
    public init(
        username: EncString? = nil, password: EncString? = nil, passwordRevisionDate: BitwardenDate? = nil,
        totp: EncString? = nil, uris: [CipherLoginUri]? = nil, fido2Credentials: [CipherFido2Credential]? = nil,
        autofillOnPageLoad: Bool? = nil, uri: EncString? = nil, extra: [String: JSONValue] = [:]
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

    static let knownKeys: Set<String> = [
        "username", "password", "passwordRevisionDate", "totp", "uris", "fido2Credentials", "autofillOnPageLoad", "uri",
    ]

    /// Decodes the wire JSON, keeping unknown fields in `extra`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        username = try c.optional("username")
        password = try c.optional("password")
        passwordRevisionDate = try c.optional("passwordRevisionDate")
        totp = try c.optional("totp")
        uris = try c.optional("uris")
        fido2Credentials = try c.optional("fido2Credentials")
        autofillOnPageLoad = try c.optional("autofillOnPageLoad")
        uri = try c.optional("uri")
        extra = try c.unknownFields(known: Self.knownKeys, in: decoder)
    }

    /// Encodes the known fields (nil as `null`, except the legacy `uri`, left out when nil), then
    /// the carried unknown fields.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AnyCodingKey.self)
        try c.put(username, "username")
        try c.put(password, "password")
        try c.put(passwordRevisionDate, "passwordRevisionDate")
        try c.put(totp, "totp")
        try c.put(uris, "uris")
        try c.put(fido2Credentials, "fido2Credentials")
        try c.put(autofillOnPageLoad, "autofillOnPageLoad")
        if let uri { try c.put(uri, "uri") }
        try c.putUnknown(extra, known: Self.knownKeys)
    }
}

/// One website or app of a login (`login.uris[]`).
public struct CipherLoginUri: Codable, Sendable, Equatable {
    /// Encrypted URI.
    public var uri: EncString?
    /// Encrypted base64 SHA-256 of the URI, used by clients to detect tampering.
    public var uriChecksum: EncString?
    /// How the URI is matched (nil = user default).
    public var match: UriMatchType?
    /// Fields this version does not know, kept verbatim.
    public var extra: [String: JSONValue]

    /// Creates a login URI.
    public init(uri: EncString? = nil, uriChecksum: EncString? = nil, match: UriMatchType? = nil, extra: [String: JSONValue] = [:]) {
        self.uri = uri
        self.uriChecksum = uriChecksum
        self.match = match
        self.extra = extra
    }

    static let knownKeys: Set<String> = ["uri", "uriChecksum", "match"]

    /// Decodes the wire JSON, keeping unknown fields in `extra`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        uri = try c.optional("uri")
        uriChecksum = try c.optional("uriChecksum")
        match = try c.optional("match")
        extra = try c.unknownFields(known: Self.knownKeys, in: decoder)
    }

    /// Encodes the known fields (nil as `null`, as the server writes them), then the carried unknown fields.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AnyCodingKey.self)
        try c.put(uri, "uri")
        try c.put(uriChecksum, "uriChecksum")
        try c.put(match, "match")
        try c.putUnknown(extra, known: Self.knownKeys)
    }
}

/// A passkey stored in a login (`login.fido2Credentials[]`). All but `creationDate` are
/// encrypted strings, including `counter` (`"0"`) and `discoverable` (`"true"`).
public struct CipherFido2Credential: EncryptedTextRecord, Equatable {
    /// Encrypted credential id.
    public var credentialId: EncString?
    /// Encrypted key type (`"public-key"`).
    public var keyType: EncString?
    /// Encrypted algorithm (`"ECDSA"`).
    public var keyAlgorithm: EncString?
    /// Encrypted curve (`"P-256"`).
    public var keyCurve: EncString?
    /// Encrypted private key (base64 PKCS#8).
    public var keyValue: EncString?
    /// Encrypted relying-party id.
    public var rpId: EncString?
    /// Encrypted relying-party name.
    public var rpName: EncString?
    /// Encrypted user handle.
    public var userHandle: EncString?
    /// Encrypted user name.
    public var userName: EncString?
    /// Encrypted user display name.
    public var userDisplayName: EncString?
    /// Encrypted signature counter.
    public var counter: EncString?
    /// Encrypted discoverable flag.
    public var discoverable: EncString?
    /// When the passkey was created.
    public var creationDate: BitwardenDate?
    /// Fields this version does not know, kept verbatim.
    public var extra: [String: JSONValue] = [:]

    /// Creates an empty credential; set the fields you need.
    public init() {}

    static var encryptedFields: [(name: String, path: WritableKeyPath<Self, EncString?>)] {
        [
            ("credentialId", \.credentialId), ("keyType", \.keyType), ("keyAlgorithm", \.keyAlgorithm),
            ("keyCurve", \.keyCurve), ("keyValue", \.keyValue), ("rpId", \.rpId), ("rpName", \.rpName),
            ("userHandle", \.userHandle), ("userName", \.userName), ("userDisplayName", \.userDisplayName),
            ("counter", \.counter), ("discoverable", \.discoverable),
        ]
    }

    /// Decodes the wire JSON, keeping unknown fields in `extra`. Throws a `DecodingError` when
    /// `creationDate` is not a valid date string.
    public init(from decoder: any Decoder) throws {
        try self.init(decodingRecordFrom: decoder)
        // creationDate is plain; it was captured in `extra` by the shared decoder.
        if let raw = extra.removeValue(forKey: "creationDate"), raw != .null {
            guard case .string(let text) = raw else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "creationDate must be a string"))
            }
            do {
                creationDate = try BitwardenDate(text)
            } catch let error as VaultModelError {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.description))
            }
        }
    }

    /// Encodes the known fields (nil as `null`, as the server writes them), then the carried unknown fields.
    public func encode(to encoder: any Encoder) throws {
        var copy = self
        copy.extra["creationDate"] = creationDate.map { .string($0.text) } ?? .null
        try copy.encodeRecord(to: encoder)
    }
}
