import Foundation

extension CipherView {
    /// How many password-history entries Bitwarden keeps (the oldest are dropped).
    public static let maxPasswordHistoryEntries = 5

    /// Whether the login password differs from `original`'s (nil and "" count as no password).
    public func passwordChanged(from original: CipherView) -> Bool {
        (login?.password ?? "") != (original.login?.password ?? "")
    }

    /// This edited item with Bitwarden's password-history rule applied against the item as it
    /// was before the edit (the Rust SDK's `update_password_history`):
    ///
    /// - a changed login password pushes the *old* password with `lastUsedDate = now` and sets
    ///   `passwordRevisionDate = now`; an unchanged one keeps `original`'s revision date; a
    ///   password added where there was none sets the revision date without a history entry;
    /// - each hidden custom field (non-empty name and value) of `original` whose value changed
    ///   or that is gone adds `"<name>: <old value>"` (only when this item has a fields list,
    ///   as in the SDK);
    /// - newest first: hidden-field entries (last field first), then the password entry, then
    ///   `original`'s history, capped at ``maxPasswordHistoryEntries``. The history is always
    ///   set, `[]` when empty (the SDK's `Some(vec![])`; the TS client would send null).
    ///
    /// Only `passwordHistory` and `login.passwordRevisionDate` of the result differ from `self`.
    ///
    /// Pure: `now` is passed in, nothing else is read.
    public func applyingPasswordHistory(original: CipherView, now: BitwardenDate) -> CipherView {
        var updated = self
        var changes: [PasswordHistoryView] = []

        if updated.login != nil, let originalLogin = original.login {
            let originalPassword = originalLogin.password ?? ""
            let currentPassword = updated.login?.password ?? ""
            if originalPassword.isEmpty {
                if !currentPassword.isEmpty { updated.login?.passwordRevisionDate = now }
            } else if originalPassword == currentPassword {
                updated.login?.passwordRevisionDate = originalLogin.passwordRevisionDate
            } else {
                updated.login?.passwordRevisionDate = now
                changes.append(PasswordHistoryView(password: originalPassword, lastUsedDate: now))
            }
        }

        if let currentFields = updated.fields {
            let current = Self.hiddenFieldValues(currentFields)
            let previous = Self.hiddenFieldValues(original.fields ?? [])
            for name in previous.order {
                let oldValue = previous.values[name]!
                guard current.values[name] != oldValue else { continue }
                changes.append(PasswordHistoryView(password: "\(name): \(oldValue)", lastUsedDate: now))
            }
        }

        // The SDK chains [password change] + [field changes], reverses, then appends history.
        let history = changes.reversed() + (original.passwordHistory ?? [])
        updated.passwordHistory = Array(history.prefix(Self.maxPasswordHistoryEntries))
        return updated
    }

    /// Hidden fields with a non-empty name and value, by name (last value wins, as the SDK's
    /// map), in order of first appearance so the result is deterministic.
    private static func hiddenFieldValues(_ fields: [FieldView]) -> (order: [String], values: [String: String]) {
        var order: [String] = []
        var values: [String: String] = [:]
        for field in fields where field.type == .hidden {
            guard let name = field.name, !name.isEmpty, let value = field.value, !value.isEmpty else { continue }
            if values.updateValue(value, forKey: name) == nil { order.append(name) }
        }
        return (order, values)
    }
}
