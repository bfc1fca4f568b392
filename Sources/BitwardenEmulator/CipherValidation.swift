import VaultJSON
import VaultModel

/// Validation errors in the server's shape: model property paths (`Name`, `Login.Password`,
/// `Fields[0].Value`) to messages.
struct ValidationErrors {
    private(set) var entries: [(key: String, messages: [String])] = []

    var isEmpty: Bool { entries.isEmpty }

    mutating func add(_ key: String, _ message: String) {
        if let index = entries.firstIndex(where: { $0.key == key }) {
            entries[index].messages.append(message)
        } else {
            entries.append((key, [message]))
        }
    }

    var json: JSONValue {
        .object(JSONObject(entries.map { ($0.key, JSONValue.array($0.messages.map(JSONValue.string))) }))
    }

    /// The first message, for a one-line summary.
    var firstMessage: String? { entries.first?.messages.first }
}

/// Checks a `CipherRequestModel` body as the Bitwarden server's DataAnnotations do
/// (as Bitwarden and Vaultwarden validate them; `Docs/Emulator.md`).
enum CipherValidation {
    struct Rule {
        let wire: String
        let display: String
        let maxLength: Int?
        var required = false
    }

    static let topLevel = [
        Rule(wire: "name", display: "Name", maxLength: 1000, required: true),
        Rule(wire: "notes", display: "Notes", maxLength: 10000),
        Rule(wire: "key", display: "Key", maxLength: nil),
    ]
    static let login = [
        Rule(wire: "username", display: "Username", maxLength: 1000),
        Rule(wire: "password", display: "Password", maxLength: 5000),
        Rule(wire: "totp", display: "Totp", maxLength: 1000),
        Rule(wire: "uri", display: "Uri", maxLength: 10000),
    ]
    static let uri = [
        Rule(wire: "uri", display: "Uri", maxLength: 10000),
        Rule(wire: "uriChecksum", display: "UriChecksum", maxLength: nil),
    ]
    static let field = [
        Rule(wire: "name", display: "Name", maxLength: 1000),
        Rule(wire: "value", display: "Value", maxLength: 5000),
    ]
    static let passwordHistory = [Rule(wire: "password", display: "Password", maxLength: 5000, required: true)]
    static let card = ["cardholderName", "brand", "number", "expMonth", "expYear", "code"]
        .map { Rule(wire: $0, display: pascal($0), maxLength: 1000) }
    static let identity = [
        "title", "firstName", "middleName", "lastName", "address1", "address2", "address3", "city", "state",
        "postalCode", "country", "company", "email", "phone", "ssn", "username", "passportNumber", "licenseNumber",
    ].map { Rule(wire: $0, display: pascal($0), maxLength: 1000) }
    static let sshKey = [
        Rule(wire: "privateKey", display: "PrivateKey", maxLength: 5000),
        Rule(wire: "publicKey", display: "PublicKey", maxLength: 5000),
        Rule(wire: "keyFingerprint", display: "KeyFingerprint", maxLength: 1000),
    ]
    static let fido2 = [
        "credentialId", "keyType", "keyAlgorithm", "keyCurve", "keyValue", "rpId", "rpName", "userHandle",
        "userName", "userDisplayName", "counter", "discoverable",
    ].map { Rule(wire: $0, display: pascal($0), maxLength: nil) }

    static func pascal(_ s: String) -> String { s.prefix(1).uppercased() + s.dropFirst() }

    /// Bitwarden: every EncString field well-formed and within its length; `name` required.
    static func validateBitwarden(_ body: JSONObject, isCreate: Bool) -> ValidationErrors {
        var errors = ValidationErrors()
        check(body, topLevel, prefix: "", into: &errors)
        if isCreate {
            switch body["type"] {
            case .integer(let t) where (1...8).contains(t): break
            case nil, .null?: errors.add("Type", "The Type field is required.")
            default: errors.add("Type", "The JSON value could not be converted to CipherType. Path: $.type")
            }
        }
        if case .string(let org)? = body["organizationId"], org.count > 36 {
            errors.add("OrganizationId", "The field OrganizationId must be a string with a maximum length of 36.")
        }
        checkReprompt(body, into: &errors)
        if let login = object(body, "login", "Login", into: &errors) {
            check(login, Self.login, prefix: "Login.", into: &errors)
            for (i, uri) in objects(login, "uris", "Login.Uris", into: &errors) {
                check(uri, Self.uri, prefix: "Login.Uris[\(i)].", into: &errors)
            }
            for (i, credential) in objects(login, "fido2Credentials", "Login.Fido2Credentials", into: &errors) {
                check(credential, fido2, prefix: "Login.Fido2Credentials[\(i)].", into: &errors)
            }
        }
        for (wire, display, rules) in [("card", "Card", card), ("identity", "Identity", identity), ("sshKey", "SSHKey", sshKey)] {
            if let sub = object(body, wire, display, into: &errors) {
                check(sub, rules, prefix: display + ".", into: &errors)
            }
        }
        for (i, f) in objects(body, "fields", "Fields", into: &errors) {
            check(f, field, prefix: "Fields[\(i)].", into: &errors)
        }
        for (i, entry) in objects(body, "passwordHistory", "PasswordHistory", into: &errors) {
            check(entry, passwordHistory, prefix: "PasswordHistory[\(i)].", into: &errors)
            switch entry["lastUsedDate"] {
            case .string(let s)? where parseDate(s) != nil: break
            case nil, .null?: errors.add("PasswordHistory[\(i)].LastUsedDate", "The LastUsedDate field is required.")
            default:
                errors.add("PasswordHistory[\(i)].LastUsedDate",
                           "The JSON value could not be converted to System.DateTime. Path: $.passwordHistory[\(i)].lastUsedDate")
            }
        }
        if case .string(let data)? = body["data"], data.count > 500_000 {
            errors.add("Data", "The field Data must be a string with a maximum length of 500000.")
        }
        return errors
    }

    /// Vaultwarden: no EncString checks; the notes length, a known type and reprompt 0 or 1.
    static func validateVaultwarden(_ body: JSONObject, isCreate: Bool) -> String? {
        if isCreate {
            guard case .integer(let t)? = body["type"], (1...8).contains(t) else { return "Invalid type" }
        }
        if case .string(let name)? = body["name"], name.isEmpty { return "The field Name is required." }
        if body["name"] == nil || body["name"] == .null { return "The field Name is required." }
        if case .string(let notes)? = body["notes"], notes.count > 10000 {
            return "The field Notes exceeds the maximum encrypted value length of 10000 characters."
        }
        if let reprompt = body["reprompt"], reprompt != .null, reprompt != .integer(0), reprompt != .integer(1) {
            return "Invalid reprompt type"
        }
        return nil
    }

    private static func checkReprompt(_ body: JSONObject, into errors: inout ValidationErrors) {
        switch body["reprompt"] {
        case nil, .null?, .integer(0)?, .integer(1)?: break
        default: errors.add("Reprompt", "The JSON value could not be converted to CipherRepromptType. Path: $.reprompt")
        }
    }

    private static func check(_ object: JSONObject, _ rules: [Rule], prefix: String, into errors: inout ValidationErrors) {
        for rule in rules {
            let key = prefix + rule.display
            switch object[rule.wire] {
            case nil, .null?:
                if rule.required { errors.add(key, "The \(rule.display) field is required.") }
            case .string(let value)?:
                if value.isEmpty && rule.required {
                    errors.add(key, "The \(rule.display) field is required.")
                } else if !EncStringRules.isValid(value) {
                    errors.add(key, "\(rule.display) is not a valid encrypted string.")
                } else if let max = rule.maxLength, value.utf8.count > max {
                    errors.add(key, "The field \(rule.display) exceeds the maximum encrypted value length of \(max) characters.")
                }
            default:
                errors.add(key, "The JSON value could not be converted to System.String. Path: $.\(rule.wire)")
            }
        }
    }

    private static func object(_ body: JSONObject, _ wire: String, _ display: String, into errors: inout ValidationErrors) -> JSONObject? {
        switch body[wire] {
        case nil, .null?: return nil
        case .object(let o)?: return o
        default:
            errors.add(display, "The JSON value could not be converted to \(display)RequestModel. Path: $.\(wire)")
            return nil
        }
    }

    private static func objects(_ body: JSONObject, _ wire: String, _ display: String, into errors: inout ValidationErrors) -> [(Int, JSONObject)] {
        switch body[wire] {
        case nil, .null?: return []
        case .array(let items)?:
            var out: [(Int, JSONObject)] = []
            for (i, item) in items.enumerated() {
                if case .object(let o) = item { out.append((i, o)) } else {
                    errors.add("\(display)[\(i)]", "The JSON value could not be converted to an object. Path: $.\(wire)[\(i)]")
                }
            }
            return out
        default:
            errors.add(display, "The JSON value could not be converted to a list. Path: $.\(wire)")
            return []
        }
    }

    /// Parses a date as ASP.NET model binding would: RFC 3339, or a date-time without a zone
    /// (taken as UTC, as mobile clients' `0001-01-01T00:00:00`).
    static func parseDate(_ text: String) -> BitwardenDate? {
        if let date = try? BitwardenDate(text) { return date }
        return try? BitwardenDate(text + "Z")
    }
}
