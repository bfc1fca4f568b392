import Foundation
import VaultCrypto
import VaultModel

extension OfflineSyncResolver {
    // MARK: Merging with another device's change

    /// A merge of the item's pending update with another device's change of it.
    struct DisjointMerge {
        /// The parts each side changed.
        let parts: MergedParts
        /// The merged item: the base, the local change's parts and the server's.
        let view: CipherView
    }

    /// The three-way merge of the local change with the server's copy, when another device
    /// changed the item since the change's base and the two changed different parts
    /// (``ResolverOptions/mergesDisjointChanges``). Nil when merging is off, when the server copy
    /// is not another device's change (unchanged, this device's own write, our latest version),
    /// when the base is not in the log (an edit written before it was recorded, a create
    /// chain), when the two are not the same kind of item any more (type, organization, trash or
    /// archive state changed), or when both changed a part: then the decision matrix applies.
    func disjointMerge(_ item: Item, server: Cipher, base: BitwardenDate?, own: OwnWrites, createChain: Bool,
                       run: RunContext) throws -> DisjointMerge? {
        guard options.mergesDisjointChanges, !createChain, item.change.changeType == .update,
              let base, let revision = server.revisionDate, revision != base, !own.wrote(server),
              !item.latest.sameContent(as: server),
              let (firstType, baseCipher) = try recordedBase(item, base: base, run: run), firstType == .updated else { return nil }
        let baseView = try baseCipher.decrypt(userKey: run.userKey)
        let local = try item.latest.decrypt(userKey: run.userKey)
        let theirs = try server.decrypt(userKey: run.userKey)
        guard theirs.type == baseView.type, local.type == baseView.type,
              theirs.organizationId == baseView.organizationId, local.organizationId == baseView.organizationId,
              theirs.deletedDate == nil, local.deletedDate == nil, baseView.deletedDate == nil,
              theirs.archivedDate == baseView.archivedDate, local.archivedDate == baseView.archivedDate else { return nil }
        let merge = local.merged(base: baseView, current: theirs, parts: .resolution)
        guard merge.conflicts.isEmpty else {
            logger.info("another device changed the same parts; deciding with the matrix",
                        metadata: ["cipher": "\(item.id)", "parts": "\(merge.conflicts)"])
            return nil
        }
        return DisjointMerge(parts: MergedParts(local: merge.changedHere, server: merge.takenFromCurrent), view: merge.merged)
    }

    /// The version the change's first edit started from, as that edit recorded it (with the
    /// edit's type), when its revision is the change's `base`; nil when none was recorded.
    func recordedBase(_ item: Item, base: BitwardenDate, run: RunContext) throws -> (firstType: VaultEventType, cipher: Cipher)? {
        guard let first = item.change.versionSequences.first, let event = try store.event(at: first, userId: run.userId),
              let cipher = event.operation?.base, cipher.revisionDate == base else { return nil }
        return (event.type, cipher)
    }

    /// Pushes the merged item (``UpdateDecision/merged(_:backupServer:reason:)``): a soft
    /// conflict's backup of the server copy first when asked, the password-overflow copies,
    /// then the PUT and `pushed` (with the parts) + `resolved`. Nil when the server answered
    /// "out of date" (read again and decide again).
    func pushMerged(_ item: inout Item, _ merge: DisjointMerge, serverId: String, serverCopy: Cipher, backupServer: Bool,
                    reason: String, run: RunContext) async throws -> ItemReport.Outcome? {
        var preserved: [Cipher] = []
        if backupServer, let revision = serverCopy.revisionDate {
            preserved.append(try await ensureBackup(&item, of: serverCopy, side: .server, timestamp: revision,
                                                    sourceRevision: revision, sourceSequence: nil, reason: reason, run: run))
        }
        var payload = try merge.view.encrypt(userKey: run.userKey, random: store.dependencies.random)
        payload.id = serverId
        _ = try await preserveOverflowPasswords(&item, alsoPreservedBy: preserved + [payload], run: run)
        let updated: Cipher
        do {
            updated = try await sendUpdate(payload, lastKnownRevisionDate: serverCopy.revisionDate, run: run)
        } catch where error.serverErrorKind == .staleRevision {
            return nil
        }
        logger.info("merged with another device's change", metadata: [
            "cipher": "\(item.id)", "local": "\(merge.parts.local)", "server": "\(merge.parts.server)"])
        try await record(&item, [(.pushed, OutcomeBody(at: now, serverId: serverId, revisionDate: updated.revisionDate, reason: reason,
                                                       sourceSequence: item.latestSequence, merged: merge.parts)),
                                 (.resolved, OutcomeBody(at: now, serverId: serverId))],
                         local: replacing(item.id, with: updated), run: run)
        return .merged
    }
}
