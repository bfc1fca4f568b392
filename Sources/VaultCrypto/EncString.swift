import Crypto
import _CryptoExtras
import Foundation

/// A Bitwarden EncString: `"2.<iv>|<ciphertext>|<mac>"` (AES-256-CBC + PKCS#7, HMAC-SHA256
/// over iv ‖ ciphertext, encrypt-then-MAC), or the legacy unauthenticated `"0.<iv>|<ciphertext>"`.
///
/// Parsing works on UTF-8 bytes. Decryption verifies the MAC in constant time before it
/// decrypts anything.
///
/// ```swift
/// let enc = try EncString("2.kTtIypq9OLzd5iMMbU11pQ==|J4i3hTtGVdg7EZ+AQv/ujg==|QJpSpotQVpIW8j8dR/8l015WJzAIxBaOmrz4Uj/V1JA=")
/// let bytes = try enc.decrypt(key: key)   // [1, 2, 3, 4, 5]
/// ```
public struct EncString: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The encryption types VaultLog reads.
    public enum EncryptionType: UInt8, Sendable, Codable {
        /// AES-256-CBC without a MAC. Legacy: decrypt-only, and only with a 32-byte key.
        case aesCbc256B64 = 0
        /// AES-256-CBC + HMAC-SHA256, the type VaultLog writes.
        case aesCbc256HmacSha256B64 = 2
    }

    /// The encryption type (the number before the dot).
    public let type: EncryptionType
    /// The 16-byte CBC initialisation vector.
    public let iv: [UInt8]
    /// The ciphertext (PKCS#7-padded AES blocks).
    public let ciphertext: [UInt8]
    /// The 32-byte HMAC-SHA256 of iv ‖ ciphertext (type 2 only).
    public let mac: [UInt8]?

    /// Assembles a type-2 EncString from its parts.
    public init(iv: [UInt8], ciphertext: [UInt8], mac: [UInt8]) throws {
        guard iv.count == 16 else { throw VaultCryptoError.invalidEncString("IV must be 16 bytes, got \(iv.count)") }
        guard mac.count == 32 else { throw VaultCryptoError.invalidEncString("MAC must be 32 bytes, got \(mac.count)") }
        guard !ciphertext.isEmpty, ciphertext.count % 16 == 0 else {
            throw VaultCryptoError.invalidEncString("ciphertext must be a non-empty multiple of 16 bytes, got \(ciphertext.count)")
        }
        self.init(unchecked: .aesCbc256HmacSha256B64, iv: iv, ciphertext: ciphertext, mac: mac)
    }

    private init(unchecked type: EncryptionType, iv: [UInt8], ciphertext: [UInt8], mac: [UInt8]?) {
        self.type = type
        self.iv = iv
        self.ciphertext = ciphertext
        self.mac = mac
    }

    /// Parses an EncString from its string form.
    public init(_ string: String) throws {
        var string = string
        self = try string.withUTF8 { try EncString(parsing: UnsafeRawBufferPointer($0)) }
    }

    /// Parses an EncString from its UTF-8 bytes.
    public init(parsing bytes: some Collection<UInt8>) throws {
        if let parsed = try bytes.withContiguousStorageIfAvailable({ try EncString(parsing: UnsafeRawBufferPointer($0)) }) {
            self = parsed
        } else {
            self = try Array(bytes).withUnsafeBytes { try EncString(parsing: $0) }
        }
    }

    /// Parses an EncString from raw UTF-8 bytes without copying them first.
    public init(parsing raw: UnsafeRawBufferPointer) throws {
        guard let dot = raw.firstIndex(of: UInt8(ascii: ".")) else {
            throw VaultCryptoError.invalidEncString("missing the '<type>.' header (header-less legacy strings are not supported)")
        }
        guard dot == 1, let typeValue = Self.digit(raw[0]) else {
            throw VaultCryptoError.invalidEncString("the type header must be one digit")
        }
        // Split at '|' with memchr: the parts are long base64 runs.
        var parts: [UnsafeRawBufferPointer] = []
        var start = dot + 1
        while parts.count <= 3 {
            let remaining = raw.count - start
            let bar = remaining > 0 ? memchr(raw.baseAddress! + start, Int32(UInt8(ascii: "|")), remaining) : nil
            let end = bar.map { UnsafeRawPointer($0) - raw.baseAddress! } ?? raw.count
            parts.append(UnsafeRawBufferPointer(rebasing: raw[start..<end]))
            guard bar != nil else { break }
            start = end + 1
        }
        func decode(_ part: UnsafeRawBufferPointer, _ what: String) throws -> [UInt8] {
            guard !part.isEmpty, let bytes = Base64.decode(part) else {
                throw VaultCryptoError.invalidEncString("\(what) is not valid base64")
            }
            return bytes
        }
        switch (typeValue, parts.count) {
        case (2, 3):
            let iv = try decode(parts[0], "IV")
            let data = try decode(parts[1], "ciphertext")
            let mac = try decode(parts[2], "MAC")
            try self.init(iv: iv, ciphertext: data, mac: mac)
        case (0, 2):
            let iv = try decode(parts[0], "IV")
            let data = try decode(parts[1], "ciphertext")
            guard iv.count == 16 else { throw VaultCryptoError.invalidEncString("IV must be 16 bytes, got \(iv.count)") }
            guard !data.isEmpty, data.count % 16 == 0 else {
                throw VaultCryptoError.invalidEncString("ciphertext must be a non-empty multiple of 16 bytes")
            }
            self.init(unchecked: .aesCbc256B64, iv: iv, ciphertext: data, mac: nil)
        default:
            throw VaultCryptoError.invalidEncString("Invalid symmetric type, got type \(typeValue) with \(parts.count) parts")
        }
    }

    private static func digit(_ byte: UInt8) -> UInt8? {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) ? byte - UInt8(ascii: "0") : nil
    }

    /// The canonical string form, `type.iv|data[|mac]` with padded base64 parts.
    public var serialized: String { String(decoding: serializedBytes, as: UTF8.self) }

    /// The canonical string form as UTF-8 bytes.
    public var serializedBytes: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(4 + (iv.count + ciphertext.count + (mac?.count ?? 0)) * 4 / 3 + 12)
        out.append(UInt8(ascii: "0") + type.rawValue)
        out.append(UInt8(ascii: "."))
        Base64.appendEncoded(iv, to: &out)
        out.append(UInt8(ascii: "|"))
        Base64.appendEncoded(ciphertext, to: &out)
        if let mac {
            out.append(UInt8(ascii: "|"))
            Base64.appendEncoded(mac, to: &out)
        }
        return out
    }

    /// The canonical string form, ``serialized``.
    public var description: String { serialized }

    // MARK: Codable: a plain JSON string, as on the wire.

    /// Decodes an EncString from a plain JSON string; throws `DecodingError` if the value is
    /// not a string and ``VaultCryptoError/invalidEncString(_:)`` if the string does not parse.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        try self.init(container.decode(String.self))
    }

    /// Encodes the EncString as a single JSON string, its ``serialized`` form.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(serialized)
    }

    // MARK: Encryption

    /// Encrypts `plaintext` as a type-2 EncString with a fresh random IV from `random`.
    public static func encrypt(
        _ plaintext: some DataProtocol, key: SymmetricCryptoKey, random: any RandomSource = SystemRandomSource()
    ) -> EncString {
        encrypt(plaintext, key: key, iv: random.bytes(16))
    }

    /// Encrypts a UTF-8 string as a type-2 EncString.
    public static func encrypt(
        _ plaintext: String, key: SymmetricCryptoKey, random: any RandomSource = SystemRandomSource()
    ) -> EncString {
        encrypt(Array(plaintext.utf8), key: key, iv: random.bytes(16))
    }

    /// Encrypts with an explicit 16-byte IV (for test vectors and deterministic replays).
    public static func encrypt(_ plaintext: some DataProtocol, key: SymmetricCryptoKey, iv: [UInt8]) -> EncString {
        precondition(iv.count == 16, "AES-CBC IV must be 16 bytes")
        let ciphertext = AESCBC.encrypt(plaintext, key: key.encryptionKey, iv: iv)
        let mac = computeMac(iv: iv, ciphertext: ciphertext, key: key.mac)
        return try! EncString(iv: iv, ciphertext: ciphertext, mac: mac)
    }

    static func computeMac(iv: [UInt8], ciphertext: [UInt8], key: KeyedHMACSHA256) -> [UInt8] {
        var hmac = key
        hmac.update(data: iv)
        hmac.update(data: ciphertext)
        return hmac.finalize()
    }

    /// Verifies the MAC (constant time) and decrypts with a 64-byte key.
    ///
    /// Throws ``VaultCryptoError/authenticationFailed`` for a wrong key or altered data, and
    /// ``VaultCryptoError/wrongKeyType(_:)`` for a type-0 string (Bitwarden refuses to read
    /// unauthenticated data with a MAC-capable key).
    public func decrypt(key: SymmetricCryptoKey) throws -> [UInt8] {
        guard type == .aesCbc256HmacSha256B64, let mac else {
            throw VaultCryptoError.wrongKeyType("a type-0 (unauthenticated) EncString cannot be decrypted with a 64-byte key")
        }
        let expected = Self.computeMac(iv: iv, ciphertext: ciphertext, key: key.mac)
        guard constantTimeEquals(expected, mac) else { throw VaultCryptoError.authenticationFailed }
        return try AESCBC.decryptVerified(ciphertext, key: key.encryptionKey, iv: iv)
    }

    /// Decrypts and interprets the plaintext as UTF-8.
    public func decryptString(key: SymmetricCryptoKey) throws -> String {
        let bytes = try decrypt(key: key)
        guard let string = String(validating: bytes, as: UTF8.self) else { throw VaultCryptoError.invalidUTF8 }
        return string
    }

    /// Decrypts a legacy type-0 EncString with a bare 32-byte AES key. Bitwarden allows this
    /// only to unwrap very old protected user keys with the (unstretched) master key.
    public func decryptLegacy(aesKey: SymmetricKey) throws -> [UInt8] {
        guard type == .aesCbc256B64 else {
            throw VaultCryptoError.wrongKeyType("legacy decryption applies to type-0 EncStrings only")
        }
        guard aesKey.bitCount == 256 else {
            throw VaultCryptoError.invalidKeyLength(expected: 32, actual: aesKey.bitCount / 8)
        }
        return try AESCBC.decryptUnauthenticated(ciphertext, key: aesKey, iv: iv)
    }
}
