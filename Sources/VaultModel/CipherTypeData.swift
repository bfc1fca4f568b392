import Foundation
import VaultCrypto
import VaultJSON

/// Card details of a cipher (`card`).
public struct CipherCard: EncryptedTextRecord, Equatable {
    /// Encrypted cardholder name.
    public var cardholderName: EncString?
    /// Encrypted brand (`"Visa"`, …).
    public var brand: EncString?
    /// Encrypted card number.
    public var number: EncString?
    /// Encrypted expiry month.
    public var expMonth: EncString?
    /// Encrypted expiry year.
    public var expYear: EncString?
    /// Encrypted security code.
    public var code: EncString?
    /// Fields this version does not know, kept verbatim.
    public var extra: [String: JSONValue] = [:]

    /// Creates empty card details; set the fields you need.
    public init() {}

    static var encryptedFields: [(name: String, path: WritableKeyPath<Self, EncString?>)] {
        [("cardholderName", \.cardholderName), ("brand", \.brand), ("number", \.number),
         ("expMonth", \.expMonth), ("expYear", \.expYear), ("code", \.code)]
    }

    /// Decodes the wire JSON, keeping unknown fields in `extra`.
    public init(from decoder: any Decoder) throws { try self.init(decodingRecordFrom: decoder) }
    /// Encodes the known fields (nil as `null`, as the server writes them), then the carried unknown fields.
    public func encode(to encoder: any Encoder) throws { try encodeRecord(to: encoder) }
}

/// Identity details of a cipher (`identity`).
public struct CipherIdentity: EncryptedTextRecord, Equatable {
    /// Encrypted title (Mr, Ms, …).
    public var title: EncString?
    /// Encrypted first name.
    public var firstName: EncString?
    /// Encrypted middle name.
    public var middleName: EncString?
    /// Encrypted last name.
    public var lastName: EncString?
    /// Encrypted address line 1.
    public var address1: EncString?
    /// Encrypted address line 2.
    public var address2: EncString?
    /// Encrypted address line 3.
    public var address3: EncString?
    /// Encrypted city.
    public var city: EncString?
    /// Encrypted state or province.
    public var state: EncString?
    /// Encrypted postal code.
    public var postalCode: EncString?
    /// Encrypted country.
    public var country: EncString?
    /// Encrypted company.
    public var company: EncString?
    /// Encrypted email address.
    public var email: EncString?
    /// Encrypted phone number.
    public var phone: EncString?
    /// Encrypted social security number.
    public var ssn: EncString?
    /// Encrypted user name.
    public var username: EncString?
    /// Encrypted passport number.
    public var passportNumber: EncString?
    /// Encrypted license number.
    public var licenseNumber: EncString?
    /// Fields this version does not know, kept verbatim.
    public var extra: [String: JSONValue] = [:]

    /// Creates empty identity details; set the fields you need.
    public init() {}

    static var encryptedFields: [(name: String, path: WritableKeyPath<Self, EncString?>)] {
        [("title", \.title), ("firstName", \.firstName), ("middleName", \.middleName), ("lastName", \.lastName),
         ("address1", \.address1), ("address2", \.address2), ("address3", \.address3), ("city", \.city),
         ("state", \.state), ("postalCode", \.postalCode), ("country", \.country), ("company", \.company),
         ("email", \.email), ("phone", \.phone), ("ssn", \.ssn), ("username", \.username),
         ("passportNumber", \.passportNumber), ("licenseNumber", \.licenseNumber)]
    }

    /// Decodes the wire JSON, keeping unknown fields in `extra`.
    public init(from decoder: any Decoder) throws { try self.init(decodingRecordFrom: decoder) }
    /// Encodes the known fields (nil as `null`, as the server writes them), then the carried unknown fields.
    public func encode(to encoder: any Encoder) throws { try encodeRecord(to: encoder) }
}

/// SSH key of a cipher (`sshKey`). The fingerprint's wire name is `keyFingerprint`.
public struct CipherSSHKey: EncryptedTextRecord, Equatable {
    /// Encrypted private key (OpenSSH format).
    public var privateKey: EncString?
    /// Encrypted public key.
    public var publicKey: EncString?
    /// Encrypted fingerprint (wire name `keyFingerprint`).
    public var keyFingerprint: EncString?
    /// Fields this version does not know, kept verbatim.
    public var extra: [String: JSONValue] = [:]

    /// Creates an empty SSH key; set the fields you need.
    public init() {}

    static var encryptedFields: [(name: String, path: WritableKeyPath<Self, EncString?>)] {
        [("privateKey", \.privateKey), ("publicKey", \.publicKey), ("keyFingerprint", \.keyFingerprint)]
    }

    /// Decodes the wire JSON, keeping unknown fields in `extra`.
    public init(from decoder: any Decoder) throws { try self.init(decodingRecordFrom: decoder) }
    /// Encodes the known fields (nil as `null`, as the server writes them), then the carried unknown fields.
    public func encode(to encoder: any Encoder) throws { try encodeRecord(to: encoder) }
}

/// Secure-note details of a cipher (`secureNote`); the text itself is the cipher's `notes`.
public struct CipherSecureNote: Codable, Sendable, Equatable {
    /// The note kind (always generic today).
    public var type: SecureNoteType?
    /// Fields this version does not know, kept verbatim.
    public var extra: [String: JSONValue]

    /// Creates secure-note details.
    public init(type: SecureNoteType? = .generic, extra: [String: JSONValue] = [:]) {
        self.type = type
        self.extra = extra
    }

    /// Decodes the wire JSON, keeping unknown fields in `extra`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyCodingKey.self)
        type = try c.optional("type")
        extra = try c.unknownFields(known: ["type"], in: decoder)
    }

    /// Encodes the known fields (nil as `null`, as the server writes them), then the carried unknown fields.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: AnyCodingKey.self)
        try c.put(type, "type")
        try c.putUnknown(extra, known: ["type"])
    }
}
