import Foundation
import Logging
import VaultCrypto
import VaultModel

extension OfflineSyncResolver {
    // MARK: Recording

    /// Local changes that replace the item's local copy (possibly under a temporary id) with
    /// the server's copy.
    func replacing(_ localId: String, with serverCopy: Cipher) -> [LocalChange] {
        var changes: [LocalChange] = []
        if serverCopy.id != localId { changes.append(.delete(cipherId: localId)) }
        changes.append(.upsert(serverCopy))
        return changes
    }

    func record(_ item: inout Item, _ type: VaultEventType, _ body: OutcomeBody, run: RunContext) async throws {
        try await record(&item, [(type, body)], local: [], run: run)
    }

    /// Appends outcome events (and local changes) for the item in one durable transaction,
    /// and remembers them as completed steps for the rest of the run.
    ///
    /// They cover the versions the run read (up to ``Item/latestSequence``): when the user
    /// saved the item again meanwhile, the events that end its pending state and the local
    /// changes are left out (``VaultLogStore/appendOutcomes(userId:cipherId:coveredThrough:events:localChanges:)``),
    /// so the newer version stays pending and is never overwritten by the server's copy of the
    /// older one. The report then says so (``ItemReport/newerVersionPending``).
    func record(_ item: inout Item, _ events: [(VaultEventType, OutcomeBody)], local: [LocalChange], run: RunContext) async throws {
        let id = item.id
        let written = try await store.appendOutcomes(
            userId: run.userId, cipherId: id, coveredThrough: item.latestSequence,
            events: events.map { .init(cipherId: id, type: $0.0, body: .outcome($0.1)) }, localChanges: local)
        for ((type, body), sequence) in zip(events, written.sequences) {
            guard let sequence else { continue }
            item.steps.append(ResolutionStep(type: type, sequence: sequence, outcome: body))
        }
        if written.superseded {
            item.report.newerVersionPending = true
            logger.info("the item was saved again during its resolution; the newer version stays pending",
                        metadata: ["cipher": "\(id)"])
        }
    }
}

/// The server's items by encrypted name, fetched at most once per run and only when a
/// create must be checked for an earlier copy (one `GET /api/sync`).
actor ServerIndex {
    let server: any CipherServer
    private var byName: [EncString: Cipher]?

    init(server: any CipherServer) { self.server = server }

    /// The server copy carrying any of `markers` as its encrypted name.
    func find(_ markers: [EncString]) async throws -> Cipher? {
        guard !markers.isEmpty else { return nil }
        if byName == nil {
            let snapshot = try await server.sync()
            var map: [EncString: Cipher] = [:]
            for cipher in snapshot.ciphers { if let name = cipher.name { map[name] = cipher } }
            byName = map
        }
        for marker in markers { if let found = byName![marker] { return found } }
        return nil
    }
}
