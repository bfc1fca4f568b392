import Foundation

/// A type whose descriptions and mirror show only non-secret values, so `print`, `dump`,
/// string interpolation and test failure messages never reveal passwords or keys.
protocol RedactedDescription: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Label/value pairs to show; secrets already masked.
    var redactedFields: [(String, String)] { get }
}

extension RedactedDescription {
    /// The type's name and its non-secret fields; secrets show only as `<redacted>` or `nil`.
    public var description: String {
        "\(Self.self)(" + redactedFields.map { "\($0.0): \($0.1)" }.joined(separator: ", ") + ")"
    }

    /// The same redacted text as `description`.
    public var debugDescription: String { description }

    /// A mirror of the redacted fields only, so `dump` and debuggers show no secrets.
    public var customMirror: Mirror {
        Mirror(self, children: redactedFields.map { (label: Optional($0.0), value: $0.1 as Any) }, displayStyle: .struct)
    }
}

/// Shows whether a secret is set, never its value.
func masked(_ value: String?) -> String { value == nil ? "nil" : "<redacted>" }

/// Shows a non-secret value.
func shown(_ value: (some CustomStringConvertible)?) -> String {
    value.map { "\"\($0)\"" } ?? "nil"
}

extension CipherView: RedactedDescription {
    var redactedFields: [(String, String)] {
        [
            ("id", shown(id)), ("type", type.description), ("name", shown(name)),
            ("cipherKey", cipherKey == nil ? "nil" : "<redacted>"),
            ("login", login.map(\.description) ?? "nil"),
            ("fields", fields.map { "[" + $0.map(\.description).joined(separator: ", ") + "]" } ?? "nil"),
            ("passwordHistory", passwordHistory.map { "\($0.count) entries" } ?? "nil"),
            ("attachments", attachments.map { "\($0.count)" } ?? "nil"),
            ("revisionDate", shown(revisionDate)),
        ]
    }
}

extension LoginView: RedactedDescription {
    var redactedFields: [(String, String)] {
        [("username", shown(username)), ("password", masked(password)), ("totp", masked(totp)),
         ("uris", uris.map { "\($0.count)" } ?? "nil"), ("passwordRevisionDate", shown(passwordRevisionDate)),
         ("fido2Credentials", fido2Credentials.map { "\($0.count)" } ?? "nil")]
    }
}

extension FieldView: RedactedDescription {
    var redactedFields: [(String, String)] {
        [("type", type.map { String($0.rawValue) } ?? "nil"), ("name", shown(name)),
         ("value", type == .text || type == .boolean ? shown(value) : masked(value))]
    }
}

extension PasswordHistoryView: RedactedDescription {
    var redactedFields: [(String, String)] {
        [("password", masked(password)), ("lastUsedDate", shown(lastUsedDate))]
    }
}

extension AttachmentView: RedactedDescription {
    var redactedFields: [(String, String)] {
        [("id", shown(id)), ("fileName", shown(fileName)), ("key", key == nil ? "nil" : "<redacted>"), ("size", shown(size))]
    }
}

extension TextFieldsView: RedactedDescription {
    var redactedFields: [(String, String)] {
        values.keys.sorted().map { ($0, "<redacted>") }
    }
}

extension DecryptedTextRecord {
    /// Every text field masked; only which ones are set shows.
    var maskedTextFields: [(String, String)] {
        Self.textFields.map { ($0.name, masked(self[keyPath: $0.path])) }
    }
}

extension CardView: RedactedDescription {
    var redactedFields: [(String, String)] { maskedTextFields }
}

extension IdentityView: RedactedDescription {
    var redactedFields: [(String, String)] { maskedTextFields }
}

extension SSHKeyView: RedactedDescription {
    var redactedFields: [(String, String)] {
        [("privateKey", masked(privateKey)), ("publicKey", shown(publicKey)), ("fingerprint", shown(fingerprint))]
    }
}

extension Fido2CredentialView: RedactedDescription {
    var redactedFields: [(String, String)] {
        [("rpId", shown(rpId)), ("userName", shown(userName)), ("keyValue", masked(keyValue))]
    }
}
