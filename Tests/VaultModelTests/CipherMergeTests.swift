import Foundation
import Testing
import VaultCrypto
@testable import VaultModel

/// `Cipher.sameContent(as:)` (how the resolver recognises its own write) and
/// `CipherView.merged(base:current:)` (a save from a stale view).
@Suite struct CipherMergeTests {
    static let key = Fixtures.userKey

    static func login(name: String = "Bank", notes: String? = "notes", username: String = "alice", password: String = "pw-0") -> CipherView {
        CipherView(type: .login, name: name, notes: notes, login: LoginView(username: username, password: password))
    }

    static func encrypted(_ view: CipherView) throws -> Cipher {
        try view.encrypt(userKey: key)
    }

    // MARK: Same content

    @Test func sameContent_ignoresWhatTheServerAssigns() throws {
        let sent = try Self.encrypted(Self.login())
        var onServer = sent
        onServer.id = "server-id"
        onServer.revisionDate = BitwardenDate(Date(timeIntervalSince1970: 1_800_000_000))
        onServer.creationDate = onServer.revisionDate
        onServer.edit = true
        onServer.viewPassword = true
        onServer.object = "cipherDetails"
        onServer.extra = ["data": .null]
        onServer.favorite = sent.favorite ?? false
        onServer.passwordHistory = sent.passwordHistory ?? []
        #expect(sent.sameContent(as: onServer))
    }

    enum NamePreserving: String, CaseIterable, Sendable { case favorite, folder, attachment, reencrypted }

    /// Another device's change that keeps the encrypted name still makes the content differ.
    @Test(arguments: NamePreserving.allCases)
    func sameContent_seesAChangeThatKeepsTheName(change: NamePreserving) throws {
        let sent = try Self.encrypted(Self.login())
        var other = sent
        switch change {
        case .favorite: other.favorite = !(sent.favorite ?? false)
        case .folder: other.folderId = "folder-1"
        case .attachment: other.attachments = [CipherAttachment(id: "attachment-1")]
        case .reencrypted:
            var view = try sent.decrypt(userKey: Self.key)
            view.localBase = nil
            other = try Self.encrypted(view)
            other.name = sent.name
        }
        #expect(other.name == sent.name)
        #expect(!sent.sameContent(as: other))
    }

    // MARK: Merge

    @Test func merge_keepsPartsOnlyTheOtherSaveChanged_withoutConflict() {
        let base = Self.login()
        var mine = base
        mine.login?.password = "pw-mine"
        var theirs = base
        theirs.notes = "their notes"
        theirs.login?.username = "bob"
        theirs.favorite = true
        let merge = mine.merged(base: base, current: theirs)
        #expect(merge.conflicts.isEmpty)
        #expect(merge.merged.notes == "their notes")
        #expect(merge.merged.login?.username == "bob")
        #expect(merge.merged.favorite == true)
        #expect(merge.merged.login?.password == "pw-mine")
    }

    @Test func merge_passwordBothChanged_isNoConflict_andTheHistoryRuleKeepsTheirs() {
        let base = Self.login()
        var mine = base
        mine.login?.password = "pw-mine"
        var theirs = base
        theirs.login?.password = "pw-theirs"
        theirs.passwordHistory = [PasswordHistoryView(password: "pw-0", lastUsedDate: nil)]
        let merge = mine.merged(base: base, current: theirs)
        #expect(merge.conflicts.isEmpty)
        #expect(merge.merged.login?.password == "pw-mine")
        let saved = merge.merged.applyingPasswordHistory(original: theirs, now: BitwardenDate(Date(timeIntervalSince1970: 0)))
        #expect(saved.passwordHistory?.compactMap(\.password) == ["pw-theirs", "pw-0"])
    }

    @Test func merge_samePartChangedDifferently_keepsMine_andReportsTheConflict() {
        let base = Self.login()
        var mine = base
        mine.notes = "mine"
        var theirs = base
        theirs.notes = "theirs"
        let merge = mine.merged(base: base, current: theirs)
        #expect(merge.conflicts == ["notes"])
        #expect(merge.merged.notes == "mine")
    }

    @Test func merge_samePartChangedTheSameWay_isNoConflict() {
        let base = Self.login()
        var mine = base
        mine.notes = "same"
        var theirs = base
        theirs.notes = "same"
        #expect(mine.merged(base: base, current: theirs).conflicts.isEmpty)
    }

    /// Custom fields merge by name: one save's field and the other's are different parts.
    @Test func merge_customFieldsByName_differentFieldsAreNoConflict() {
        var base = Self.login()
        base.fields = [FieldView(type: .hidden, name: "PIN", value: "1"), FieldView(type: .text, name: "Door", value: "2")]
        var mine = base
        mine.fields?[0].value = "pin-mine"
        var theirs = base
        theirs.fields?[1].value = "door-theirs"
        theirs.fields?.append(FieldView(type: .text, name: "Floor", value: "3"))
        let merge = mine.merged(base: base, current: theirs)
        #expect(merge.conflicts.isEmpty)
        #expect(merge.merged.fields?.map(\.value) == ["pin-mine", "door-theirs", "3"])
        var both = base
        both.fields?[0].value = "pin-theirs"
        #expect(mine.merged(base: base, current: both).conflicts == ["field:PIN"])
    }

    /// The resolver's parts: username, password and TOTP are one part (the credential), and a
    /// password both changed is a conflict there.
    @Test func merge_resolutionParts_groupTheCredential() {
        let base = Self.login()
        var mine = base
        mine.login?.password = "pw-mine"
        var theirs = base
        theirs.login?.username = "bob"
        #expect(mine.merged(base: base, current: theirs).conflicts.isEmpty)
        #expect(mine.merged(base: base, current: theirs, parts: .resolution).conflicts == ["credential"])
        theirs = base
        theirs.name = "Bank (joint)"
        let merge = mine.merged(base: base, current: theirs, parts: .resolution)
        #expect(merge.conflicts.isEmpty)
        #expect(merge.changedHere == ["credential"] && merge.takenFromCurrent == ["name"])
        #expect(merge.merged.name == "Bank (joint)" && merge.merged.login?.password == "pw-mine")
    }
}
