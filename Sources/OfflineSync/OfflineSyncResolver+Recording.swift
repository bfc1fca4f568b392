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
    func record(_ item: inout Item, _ events: [(VaultEventType, OutcomeBody)], local: [LocalChange], run: RunContext) async throws {
        let id = item.id
        let sequences = try await store.append(
            userId: run.userId, events: events.map { .init(cipherId: id, type: $0.0, body: .outcome($0.1)) }, localChanges: local)
        for ((type, body), sequence) in zip(events, sequences) {
            item.steps.append(ResolutionStep(type: type, sequence: sequence, outcome: body))
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
