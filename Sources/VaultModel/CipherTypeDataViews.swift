import Foundation
import VaultCrypto
import VaultJSON

/// Decrypted card details.
public struct CardView: DecryptedTextRecord, Equatable {
    /// Cardholder name.
    public var cardholderName: String?
    /// Brand.
    public var brand: String?
    /// Card number.
    public var number: String?
    /// Expiry month.
    public var expMonth: String?
    /// Expiry year.
    public var expYear: String?
    /// Security code.
    public var code: String?
    /// Fields this version does not know, as received.
    public var extra: [String: JSONValue] = [:]

    /// Creates empty card details; set the fields you need.
    public init() {}

    static var textFields: [(name: String, path: WritableKeyPath<Self, String?>)] {
        [("cardholderName", \.cardholderName), ("brand", \.brand), ("number", \.number),
         ("expMonth", \.expMonth), ("expYear", \.expYear), ("code", \.code)]
    }
}

/// Decrypted identity details.
public struct IdentityView: DecryptedTextRecord, Equatable {
    /// Title.
    public var title: String?
    /// First name.
    public var firstName: String?
    /// Middle name.
    public var middleName: String?
    /// Last name.
    public var lastName: String?
    /// Address line 1.
    public var address1: String?
    /// Address line 2.
    public var address2: String?
    /// Address line 3.
    public var address3: String?
    /// City.
    public var city: String?
    /// State or province.
    public var state: String?
    /// Postal code.
    public var postalCode: String?
    /// Country.
    public var country: String?
    /// Company.
    public var company: String?
    /// Email address.
    public var email: String?
    /// Phone number.
    public var phone: String?
    /// Social security number.
    public var ssn: String?
    /// User name.
    public var username: String?
    /// Passport number.
    public var passportNumber: String?
    /// License number.
    public var licenseNumber: String?
    /// Fields this version does not know, as received.
    public var extra: [String: JSONValue] = [:]

    /// Creates empty identity details; set the fields you need.
    public init() {}

    static var textFields: [(name: String, path: WritableKeyPath<Self, String?>)] {
        [("title", \.title), ("firstName", \.firstName), ("middleName", \.middleName), ("lastName", \.lastName),
         ("address1", \.address1), ("address2", \.address2), ("address3", \.address3), ("city", \.city),
         ("state", \.state), ("postalCode", \.postalCode), ("country", \.country), ("company", \.company),
         ("email", \.email), ("phone", \.phone), ("ssn", \.ssn), ("username", \.username),
         ("passportNumber", \.passportNumber), ("licenseNumber", \.licenseNumber)]
    }
}

/// A decrypted SSH key. `privateKey` is never printed.
public struct SSHKeyView: DecryptedTextRecord, Equatable {
    /// Private key (OpenSSH format).
    public var privateKey: String?
    /// Public key.
    public var publicKey: String?
    /// Fingerprint (wire name `keyFingerprint`).
    public var fingerprint: String?
    /// Fields this version does not know, as received.
    public var extra: [String: JSONValue] = [:]

    /// Creates an empty SSH key; set the fields you need.
    public init() {}

    static var textFields: [(name: String, path: WritableKeyPath<Self, String?>)] {
        [("privateKey", \.privateKey), ("publicKey", \.publicKey), ("keyFingerprint", \.fingerprint)]
    }
}
