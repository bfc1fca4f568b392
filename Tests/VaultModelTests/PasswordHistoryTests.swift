import Foundation
import Testing
@testable import VaultModel

/// The Rust SDK's password-history tests (`cipher_client/edit.rs`), plus the ordering rules.
@Suite("Password history")
struct PasswordHistoryTests {
    static let then = try! BitwardenDate("2023-06-01T00:00:00.0000000Z")
    static let now = try! BitwardenDate("2024-05-01T12:34:56.7890123Z")

    func login(password: String?, history: [PasswordHistoryView]? = nil, fields: [FieldView]? = nil) -> CipherView {
        CipherView(
            type: .login, name: "Item",
            login: LoginView(username: "user", password: password, passwordRevisionDate: password == nil ? nil : Self.then),
            fields: fields, passwordHistory: history)
    }

    @Test func passwordChange_recordsOldPasswordAndSetsRevisionDate() {
        let original = login(password: "old_password")
        var edited = original
        edited.login?.password = "new_password"
        let result = edited.applyingPasswordHistory(original: original, now: Self.now)
        #expect(result.passwordHistory == [PasswordHistoryView(password: "old_password", lastUsedDate: Self.now)])
        #expect(result.login?.passwordRevisionDate == Self.now)
        #expect(result.login?.password == "new_password")
    }

    @Test func hiddenFieldChange_recordsNameAndOldValue() {
        let original = login(password: "same", fields: [FieldView(type: .hidden, name: "Secret Key", value: "old_secret_value")])
        var edited = original
        edited.fields = [FieldView(type: .hidden, name: "Secret Key", value: "new_secret_value")]
        let result = edited.applyingPasswordHistory(original: original, now: Self.now)
        #expect(result.passwordHistory?.map(\.password) == ["Secret Key: old_secret_value"])
        #expect(result.passwordHistory?.first?.lastUsedDate == Self.now)
    }

    @Test func removedHiddenField_isRecorded_textFieldIsNot() {
        let original = login(password: "same", fields: [
            FieldView(type: .hidden, name: "API token", value: "tok"), FieldView(type: .text, name: "Plain", value: "p"),
        ])
        var edited = original
        edited.fields = []
        let result = edited.applyingPasswordHistory(original: original, now: Self.now)
        #expect(result.passwordHistory?.map(\.password) == ["API token: tok"])
    }

    @Test func lengthLimit_keepsFiveNewestFirst() {
        let old = (0..<10).map { PasswordHistoryView(password: "old_password_\($0)", lastUsedDate: Self.then) }
        let original = login(password: "password", history: old)
        var edited = original
        edited.login?.password = "new_password"
        let result = edited.applyingPasswordHistory(original: original, now: Self.now)
        #expect(CipherView.maxPasswordHistoryEntries == 5)
        #expect(result.passwordHistory?.map(\.password) == ["password", "old_password_0", "old_password_1", "old_password_2", "old_password_3"])
    }

    @Test func unchangedPassword_preservesHistoryAndRevisionDate() {
        let old = [PasswordHistoryView(password: "a", lastUsedDate: Self.then), PasswordHistoryView(password: "b", lastUsedDate: Self.then)]
        let original = login(password: "same", history: old)
        var edited = original
        edited.name = "Renamed"
        edited.login?.passwordRevisionDate = Self.now   // an editor's stray change is undone
        let result = edited.applyingPasswordHistory(original: original, now: Self.now)
        #expect(result.passwordHistory == old)
        #expect(result.login?.passwordRevisionDate == Self.then)
    }

    @Test func newPasswordWhereNoneExisted_setsRevisionDateWithoutEntry() {
        let original = login(password: nil)
        var edited = original
        edited.login?.password = "first_password"
        let result = edited.applyingPasswordHistory(original: original, now: Self.now)
        #expect(result.passwordHistory == [])
        #expect(result.login?.passwordRevisionDate == Self.now)
    }

    @Test func passwordAndHiddenFieldsChangedTogether_fieldEntriesComeFirstLastFieldFirst() {
        let original = login(password: "old_password", history: [PasswordHistoryView(password: "ancient", lastUsedDate: Self.then)], fields: [
            FieldView(type: .hidden, name: "A", value: "a1"), FieldView(type: .hidden, name: "B", value: "b1"),
        ])
        var edited = original
        edited.login?.password = "new_password"
        edited.fields = [FieldView(type: .hidden, name: "A", value: "a2"), FieldView(type: .hidden, name: "B", value: "b2")]
        let result = edited.applyingPasswordHistory(original: original, now: Self.now)
        #expect(result.passwordHistory?.map(\.password) == ["B: b1", "A: a1", "old_password", "ancient"])
    }

    @Test(arguments: [("old", "new", true), ("same", "same", false), (nil, "", false), ("", "added", true), ("gone", nil, true)] as [(String?, String?, Bool)])
    func passwordChanged_comparesLoginPasswords(before: String?, after: String?, changed: Bool) {
        let original = login(password: before)
        var edited = original
        edited.login?.password = after
        #expect(edited.passwordChanged(from: original) == changed)
    }
}
