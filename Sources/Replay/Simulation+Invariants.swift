import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto

extension Simulation {
    // MARK: Invariants

    /// The invariants the outcome must satisfy over the **whole** run; one line per violation
    /// (`Docs/Reliability.md` lists them):
    ///
    /// 1. every password typed while the item had pending offline state (offline edits, and
    ///    online edits made onto a pending item) is recoverable from the server (active,
    ///    history, a backup or an overflow copy), unless the item was later permanently deleted
    ///    by the user (or by another device after it was resolved), or a later password change
    ///    outside its pending batch (with nothing pending, or in a later batch) pushed it out
    ///    of Bitwarden's 5-entry history;
    /// 2. the last version the user saved of an item that no other device touched is on the
    ///    server (active, in the trash or as a backup), or that version merged with the changes
    ///    other devices made before it that the device had not seen (the resolver's merge of
    ///    changes to different parts); an item the user trashed is in the server's trash with
    ///    that version;
    /// 3. an item the user permanently deleted is gone from the server, unless another device
    ///    edited it after the device last saw it;
    /// 4. backups only where the matrix asks for them (another device touched the item, or a
    ///    pending batch of four or more password changes to an item the server had before);
    ///    password-overflow copies only after six or more; never for a create chain; no two
    ///    identical server items;
    /// 5. nothing pending and nothing dead-lettered at the end;
    /// 13. an item the user last restored from the trash is active on the server with the
    ///    version restored (or, when another device's change of it won the conflict, with that
    ///    version, the user's kept as an active backup), unless another device changed it later;
    ///
    /// and those of ``fieldAndDeleteViolations(journal:server:)`` (3, second half, 9 and 12), plus
    /// what the run saw itself (``ScenarioOutcome/runViolations``: 10, an offline save refused;
    /// 11, a pending-count stream that did not end at the log's count; 17, a save refused for the
    /// folder it named).
    public static func check(_ outcome: ScenarioOutcome) -> [String] {
        check(journal: outcome.journal, pending: outcome.actual.pending ?? [:], server: outcome.actual.server ?? [:],
              folders: outcome.actual.folders)
            + outcome.runViolations
    }

    /// The same checks on parts observed separately: what the user and other devices did
    /// (`journal`), pending counts per user, and every server item per user, decrypted (the
    /// resolver kill test observes them in another process than the one that made the edits).
    ///
    /// `folders` (the server's folder names per user, when observed): a version whose folder
    /// the server no longer has (deleted by the user or another device) counts in no folder.
    public static func check(journal: [ScenarioJournalEntry], pending: [String: Int],
                             server: [String: [ScenarioItemExpectation]], folders: [String: [String]]? = nil) -> [String] {
        var violations: [String] = []
        let existingFolders = folders.map { Set($0.values.flatMap { $0 }.compactMap(folderRef(named:))) }
        func sameFolder(_ found: String?, _ saved: String?) -> Bool {
            if found == saved { return true }
            guard found == nil, let saved, let existingFolders else { return false }
            return !existingFolders.contains(saved)
        }
        for (user, count) in pending.sorted(by: { $0.key < $1.key }) where count > 0 {
            violations.append("invariant 5: user \(user) still has \(count) pending items (dead letters included)")
        }
        let serverItems = server.values.flatMap { $0 }
        func isCopy(_ item: ScenarioItemExpectation, of name: String) -> Bool {
            (item.name ?? "").hasPrefix(name + " - ")
        }
        func holds(_ content: ScenarioItem, trashed: Bool? = nil) -> Bool {
            serverItems.contains { item in
                guard let name = content.name, let itemName = item.name,
                      itemName == name || (trashed == nil && isCopy(item, of: name)) else { return false }
                if let trashed, (item.deleted ?? false) != trashed { return false }
                // In its folder: backups and overflow copies keep the version's folder too.
                return item.password == content.password && item.notes == content.notes && sameFolder(item.folder, content.folder)
            }
        }
        /// `content` out of the trash on the server: the item itself or a copy of it (a backup).
        func holdsActive(_ content: ScenarioItem) -> Bool {
            serverItems.contains { item in
                guard let name = content.name, let itemName = item.name, itemName == name || isCopy(item, of: name),
                      item.deleted != true else { return false }
                return item.password == content.password && item.notes == content.notes && sameFolder(item.folder, content.folder)
            }
        }
        var recoverable = Set<String>()
        for item in serverItems {
            if let password = item.password { recoverable.insert(password) }
            recoverable.formUnion(item.passwordHistory ?? [])
        }
        let syncs = journal.filter { $0.action == .syncApplied }
        /// The last step at which the device replaced its copy of `ref` with the server's, before
        /// `step` (a sync keeps the copy of an item still pending after it).
        func lastRefresh(user: String?, ref: String, before step: Int) -> Int {
            syncs.filter { ($0.user == nil || $0.user == user) && $0.step < step && !($0.kept ?? []).contains(ref) }
                .map(\.step).max() ?? -1
        }
        let byRef = Dictionary(grouping: journal.filter { !$0.ref.isEmpty }, by: \.ref)
        for (ref, entries) in byRef.sorted(by: { $0.key < $1.key }) {
            let own = entries.filter { !$0.action.isAnotherDevice }
            let other = entries.filter { $0.action.isAnotherDevice }
            guard let last = own.last else { continue }
            let name = entries.compactMap { $0.content?.name }.first
            /// Another device touched the item after the device last saw it, before `step` or later.
            func otherDeviceSince(refreshBefore step: Int, user: String?) -> Bool {
                let since = lastRefresh(user: user, ref: ref, before: step)
                return other.contains { $0.step > since }
            }
            /// `saved` (a version saved at `step`) merged with what other devices changed since the
            /// device last saw the item before `step` and before `until`: the version the resolver
            /// pushes when the two changed different parts.
            /// When the user saved again after an earlier batch of this item, the device's copy
            /// may be newer than its last sync: the resolution that ended that batch wrote the
            /// server's version (pushed, merged, or restored when a trash move was dropped) at a
            /// moment the journal does not record. Then each later start is a candidate too.
            func merged(_ saved: ScenarioItem, savedAt step: Int, user: String?, until: Int) -> [ScenarioItem] {
                let since = lastRefresh(user: user, ref: ref, before: step)
                var starts = [since]
                if own.contains(where: { $0.step > since && $0.step < step && $0.action != .initial }) {
                    starts += other.filter { $0.step > since && $0.step < step }.map(\.step)
                }
                return starts.map { start in
                    other.filter { $0.step > start && $0.step < until && $0.applied != false }
                        .reduce(saved) { Self.overlaying($1, on: $0) }
                }
            }

            // Trash moves of a create that was still pending: as the engine's rule has it, a create
            // that never reached the server is removed locally when trashed (one that may have
            // reached it is trashed there), so these steps destroy the item as far as the
            // server is concerned.
            var discardingSteps = Set<Int>()
            var inCreateBatch = false
            for entry in own where entry.action != .initial {
                let pendingBefore = entry.pendingBefore ?? false
                if !pendingBefore { inCreateBatch = entry.action == .create && entry.offline }
                if entry.action == .softDelete, pendingBefore, inCreateBatch { discardingSteps.insert(entry.step) }
            }

            // 2 and 3: the fate of the last thing the user did.
            let touchedAfter = other.contains { $0.step > last.step }
            switch last.action {
            case .softDelete where discardingSteps.contains(last.step):
                // Another device's restore afterwards brings back a copy that reached the server
                // (from the trash, or by meeting the pending trash move, which it then drops).
                let restoredElsewhere = other.contains { $0.step > last.step && $0.action == .anotherDeviceRestore && $0.applied == true }
                if let name, !restoredElsewhere, serverItems.contains(where: { $0.name == name && $0.deleted != true }) {
                    violations.append("invariant 2: \(ref): a pending create trashed by the user is active on the server")
                }
            case .softDelete:
                // The version trashed: the user's last one or, when a conflict kept another
                // device's version, that one (the user's then lives on as a backup).
                let saved = own.last(where: { $0.content != nil && $0.step < last.step })
                let mine = saved?.content
                let theirs = other.filter { $0.step < last.step }.compactMap(\.content)
                let merges = saved.flatMap { entry in entry.content.map { merged($0, savedAt: entry.step, user: entry.user, until: last.step) } } ?? []
                if let mine, !otherDeviceSince(refreshBefore: last.step, user: last.user),
                   !([mine] + theirs + merges).contains(where: { holds($0, trashed: true) }) {
                    violations.append("invariant 2: \(ref): trashed by the user, but its last version (\(mine.password ?? "-"), \(mine.notes ?? "-")) is not in the server's trash")
                }
            case .delete:
                if let name, !otherDeviceSince(refreshBefore: last.step, user: last.user),
                   serverItems.contains(where: { $0.name == name }) {
                    violations.append("invariant 3: \(ref): permanently deleted by the user, but the server still has it")
                }
            case .restore:
                // 13: a restore the user made ends with the item active on the server (the
                // version restored, or the version of another device's change that won, with
                // the user's as an active backup), unless another device changed it afterwards.
                let saved = own.last(where: { $0.content != nil && $0.step < last.step })
                let theirs = other.filter { $0.step < last.step }.compactMap(\.content)
                let merges = saved.flatMap { entry in entry.content.map { merged($0, savedAt: entry.step, user: entry.user, until: last.step) } } ?? []
                if let mine = saved?.content, !touchedAfter,
                   !([mine] + theirs + merges).contains(where: { holdsActive($0) }) {
                    violations.append("invariant 13: \(ref): restored from the trash by the user, but its version (\(mine.password ?? "-"), \(mine.notes ?? "-")) is not active on the server")
                }
            case .initial, .create, .update, .anotherDevice, .anotherDeviceDelete, .syncApplied, .anotherDeviceFavorite,
                 .anotherDeviceMove, .anotherDeviceRestore, .anotherDeviceReencrypt, .anotherDeviceAttach:
                if let content = last.content, !touchedAfter, !holds(content),
                   !merged(content, savedAt: last.step, user: last.user, until: last.step).contains(where: { holds($0) }) {
                    violations.append("invariant 2: \(ref): the last saved version (\(content.password ?? "-"), \(content.notes ?? "-")) is not on the server")
                }
            }

            // Pending batches: runs of the user's saves from one that found the item clean
            // until resolution (the next save that finds it clean starts a new batch).
            var batches: [(isCreate: Bool, passwordChanges: Int, first: Int)] = []
            var previousPassword: String?
            var typedWhilePending: [(password: String, step: Int, batch: Int)] = []
            var plainPasswordChanges: [Int] = []   // steps of password changes with nothing pending
            for entry in entries {
                let changed = entry.content.map { $0.password != previousPassword } ?? false
                if let content = entry.content { previousPassword = content.password }
                guard entry.action != .initial else { continue }
                if entry.action.isAnotherDevice {
                    if changed { plainPasswordChanges.append(entry.step) }
                    continue
                }
                let pendingBefore = entry.pendingBefore ?? false
                let pendingAfter = entry.offline || pendingBefore
                if !pendingBefore && pendingAfter {
                    batches.append((entry.action == .create, 0, entry.step))
                }
                if pendingAfter, changed, [.create, .update].contains(entry.action) {
                    if !batches.isEmpty, entry.action == .update { batches[batches.count - 1].passwordChanges += 1 }
                    if let password = entry.content?.password { typedWhilePending.append((password, entry.step, batches.count - 1)) }
                } else if changed, entry.action == .update {
                    plainPasswordChanges.append(entry.step)
                }
            }

            // 1: passwords typed while pending.
            for (password, step, batch) in typedWhilePending where !recoverable.contains(password) {
                // Another device's permanent delete takes the password with the item when it met
                // no pending state, or only state of a later batch (this one was resolved
                // before: an entry in between found the item clean). A trash move with no edit
                // that meets such a delete is cleaned up, the item gone.
                func resolvedBefore(_ deleteStep: Int) -> Bool {
                    entries.contains { $0.step > step && $0.step < deleteStep && $0.pendingBefore == false }
                }
                let deletedLater = own.contains { ($0.action == .delete || discardingSteps.contains($0.step)) && $0.step > step }
                    || other.contains { $0.action == .anotherDeviceDelete && $0.step > step
                        && ($0.pendingBefore == false || resolvedBefore($0.step)) }
                // Once its batch is resolved a password is ordinary history: later changes (with
                // nothing pending, or in a later batch) follow Bitwarden's 5-entry rule.
                let pushedOut = plainPasswordChanges.contains { $0 > step }
                    || typedWhilePending.contains { $0.step > step && $0.batch != batch }
                if !deletedLater && !pushedOut {
                    violations.append("invariant 1: \(ref): password \(password) typed while the item had pending changes is not recoverable from the server")
                }
            }

            // 4: backups only where the matrix asks for one.
            guard let name else { continue }
            let copies = serverItems.filter { isCopy($0, of: name) }
            let overflows = copies.filter { ($0.name ?? "").contains(" - offline passwords ") }
            let backups = copies.count - overflows.count
            let touched = !other.isEmpty
            let softConflict = batches.contains { !$0.isCreate && $0.passwordChanges >= 4 }
            // A save from a stale view that changed a field a later save had changed too keeps
            // the older value as a backup (the merge rule of `Docs/Resolution.md`).
            let staleSave = own.contains { $0.viewStep != nil }
            if backups > 0, !touched, !softConflict, !staleSave {
                violations.append("invariant 4: \(ref): \(backups) backup(s) on the server, but no other device touched it and no batch had 4 password changes \(batches.map { ($0.isCreate ? "create " : "") + "\($0.passwordChanges)" })")
            }
            if !overflows.isEmpty, !touched, !batches.contains(where: { $0.passwordChanges >= 6 }) {
                violations.append("invariant 4: \(ref): \(overflows.count) password-overflow copies, but no batch had 6 password changes \(batches.map { "\($0.passwordChanges)" })")
            }
        }
        var seen: [String: Int] = [:]
        for item in serverItems {
            let key = "\(item.name ?? "")|\(item.password ?? "")|\(item.notes ?? "")|\(item.deleted ?? false)"
            seen[key, default: 0] += 1
        }
        for (key, count) in seen.sorted(by: { $0.key < $1.key }) where count > 1 {
            violations.append("invariant 4: \(count) identical server items \(key)")
        }
        return violations + fieldAndDeleteViolations(journal: journal, server: server, existingFolders: existingFolders)
            + otherDeviceFieldViolations(journal: journal, server: server)
    }
}
