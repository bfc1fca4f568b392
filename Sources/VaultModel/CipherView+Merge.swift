import Foundation

/// The result of ``CipherView/merged(base:current:parts:)``: one version of an item combined
/// with another version made from the same base.
public struct CipherMerge: Sendable, Equatable {
    /// How finely an item is split into parts.
    public enum Parts: Sendable, Equatable {
        /// Two saves on this device (a save from a stale view): username, password and TOTP are
        /// parts of their own, so are favourite and reprompt, and a password both saves changed
        /// merges through the password history (no conflict).
        case save
        /// The resolver's merge of an offline change with another device's change on the
        /// server: the credential (username, password and TOTP together) is one part, so are
        /// favourite and reprompt, and a password both changed is a conflict like any part.
        /// Password histories both sides changed are combined (newest first, five entries).
        case resolution
    }

    /// The item to save: this side's changes, plus every part only the other side changed.
    public var merged: CipherView
    /// Parts both sides changed to different values (for ``Parts/save``, other than the
    /// password, which merges through the password history): the merged item keeps this side's
    /// value, and the other side's version must be preserved as a backup.
    public var conflicts: [String]
    /// Parts this side changed (its values are in ``merged``).
    public var changedHere: [String] = []
    /// Parts only the other side changed (taken from it into ``merged``).
    public var takenFromCurrent: [String] = []
}

extension CipherView {
    /// Merges this version (made from `base`) with `current`, another version of the same item
    /// made from `base` too: three-way, part by part.
    ///
    /// - a part only one side changed takes that side's value;
    /// - with ``CipherMerge/Parts/save``, the login password both changed takes this save's, and
    ///   the other save's password goes into the password history when the merged item is saved
    ///   (the history rule runs against `current`), so neither is lost;
    /// - any other part both changed to different values takes this side's and is listed in
    ///   ``CipherMerge/conflicts``: the caller keeps `current` as a backup (or, for the
    ///   resolver, decides with its conflict matrix instead).
    ///
    /// Parts: name, notes, folder, favourite, reprompt, username, password, TOTP, URIs, passkeys,
    /// autofill-on-load, each custom field (by name), password history, and each type's details
    /// (card, identity, note, SSH key, bank account, driver's license, passport) as one part each.
    /// ``CipherMerge/Parts/resolution`` groups favourite with reprompt (`favorite`) and username,
    /// password and TOTP (`credential`). Custom fields are named `field:<name>` (all of them one
    /// part, `fields`, when a side has two fields of the same name).
    /// The id, revision date, trash date, attachments and key of the result are `current`'s
    /// (what the save replaces).
    public func merged(base: CipherView, current: CipherView, parts: CipherMerge.Parts = .save) -> CipherMerge {
        var item = ThreeWay(mine: self, original: base, theirs: current)
        item.part("name", \.name)
        item.part("notes", \.notes)
        item.part("folder", \.folderId)
        switch parts {
        case .save:
            item.part("favorite", \.favorite)
            item.part("reprompt", \.reprompt)
            item.part("passwordHistory", \.passwordHistory, mergesInHistory: true)
        case .resolution:
            item.part("favorite", { Pair($0.favorite ?? false, $0.reprompt ?? CipherRepromptType.none) },
                      take: { $0.favorite = $1.favorite; $0.reprompt = $1.reprompt })
            item.combinedPasswordHistory()
        }
        item.fieldsByName()
        item.part("card", \.card)
        item.part("identity", \.identity)
        item.part("secureNote", \.secureNote)
        item.part("sshKey", \.sshKey)
        item.part("bankAccount", \.bankAccount)
        item.part("driversLicense", \.driversLicense)
        item.part("passport", \.passport)
        if login != nil || current.login != nil {
            switch parts {
            case .save:
                item.part("username", { $0.login?.username }, take: { $0.setLogin(\.username, from: $1) })
                item.part("password", { $0.login?.password }, take: { $0.setLogin(\.password, from: $1) }, mergesInHistory: true)
                item.part("totp", { $0.login?.totp }, take: { $0.setLogin(\.totp, from: $1) })
                // The history rule sets the revision date against `current` when the item is saved.
                item.result.login?.passwordRevisionDate = current.login?.passwordRevisionDate
            case .resolution:
                item.part("credential", { Triple($0.login?.username ?? "", $0.login?.password ?? "", $0.login?.totp ?? "") },
                          take: { result, source in
                              result.setLogin(\.username, from: source)
                              result.setLogin(\.password, from: source)
                              result.setLogin(\.totp, from: source)
                              result.setLogin(\.passwordRevisionDate, from: source)
                          })
            }
            item.part("uris", { $0.login?.uris ?? [] }, take: { $0.setLogin(\.uris, from: $1) })
            item.part("passkeys", { $0.login?.fido2Credentials }, take: { $0.setLogin(\.fido2Credentials, from: $1) })
            item.part("autofillOnPageLoad", { $0.login?.autofillOnPageLoad }, take: { $0.setLogin(\.autofillOnPageLoad, from: $1) })
        }
        var result = item.result
        result.id = current.id
        result.revisionDate = current.revisionDate
        result.deletedDate = current.deletedDate
        result.attachments = current.attachments
        result.localBase = current.localBase
        return CipherMerge(merged: result, conflicts: item.conflicts, changedHere: item.fromMine, takenFromCurrent: item.fromTheirs)
    }

    /// Sets one login field from `source`'s login (creating the login when this one has none).
    fileprivate mutating func setLogin<Value>(_ path: WritableKeyPath<LoginView, Value?>, from source: CipherView) {
        guard login != nil || source.login != nil else { return }
        if login == nil { login = LoginView() }
        login![keyPath: path] = source.login?[keyPath: path]
    }
}

/// Two values compared as one part.
private struct Pair<A: Equatable, B: Equatable>: Equatable {
    let a: A, b: B
    init(_ a: A, _ b: B) { self.a = a; self.b = b }
}

/// Three values compared as one part.
private struct Triple<A: Equatable, B: Equatable, C: Equatable>: Equatable {
    let a: A, b: B, c: C
    init(_ a: A, _ b: B, _ c: C) { self.a = a; self.b = b; self.c = c }
}

/// A three-way merge of one value, part by part: starts from `mine`.
private struct ThreeWay<Root> {
    let mine: Root, original: Root, theirs: Root
    var result: Root
    var conflicts: [String] = []
    var fromMine: [String] = []
    var fromTheirs: [String] = []

    init(mine: Root, original: Root, theirs: Root) {
        self.mine = mine
        self.original = original
        self.theirs = theirs
        result = mine
    }

    /// Only theirs changed → theirs (`take` copies it); both changed to different values →
    /// mine, and a conflict unless the part merges through the password history.
    mutating func part<Value: Equatable>(_ name: String, _ value: (Root) -> Value, take: (inout Root, Root) -> Void,
                                         mergesInHistory: Bool = false) {
        let mineValue = value(mine), theirValue = value(theirs), originalValue = value(original)
        if mineValue == originalValue {
            guard theirValue != originalValue else { return }
            take(&result, theirs)
            fromTheirs.append(name)
        } else {
            fromMine.append(name)
            if theirValue != originalValue, theirValue != mineValue, !mergesInHistory { conflicts.append(name) }
        }
    }

    mutating func part<Value: Equatable>(_ name: String, _ path: WritableKeyPath<Root, Value>, mergesInHistory: Bool = false) {
        part(name, { $0[keyPath: path] }, take: { $0[keyPath: path] = $1[keyPath: path] }, mergesInHistory: mergesInHistory)
    }
}

extension ThreeWay where Root == CipherView {
    /// Custom fields, each by its name: a field only one side added, changed or removed takes
    /// that side's; a field both changed differently is a conflict. Mine's order, then the
    /// fields only theirs added. Two fields of one name on a side: all fields are one part.
    mutating func fieldsByName() {
        func byName(_ fields: [FieldView]?) -> [String: FieldView]? {
            var map: [String: FieldView] = [:]
            for field in fields ?? [] {
                guard map.updateValue(field, forKey: field.name ?? "") == nil else { return nil }
            }
            return map
        }
        guard let mineFields = byName(mine.fields), let originalFields = byName(original.fields),
              let theirFields = byName(theirs.fields) else {
            return part("fields", \.fields)
        }
        var fields = mine.fields ?? []
        let names = (mine.fields ?? []).map { $0.name ?? "" }
            + (theirs.fields ?? []).map { $0.name ?? "" }.filter { mineFields[$0] == nil }
            + (original.fields ?? []).map { $0.name ?? "" }.filter { mineFields[$0] == nil && theirFields[$0] == nil }
        for name in names {
            let mineField = mineFields[name], theirField = theirFields[name], originalField = originalFields[name]
            let label = "field:\(name)"
            if mineField == originalField {
                guard theirField != originalField else { continue }
                fromTheirs.append(label)
                if let index = fields.firstIndex(where: { ($0.name ?? "") == name }) {
                    if let theirField { fields[index] = theirField } else { fields.remove(at: index) }
                } else if let theirField {
                    fields.append(theirField)
                }
            } else {
                fromMine.append(label)
                if theirField != originalField, theirField != mineField { conflicts.append(label) }
            }
        }
        result.fields = fields.isEmpty && mine.fields == nil ? nil : fields
    }

    /// The password history: only one side changed it → that side's; both → the entries of
    /// both, newest first, without repeating a password, at most five.
    mutating func combinedPasswordHistory() {
        let mineHistory = mine.passwordHistory ?? [], theirHistory = theirs.passwordHistory ?? []
        let originalHistory = original.passwordHistory ?? []
        if mineHistory == originalHistory {
            if theirHistory != originalHistory { result.passwordHistory = theirs.passwordHistory }
            return
        }
        guard theirHistory != originalHistory, theirHistory != mineHistory else { return }
        let added = theirHistory.filter { !originalHistory.contains($0) }
        let combined = (mineHistory + added).enumerated().sorted {
            let (a, b) = ($0.element.lastUsedDate, $1.element.lastUsedDate)
            if a != b, let a, let b { return a > b }
            return $0.offset < $1.offset
        }.map(\.element)
        var seen = Set<String>()
        result.passwordHistory = Array(combined.filter { seen.insert($0.password ?? "").inserted }
            .prefix(CipherView.maxPasswordHistoryEntries))
    }
}
