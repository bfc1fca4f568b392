import Foundation

extension Simulation {
    // MARK: Invariants of saves that meet other callers

    /// The invariants the concurrent mode added (`Docs/Reliability.md`), over the whole run:
    ///
    /// - 3, second half: a trash move or permanent delete still pending when another device
    ///   changed the item (any change: an edit, a favourite, a folder move, a restore, a new
    ///   encryption of the same fields) is dropped, not applied: the server keeps the item (a
    ///   dropped trash move leaves it out of the trash);
    /// - 9: no field change of an acknowledged save disappears: every password, note, username
    ///   and folder a save set is on the server (the active item, its password history, or a
    ///   backup or overflow copy), unless a later save that saw it changed the field again,
    ///   another device changed the field afterwards, or the item was deleted or trashed later.
    ///   A save from a stale view (`openView`) did not see the saves made after the view was
    ///   read, so theirs must survive it.
    ///
    /// `existingFolders` (the refs of the server's folders, when observed): a folder the server no
    /// longer has is not followed (the item goes to no folder; invariant 15 checks that).
    static func fieldAndDeleteViolations(journal: [ScenarioJournalEntry], server: [String: [ScenarioItemExpectation]],
                                         existingFolders: Set<String>? = nil) -> [String] {
        var violations: [String] = []
        func followed(_ field: Field, _ value: String) -> Bool {
            field != .folder || (existingFolders?.contains(value) ?? true)
        }
        let serverItems = server.values.flatMap { $0 }
        forEachItem(journal: journal, server: server) { ref, entries, name, copies in
            let own = entries.filter { !$0.entry.action.isAnotherDevice }
            let other = entries.filter { $0.entry.action.isAnotherDevice }

            // 3: a pending delete that met another device's change is dropped.
            if let last = own.last?.entry, last.action == .delete || last.action == .softDelete, last.offline,
               // A change to a copy already in the trash met no trash move: that move was applied
               // (its record lost to a crash), and the other device edited the trashed item.
               let meeting = other.first(where: { $0.entry.step > last.step && $0.entry.pendingBefore == true
                                                  && $0.entry.applied == true && $0.entry.action != .anotherDeviceDelete
                                                  && !(last.action == .softDelete && $0.entry.sawTrashed == true
                                                       && $0.entry.action != .anotherDeviceRestore) })?.entry,
               !other.contains(where: { $0.entry.action == .anotherDeviceDelete && $0.entry.step > last.step }) {
                let permanent = last.action == .delete
                if !serverItems.contains(where: { $0.name == name && (permanent || $0.deleted != true) }) {
                    violations.append("invariant 3: \(ref): a pending \(permanent ? "permanent delete" : "trash move") met another device's change (\(meeting.action) at step \(meeting.step + 1)) and was applied; it should have been dropped and the server copy restored")
                }
            }

            // 9: every field a save changed survives.
            for (position, save) in own where save.action == .update {
                guard let changes = save.changes else { continue }
                let removedLater = own.contains { $0.position > position && [.delete, .softDelete].contains($0.entry.action) }
                    || other.contains { $0.position > position && $0.entry.action == .anotherDeviceDelete }
                if removedLater { continue }
                for field in Field.allCases {
                    guard let value = field.value(in: changes), followed(field, value) else { continue }
                    // A later save that saw this one (made from the current copy, or from a
                    // view read after it) changed the field again.
                    let superseded = own.contains { later in
                        later.position > position && later.entry.action == .update
                            && (later.entry.viewStep.map { $0 > save.step } ?? true)
                            && later.entry.changes.flatMap(field.value(in:)) != nil
                    }
                    let otherChanged = other.contains { $0.position > position && $0.entry.content.flatMap(field.value(in:)) != value }
                    if superseded || otherChanged { continue }
                    if !copies.contains(where: { field.holds(value, $0) }) {
                        violations.append("invariant 9: \(ref): the \(field) \(value) saved at step \(save.step + 1)\(save.viewStep.map { " (from a view read at step \($0 + 1))" } ?? "") is not on the server (active item, password history or a copy)")
                    }
                }
            }
        }
        return violations
    }

    /// `item` with what another device's change (`entry`) set: the fields an edit gave, the
    /// folder of a move.
    static func overlaying(_ entry: ScenarioJournalEntry, on item: ScenarioItem) -> ScenarioItem {
        var item = item
        switch entry.action {
        case .anotherDevice:
            guard let changes = entry.changes else { return item }
            if let name = changes.name { item.name = name }
            if let notes = changes.notes { item.notes = notes }
            if let username = changes.username { item.username = username }
            if let password = changes.password { item.password = password }
            if let folder = changes.folder { item.folder = folder }
        case .anotherDeviceMove:
            item.folder = entry.content?.folder
        case .initial, .create, .update, .softDelete, .delete, .anotherDeviceDelete, .syncApplied, .anotherDeviceFavorite,
             .anotherDeviceRestore, .anotherDeviceReencrypt, .restore, .anotherDeviceAttach:
            break
        }
        return item
    }

    /// Invariant 12: no field another device's acknowledged edit set disappears — every
    /// password, note, username and folder it set is on the server (the active item, its
    /// password history, or a backup or overflow copy), unless a later save of the user or a
    /// later change of another device set the field again, or the item was deleted or trashed
    /// later. (The resolver never drops a field either side changed: a merge keeps both sides'
    /// parts, the matrix backs up the losing side.) Edits whose revision is within a server's
    /// out-of-date tolerance of the copy they replaced (a second; under two on Vaultwarden, which
    /// truncates to whole seconds) are not followed: the check lets a save based on that copy through.
    static func otherDeviceFieldViolations(journal: [ScenarioJournalEntry], server: [String: [ScenarioItemExpectation]]) -> [String] {
        var violations: [String] = []
        forEachItem(journal: journal, server: server) { ref, entries, name, copies in
            // An edit whose revision is within a second of the copy it replaced (the simulated
            // clock had not moved) passes a server's out-of-date check for a save based on that
            // copy (Bitwarden tolerates a second): the save goes straight over it. Not followed.
            for (position, edit) in entries where edit.action == .anotherDevice && edit.applied == true && edit.newRevision != false {
                guard let changes = edit.changes else { continue }
                let later = entries.filter { $0.position > position }
                if later.contains(where: { [.delete, .softDelete, .anotherDeviceDelete].contains($0.entry.action) }) { continue }
                for field in Field.allCases {
                    guard let value = field.value(in: changes) else { continue }
                    let setAgain = later.contains { entry in
                        switch entry.entry.action {
                        case .update: entry.entry.changes.flatMap(field.value(in:)) != nil
                        case .anotherDevice: entry.entry.changes.flatMap(field.value(in:)).map { $0 != value } ?? false
                        case .anotherDeviceMove: field == .folder
                        case .initial, .create, .softDelete, .delete, .anotherDeviceDelete, .syncApplied, .anotherDeviceFavorite,
                             .anotherDeviceRestore, .anotherDeviceReencrypt, .restore, .anotherDeviceAttach: false
                        }
                    }
                    if setAgain { continue }
                    if !copies.contains(where: { field.holds(value, $0) }) {
                        violations.append("invariant 12: \(ref): the \(field) \(value) another device saved at step \(edit.step + 1) is not on the server (active item, password history or a copy)")
                    }
                }
            }
        }
        return violations
    }

    /// The fields a save can change that invariant 9 follows.
    enum Field: String, CaseIterable, CustomStringConvertible {
        case password, notes, username, folder

        var description: String { rawValue }

        func value(in item: ScenarioItem) -> String? {
            switch self {
            case .password: item.password
            case .notes: item.notes
            case .username: item.username
            case .folder: item.folder
            }
        }

        /// Whether a server item holds `value` in this field (a password also in its history).
        func holds(_ value: String, _ item: ScenarioItemExpectation) -> Bool {
            switch self {
            case .password: item.password == value || (item.passwordHistory ?? []).contains(value)
            case .notes: item.notes == value
            case .username: item.username == value
            case .folder: item.folder == value
            }
        }
    }

    /// Each item of the journal (by its ref, in ref order) that has a name: its entries with
    /// their positions, its name, and the server's items that are it or a copy of it (a backup
    /// or overflow copy, named after it).
    static func forEachItem(journal: [ScenarioJournalEntry], server: [String: [ScenarioItemExpectation]],
                            _ body: (_ ref: String, _ entries: [(position: Int, entry: ScenarioJournalEntry)], _ name: String,
                                     _ copies: [ScenarioItemExpectation]) -> Void) {
        let serverItems = server.values.flatMap { $0 }
        let byRef = Dictionary(grouping: journal.indices.filter { !journal[$0].ref.isEmpty }, by: { journal[$0].ref })
        for (ref, positions) in byRef.sorted(by: { $0.key < $1.key }) {
            let entries = positions.map { (position: $0, entry: journal[$0]) }
            guard let name = entries.compactMap({ $0.entry.content?.name }).first else { continue }
            body(ref, entries, name, serverItems.filter { $0.name == name || ($0.name ?? "").hasPrefix(name + " - ") })
        }
    }
}
