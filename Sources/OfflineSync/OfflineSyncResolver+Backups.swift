import Foundation
import Logging
import VaultCrypto
import VaultModel

extension OfflineSyncResolver {
    // MARK: Backups and idempotent creates

    /// Makes sure a backup of `source` exists on the server: skipped when one of the same
    /// version was recorded, adopted when an earlier uncertain POST did reach the server.
    /// Its attachments are copied too (`copyAttachments`), their files read from `original` (the
    /// server's current copy of the item, for a backup of the local version) or from `source`.
    func ensureBackup(_ item: inout Item, of source: Cipher, side: ConflictSide, timestamp: BitwardenDate,
                              sourceRevision: BitwardenDate?, sourceSequence: UInt64?, reason: String,
                              original: Cipher? = nil, run: RunContext) async throws -> Cipher {
        let backup = try await ensureBackupCopy(&item, of: source, side: side, timestamp: timestamp, sourceRevision: sourceRevision,
                                                sourceSequence: sourceSequence, reason: reason, run: run)
        return try await copyAttachments(&item, of: source, from: .item(original ?? source), onto: backup, run: run)
    }

    /// ``ensureBackup(_:of:side:timestamp:sourceRevision:sourceSequence:reason:original:run:)``
    /// without the attachments: the backup item itself.
    private func ensureBackupCopy(_ item: inout Item, of source: Cipher, side: ConflictSide, timestamp: BitwardenDate,
                                  sourceRevision: BitwardenDate?, sourceSequence: UInt64?, reason: String,
                                  run: RunContext) async throws -> Cipher {
        let sameVersion = { (o: OutcomeBody) in o.backupOf == side && o.sourceRevisionDate == sourceRevision && o.sourceSequence == sourceSequence }
        if let done = item.steps.last(where: { $0.type == .backupCreated && $0.outcome.purpose == .backup && sameVersion($0.outcome) }),
           let copy = done.outcome.cipher {
            return copy
        }
        let view = try source.decrypt(userKey: run.userKey)
        // A server copy that differs from one already backed up only in what a backup does not
        // compare (another device added an attachment, say) is not backed up twice: that backup
        // is the copy, and the attachments are added to it.
        if let earlier = try recordedBackup(item, of: side, holding: view, run: run) {
            return try await movedToFolder(of: source, earlier, run: run)
        }
        if side == .local, let earlier = try await adoptEarlierLocalBackup(&item, holding: view, run: run) {
            return try await movedToFolder(of: source, earlier, run: run)
        }
        let backup = view.backupCopy(named: BackupName.conflict(view.name, at: timestamp), random: store.dependencies.random)
        let created = try await createOnce(&item, purpose: .backup, payload: try backup.encrypt(userKey: run.userKey, random: store.dependencies.random),
                                           side: side, sourceRevision: sourceRevision, sourceSequence: sourceSequence, run: run)
        var stored = created
        stored.extra = [:]
        try await record(&item, .backupCreated, OutcomeBody(
            at: now, backupId: created.id, backupOf: side, marker: created.name?.serialized, reason: reason,
            cipher: stored, purpose: .backup, sourceRevisionDate: sourceRevision, sourceSequence: sourceSequence), run: run)
        item.report.backupIds.append(created.id ?? "")
        return created
    }

    /// An earlier backup of the same content as `source`, in the folder `source` is in: a
    /// version that differs from the one backed up only by a folder move (made in the trash,
    /// say) is not backed up twice, but its folder is the user's latest choice and must not be
    /// lost. The backup's server copy is read and sent again with only its folder changed (what
    /// another device did to the backup stays); a backup no longer on the server is left as it is.
    private func movedToFolder(of source: Cipher, _ backup: Cipher, run: RunContext) async throws -> Cipher {
        let folderId = try folderToSend(source.folderId, run: run)
        guard backup.folderId != folderId, let id = backup.id else { return backup }
        var current: Cipher
        do {
            current = try await server.getCipher(id: id)
        } catch where error.serverErrorKind == .notFound {
            return backup
        }
        guard current.folderId != folderId else { return current }
        current.folderId = folderId
        return try await sendUpdate(current, lastKnownRevisionDate: current.revisionDate, run: run)
    }

    /// Copies planned for an earlier version whose POST may have reached the server (the
    /// answer was lost, then the user saved again, e.g. a trash move): each one found on the
    /// server is recorded as made, so the same content is never posted twice. Returns them.
    func adoptEarlierPlans(_ item: inout Item, where wanted: (OutcomeBody) -> Bool, run: RunContext) async throws -> [Cipher] {
        let confirmed = Set(item.steps.filter { $0.type == .backupCreated }.compactMap(\.outcome.marker))
        let open = item.steps.filter { $0.type == .createPlanned && wanted($0.outcome) && !confirmed.contains($0.outcome.marker ?? "") }
        var adopted: [Cipher] = []
        for plan in open {
            guard let marker = plan.outcome.marker.flatMap({ try? EncString($0) }),
                  let found = try await run.index.find([marker]) else { continue }
            var stored = found
            stored.extra = [:]
            try await record(&item, .backupCreated, OutcomeBody(
                at: now, backupId: found.id, backupOf: plan.outcome.backupOf, marker: plan.outcome.marker,
                reason: "a copy whose answer was lost, found on the server", cipher: stored, purpose: plan.outcome.purpose,
                sourceRevisionDate: plan.outcome.sourceRevisionDate, sourceSequence: plan.outcome.sourceSequence), run: run)
            item.report.backupIds.append(found.id ?? "")
            adopted.append(found)
        }
        return adopted
    }

    /// A backup of `side` this change already made of the same content as `view` (a local one
    /// recorded under another operation's sequence: a trash move saved while the run that made
    /// it was in flight carries the same edits; a server one of an earlier revision whose only
    /// change since is an attachment), so the same content is never backed up twice.
    func recordedBackup(_ item: Item, of side: ConflictSide, holding view: CipherView, run: RunContext) throws -> Cipher? {
        for step in item.steps where step.type == .backupCreated && step.outcome.purpose == .backup && step.outcome.backupOf == side {
            guard let copy = step.outcome.cipher else { continue }
            if Self.sameContent(try copy.decrypt(userKey: run.userKey), view) { return copy }
        }
        return nil
    }

    /// An earlier local backup found on the server that holds the same content as `view`.
    func adoptEarlierLocalBackup(_ item: inout Item, holding view: CipherView, run: RunContext) async throws -> Cipher? {
        let adopted = try await adoptEarlierPlans(&item, where: { $0.purpose == .backup && $0.backupOf == .local }, run: run)
        return try adopted.first { Self.sameContent(try $0.decrypt(userKey: run.userKey), view) }
    }

    /// Whether two versions hold the same things a user typed (names, dates and the folder
    /// aside): a version that differs from one already backed up only by a folder move (made in
    /// the trash, say) is not backed up a second time.
    static func sameContent(_ a: CipherView, _ b: CipherView) -> Bool {
        a.type == b.type && a.notes == b.notes
            && a.login?.username == b.login?.username && a.login?.password == b.login?.password
            && (a.passwordHistory ?? []).compactMap(\.password) == (b.passwordHistory ?? []).compactMap(\.password)
            && (a.fields ?? []).map { [$0.name, $0.value] } == (b.fields ?? []).map { [$0.name, $0.value] }
    }

    /// POSTs `payload` at most once per plan: announces it with `createPlanned` (its encrypted
    /// name is the marker), and adopts the server's copy when an earlier plan for the same
    /// purpose and source already reached the server.
    func createOnce(_ item: inout Item, purpose: CreatePurpose, payload: Cipher, side: ConflictSide? = nil,
                            sourceRevision: BitwardenDate? = nil, sourceSequence: UInt64? = nil,
                            run: RunContext) async throws -> Cipher {
        let plans = item.steps.filter {
            $0.type == .createPlanned && $0.outcome.purpose == purpose && $0.outcome.backupOf == side
                && $0.outcome.sourceRevisionDate == sourceRevision && $0.outcome.sourceSequence == sourceSequence
        }.compactMap { $0.outcome.marker.flatMap { try? EncString($0) } }
        if !plans.isEmpty, let found = try await run.index.find(plans) { return found }
        var toSend = payload
        toSend.id = nil
        toSend.folderId = try folderToSend(toSend.folderId, run: run)
        try await record(&item, .createPlanned, OutcomeBody(
            at: now, backupOf: side, marker: toSend.name?.serialized, reason: "about to create (\(purpose))",
            cipher: toSend, purpose: purpose, sourceRevisionDate: sourceRevision, sourceSequence: sourceSequence), run: run)
        let created = try await server.createCipher(toSend)
        // Created in a folder deleted on this device meanwhile: sent again in no folder.
        guard let folderId = created.folderId, try store.isFolderDeleted(userId: run.userId, folderId: folderId) else { return created }
        return try await sendUpdate(created, lastKnownRevisionDate: created.revisionDate, run: run)
    }

    func plannedMarkers(_ item: Item, purpose: CreatePurpose) -> [EncString] {
        item.steps.filter { $0.type == .createPlanned && $0.outcome.purpose == purpose }
            .compactMap { $0.outcome.marker.flatMap { try? EncString($0) } }
    }

    /// "No password lost": every password typed offline (and the one the first edit replaced)
    /// that is neither in the latest version (password or its 5-entry history) nor in a copy
    /// kept on the server (`alsoPreservedBy`) goes into a password-overflow backup, five per
    /// copy, newest first. Returns the copies made.
    func preserveOverflowPasswords(_ item: inout Item, alsoPreservedBy given: [Cipher], run: RunContext) async throws -> [Cipher] {
        guard item.change.offlinePasswordChangeCount > 0 else { return [] }
        // Every copy already on the server for this change keeps what it holds (overflow copies
        // made for an earlier version too, and one whose answer was lost).
        _ = try await adoptEarlierPlans(&item, where: { $0.purpose?.isPasswordOverflow == true }, run: run)
        let kept = given + recordedBackups(item)
        var typed: [(password: String, lastUsed: BitwardenDate?)] = []
        for (index, sequence) in item.change.versionSequences.enumerated() {
            guard let version = try store.event(at: sequence, userId: run.userId)?.operation else { continue }
            let view = try version.cipher.decrypt(userKey: run.userKey)
            // The password the first edit replaced (the server's, at the newest history entry);
            // older history entries were not typed here and follow Bitwarden's 5-entry rule.
            if index == 0, version.passwordChanged, let replaced = view.passwordHistory?.first,
               let password = replaced.password, !password.isEmpty {
                typed.append((password, replaced.lastUsedDate))
            }
            if let password = view.login?.password, !password.isEmpty { typed.append((password, version.at)) }
        }
        var preserved = Set<String>()
        for cipher in [item.latest] + kept {
            let view = try cipher.decrypt(userKey: run.userKey)
            if let password = view.login?.password { preserved.insert(password) }
            for entry in view.passwordHistory ?? [] { if let password = entry.password { preserved.insert(password) } }
        }
        var overflow: [PasswordHistoryView] = []
        var seen = preserved
        for entry in typed.reversed() where seen.insert(entry.password).inserted {
            overflow.append(PasswordHistoryView(password: entry.password, lastUsedDate: entry.lastUsed))
        }
        guard !overflow.isEmpty else { return [] }
        let latestView = try item.latest.decrypt(userKey: run.userKey)
        let size = CipherView.maxPasswordHistoryEntries
        let parts = stride(from: 0, to: overflow.count, by: size).map { Array(overflow[$0..<min($0 + size, overflow.count)]) }
        var copies: [Cipher] = []
        // Copies already on the server hold their passwords (they are in `kept`), so these
        // parts are only what is still missing: numbered after the copies recorded so far, so a
        // new part never takes an earlier part's plan for its own.
        let earlier = Set(item.steps.filter { $0.type == .backupCreated && $0.outcome.purpose?.isPasswordOverflow == true }
            .compactMap(\.outcome.marker)).count
        for (number, entries) in parts.enumerated() {
            let part = earlier + number + 1
            let purpose = CreatePurpose.passwordOverflow(part: part)
            var copy = latestView.backupCopy(named: BackupName.passwordOverflow(latestView.name, at: item.change.updatedAt,
                                                                                part: part, of: earlier + parts.count),
                                             random: store.dependencies.random)
            copy.passwordHistory = entries
            let created = try await createOnce(&item, purpose: purpose, payload: try copy.encrypt(userKey: run.userKey, random: store.dependencies.random),
                                               sourceSequence: item.latestSequence, run: run)
            var stored = created
            stored.extra = [:]
            try await record(&item, .backupCreated, OutcomeBody(
                at: now, backupId: created.id, backupOf: .local, marker: created.name?.serialized,
                reason: "\(entries.count) offline password(s) the 5-entry history could not hold",
                cipher: stored, purpose: purpose, sourceSequence: item.latestSequence), run: run)
            item.report.backupIds.append(created.id ?? "")
            copies.append(created)
        }
        return copies
    }
}
