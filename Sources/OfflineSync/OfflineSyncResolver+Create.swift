import Foundation
import Logging
import VaultCrypto
import VaultModel

extension OfflineSyncResolver {
    // MARK: Create

    func resolveCreate(_ item: inout Item, run: RunContext) async throws -> ItemReport.Outcome {
        // An earlier attempt already created it: continue as an update of the server copy.
        if let mapped = item.steps.last(where: { $0.type == .idMapped })?.outcome, let serverId = mapped.serverId {
            return try await resolveUpdate(&item, serverId: serverId, base: mapped.revisionDate, createChain: true, run: run)
        }
        // A create whose response was lost (here or in the repository) is on the server under
        // one of these unique encrypted names.
        var markers = plannedMarkers(item, purpose: .create)
        if let first = item.change.versionSequences.first,
           let name = try store.event(at: first, userId: run.userId)?.operation?.cipher.name { markers.append(name) }
        if let name = item.latest.name { markers.append(name) }
        if let found = try await run.index.find(markers) {
            return try await adoptCreated(&item, found, purpose: .create, run: run)
        }
        _ = try await preserveOverflowPasswords(&item, alsoPreservedBy: [], run: run)
        let created = try await createOnce(&item, purpose: .create, payload: item.latest, run: run)
        return try await adoptCreated(&item, created, purpose: .create, run: run)
    }

    /// Records the server id of a created (or found) copy; finishes the item when the copy
    /// holds the latest version, else pushes the later edits as an update.
    func adoptCreated(_ item: inout Item, _ created: Cipher, purpose: CreatePurpose, run: RunContext) async throws -> ItemReport.Outcome {
        guard let serverId = created.id else { throw ServerFailure(.unavailable, "the server answered a create without an id") }
        run.folders.sent.note(created)
        item.report.serverId = serverId
        let mappedType: VaultEventType = purpose == .recreate ? .recreated : .idMapped
        let mapped = OutcomeBody(at: now, serverId: serverId, revisionDate: created.revisionDate, reason: purpose.description)
        // A copy found in the server's trash (an earlier attempt moved it there and its answer
        // was lost) for a change that takes the item out of the trash is not done either.
        let restoreOwed = item.change.restoresFromTrash == true && created.deletedDate != nil
        guard let name = item.latest.name, created.name == name, !restoreOwed else {
            // Edited after the create was sent: the copy on the server is older.
            try await record(&item, .idMapped, mapped, run: run)
            return try await resolveUpdate(&item, serverId: serverId, base: created.revisionDate,
                                           createChain: item.change.startedAsCreate ?? (item.change.changeType == .create), run: run)
        }
        var events: [(VaultEventType, OutcomeBody)] = [(.idMapped, mapped)]
        if mappedType == .recreated { events.insert((.recreated, mapped), at: 0) }
        events.append((.resolved, OutcomeBody(at: now, serverId: serverId, revisionDate: created.revisionDate, reason: purpose.description)))
        try await record(&item, events, local: replacing(item.id, with: created), run: run)
        return purpose == .recreate ? .recreated : .created
    }
}
