import Crypto
import Foundation

/// Bitwarden's encrypted binary blob (`EncArrayBuffer`), the form of an attachment's file body:
/// one type byte, then the parts an EncString carries as base64, as raw bytes.
///
/// ```text
/// [type = 2 (AesCbc256_HmacSha256_B64)][iv: 16][mac: 32][ciphertext: AES-256-CBC, PKCS#7]
/// ```
///
/// The MAC is HMAC-SHA256 over iv ‖ ciphertext, exactly as for a type-2 EncString, and is
/// verified in constant time before anything is decrypted.
///
/// ```swift
/// let attachmentKey = SymmetricCryptoKey.generate()
/// let sealed = EncArrayBuffer.encrypt(fileBytes, key: attachmentKey)
/// let upload = sealed.bytes                                   // what the server stores
/// let plain = try EncArrayBuffer(bytes: upload).decrypt(key: attachmentKey)
/// ```
public struct EncArrayBuffer: Sendable, Hashable {
    /// The one type this format takes: 2, AES-256-CBC with HMAC-SHA256.
    public static let typeByte: UInt8 = EncString.EncryptionType.aesCbc256HmacSha256B64.rawValue
    /// Bytes before the ciphertext: the type, the IV and the MAC.
    public static let headerCount = 1 + 16 + 32

    /// The 16-byte CBC initialisation vector.
    public let iv: [UInt8]
    /// The 32-byte HMAC-SHA256 of iv ‖ ciphertext.
    public let mac: [UInt8]
    /// The ciphertext (whole AES blocks, PKCS#7-padded).
    public let ciphertext: [UInt8]

    /// Parses the binary form. Throws ``VaultCryptoError/invalidEncArrayBuffer(_:)`` naming what
    /// is wrong: another type byte, a body too short for the header and one block, or a
    /// ciphertext that is not whole blocks.
    public init(bytes: some Collection<UInt8>) throws {
        let bytes = Array(bytes)
        guard let type = bytes.first else { throw VaultCryptoError.invalidEncArrayBuffer("the data is empty") }
        guard type == Self.typeByte else {
            throw VaultCryptoError.invalidEncArrayBuffer(
                "encryption type \(type) is not supported (expected \(Self.typeByte), AES-256-CBC with HMAC-SHA256)")
        }
        guard bytes.count >= Self.headerCount + 16 else {
            throw VaultCryptoError.invalidEncArrayBuffer(
                "\(bytes.count) bytes is too short: type, IV and MAC take \(Self.headerCount) and the ciphertext at least 16")
        }
        let ciphertext = Array(bytes[Self.headerCount...])
        guard ciphertext.count % 16 == 0 else {
            throw VaultCryptoError.invalidEncArrayBuffer("the ciphertext is \(ciphertext.count) bytes, not a multiple of 16")
        }
        self.init(unchecked: Array(bytes[1..<17]), mac: Array(bytes[17..<49]), ciphertext: ciphertext)
    }

    private init(unchecked iv: [UInt8], mac: [UInt8], ciphertext: [UInt8]) {
        self.iv = iv
        self.mac = mac
        self.ciphertext = ciphertext
    }

    /// The binary form: type byte, IV, MAC, ciphertext.
    public var bytes: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(Self.headerCount + ciphertext.count)
        out.append(Self.typeByte)
        out.append(contentsOf: iv)
        out.append(contentsOf: mac)
        out.append(contentsOf: ciphertext)
        return out
    }

    /// Encrypts `plaintext` under `key` with a fresh IV from `random`.
    public static func encrypt(
        _ plaintext: some DataProtocol, key: SymmetricCryptoKey, random: any RandomSource = SystemRandomSource()
    ) -> EncArrayBuffer {
        encrypt(plaintext, key: key, iv: random.bytes(16))
    }

    /// Encrypts with an explicit 16-byte IV (test vectors and deterministic replays).
    public static func encrypt(_ plaintext: some DataProtocol, key: SymmetricCryptoKey, iv: [UInt8]) -> EncArrayBuffer {
        precondition(iv.count == 16, "AES-CBC IV must be 16 bytes")
        let ciphertext = AESCBC.encrypt(plaintext, key: key.encryptionKey, iv: iv)
        return EncArrayBuffer(unchecked: iv, mac: EncString.computeMac(iv: iv, ciphertext: ciphertext, key: key.mac),
                              ciphertext: ciphertext)
    }

    /// Verifies the MAC (constant time), then decrypts. Throws
    /// ``VaultCryptoError/authenticationFailed`` for a wrong key or altered bytes.
    public func decrypt(key: SymmetricCryptoKey) throws -> [UInt8] {
        let expected = EncString.computeMac(iv: iv, ciphertext: ciphertext, key: key.mac)
        guard constantTimeEquals(expected, mac) else { throw VaultCryptoError.authenticationFailed }
        return try AESCBC.decryptVerified(ciphertext, key: key.encryptionKey, iv: iv)
    }
}

/// One attachment sealed for upload: its own fresh key (wrapped by the item's key), its file
/// name and its body, each encrypted as Bitwarden clients do.
///
/// The wrapping key is the cipher's own key when the item has one (`Cipher.key`), otherwise
/// the user key (or the organization key); `Cipher.fieldKey(userKey:)` in VaultModel picks it.
///
/// ```swift
/// let sealed = SealedAttachment.seal(fileName: "scan.pdf", contents: bytes, itemKey: itemKey)
/// // upload sealed.wrappedKey, sealed.fileName, sealed.encryptedData
/// let plain = try SealedAttachment.open(encryptedData: downloaded, wrappedKey: sealed.wrappedKey, itemKey: itemKey)
/// ```
public struct SealedAttachment: Sendable {
    /// The attachment's own 64-byte key. Key material.
    public let attachmentKey: SymmetricCryptoKey
    /// ``attachmentKey`` wrapped by the item key (the attachment's `key` field).
    public let wrappedKey: EncString
    /// The file name encrypted with the item key (the attachment's `fileName` field).
    public let fileName: EncString
    /// The file body encrypted with ``attachmentKey``, in binary ``EncArrayBuffer`` form.
    public let encryptedData: [UInt8]

    /// Generates an attachment key and encrypts the name and the body.
    public static func seal(fileName: String, contents: some DataProtocol, itemKey: SymmetricCryptoKey,
                            random: any RandomSource = SystemRandomSource()) -> SealedAttachment {
        let attachmentKey = SymmetricCryptoKey.generate(using: random)
        return SealedAttachment(
            attachmentKey: attachmentKey,
            wrappedKey: itemKey.wrap(attachmentKey, random: random),
            fileName: EncString.encrypt(fileName, key: itemKey, random: random),
            encryptedData: EncArrayBuffer.encrypt(contents, key: attachmentKey, random: random).bytes)
    }

    /// Unwraps the attachment key with the item key and decrypts a downloaded body.
    public static func open(encryptedData: some Collection<UInt8>, wrappedKey: EncString,
                            itemKey: SymmetricCryptoKey) throws -> [UInt8] {
        let attachmentKey = try itemKey.unwrap(wrappedKey)
        return try EncArrayBuffer(bytes: encryptedData).decrypt(key: attachmentKey)
    }
}
