import Foundation

/// The result of ``CipherView/merged(base:current:)``: a save made from a view read before
/// another save of the same item, combined with that save.
public struct CipherMerge: Sendable, Equatable {
    /// The item to save: this save's changes, plus every part only the other save changed.
    public var merged: CipherView
    /// Parts both saves changed to different values (other than the password, which merges
    /// through the password history): the merged item keeps this save's value, and the other
    /// save's version must be preserved as a backup.
    public var conflicts: [String]
}

extension CipherView {
    /// Merges this save (made from a view of `base`) with `current`, another save of the same
    /// item made since `base` was read: three-way, part by part.
    ///
    /// - a part only one side changed takes that side's value;
    /// - the login password both changed takes this save's, and the other save's password goes
    ///   into the password history when the merged item is saved (the history rule runs against
    ///   `current`), so neither is lost;
    /// - any other part both changed to different values takes this save's (the newer) and is
    ///   listed in ``CipherMerge/conflicts``: the caller keeps `current` as a backup.
    ///
    /// Parts: name, notes, folder, favourite, reprompt, username, password, TOTP, URIs, passkeys,
    /// autofill-on-load, custom fields, password history, and each type's details (card,
    /// identity, note, SSH key, bank account, driver's license, passport) as one part each.
    /// The id, revision date and key of the result are `current`'s (what the save replaces).
    public func merged(base: CipherView, current: CipherView) -> CipherMerge {
        var item = ThreeWay(mine: self, original: base, theirs: current)
        item.part("name", \.name)
        item.part("notes", \.notes)
        item.part("folder", \.folderId)
        item.part("favorite", \.favorite)
        item.part("reprompt", \.reprompt)
        item.part("fields", \.fields)
        item.part("passwordHistory", \.passwordHistory, mergesInHistory: true)
        item.part("card", \.card)
        item.part("identity", \.identity)
        item.part("secureNote", \.secureNote)
        item.part("sshKey", \.sshKey)
        item.part("bankAccount", \.bankAccount)
        item.part("driversLicense", \.driversLicense)
        item.part("passport", \.passport)
        var result = item.result
        var conflicts = item.conflicts
        if let mine = login ?? current.login {
            var credential = ThreeWay(mine: mine, original: base.login ?? LoginView(), theirs: current.login ?? LoginView())
            credential.part("username", \.username)
            credential.part("password", \.password, mergesInHistory: true)
            credential.part("totp", \.totp)
            credential.part("uris", \.uris)
            credential.part("passkeys", \.fido2Credentials)
            credential.part("autofillOnPageLoad", \.autofillOnPageLoad)
            // The history rule sets the revision date against `current` when the item is saved.
            credential.result.passwordRevisionDate = current.login?.passwordRevisionDate
            result.login = credential.result
            conflicts += credential.conflicts
        }
        result.id = current.id
        result.revisionDate = current.revisionDate
        result.deletedDate = current.deletedDate
        result.attachments = current.attachments
        result.localBase = current.localBase
        return CipherMerge(merged: result, conflicts: conflicts)
    }
}

/// A three-way merge of one value, part by part: starts from `mine`.
private struct ThreeWay<Root> {
    let mine: Root, original: Root, theirs: Root
    var result: Root
    var conflicts: [String] = []

    init(mine: Root, original: Root, theirs: Root) {
        self.mine = mine
        self.original = original
        self.theirs = theirs
        result = mine
    }

    /// Only theirs changed → theirs; both changed to different values → mine, and a conflict
    /// unless the part merges through the password history.
    mutating func part<Value: Equatable>(_ name: String, _ path: WritableKeyPath<Root, Value>, mergesInHistory: Bool = false) {
        let mineValue = mine[keyPath: path], theirValue = theirs[keyPath: path], originalValue = original[keyPath: path]
        if mineValue == originalValue {
            result[keyPath: path] = theirValue
        } else if theirValue != originalValue, theirValue != mineValue, !mergesInHistory {
            conflicts.append(name)
        }
    }
}
