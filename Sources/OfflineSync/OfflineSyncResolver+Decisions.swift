import Foundation
import VaultModel

/// What ``OfflineSyncResolver/discardPendingChange(userId:cipherId:)`` did.
public enum DiscardResult: Sendable, Equatable {
    /// The server's version replaced the local copy; nothing is pending for the item.
    case serverVersionRestored(Cipher)
    /// The server does not hold the item (or it was created offline and never confirmed): the
    /// local copy was removed; nothing is pending for the item.
    case removedLocally
    /// Nothing was pending for the item: nothing done.
    case nothingPending
    /// The user saved the item again while the discard ran: the newer save stays pending and
    /// nothing was discarded.
    case newerVersionPending
}

extension OfflineSyncResolver {
    // MARK: The user's decisions on a stuck item

    /// Discards the item's pending change ("keep the server's version"): reads the server's
    /// copy and puts it in place of the local one, ending the item's pending state. The
    /// discarded versions stay in the log (the item's history, an export) and the decision is
    /// recorded as a ``VaultEventType/changeDiscarded`` event, which
    /// ``VaultLogStore/resolutionRecords(userId:after:)`` reports.
    ///
    /// An item created offline has no server version: its local copy is removed. (If a create
    /// of it may have reached the server, that copy arrives with the next sync, like any item.)
    ///
    /// Throws the server's error when its copy cannot be read (offline: nothing changed; try
    /// again later), ``OfflineSyncError/vaultLocked(userId:)`` while locked.
    ///
    /// Beside other callers: waits for a resolution of the user in progress (in this process or
    /// another), then decides on the versions it read; a save of the item made meanwhile is
    /// never discarded (``DiscardResult/newerVersionPending``).
    public func discardPendingChange(userId: String, cipherId: String) async throws -> DiscardResult {
        try await store.resolutionGate.run(userId: userId, settle: options.settleAfterInterruptedRun) { _ in
            let projection = try store.projection(userId: userId)
            guard let change = projection.pending[cipherId] else { return .nothingPending }
            var serverCopy: Cipher?
            if change.changeType != .create {
                do {
                    serverCopy = try await server.getCipher(id: cipherId)
                } catch where error.serverErrorKind == .notFound {
                    serverCopy = nil
                }
            }
            var stored = serverCopy
            stored?.extra = [:]
            let local: [LocalChange] = serverCopy.map { replacing(cipherId, with: $0) } ?? [.delete(cipherId: cipherId)]
            let written = try await store.appendOutcomes(
                userId: userId, cipherId: cipherId, coveredThrough: change.versionSequences.last ?? projection.lastSequence,
                events: [.init(cipherId: cipherId, type: .changeDiscarded, body: .outcome(OutcomeBody(
                             at: now, serverId: serverCopy?.id, revisionDate: serverCopy?.revisionDate,
                             reason: serverCopy == nil ? "discarded on request; the server does not hold the item"
                                                       : "discarded on request; the server's version kept",
                             cipher: stored))),
                         .init(cipherId: cipherId, type: .resolved, body: .outcome(OutcomeBody(at: now, serverId: serverCopy?.id)))],
                localChanges: local)
            if written.superseded { return .newerVersionPending }
            logger.notice("pending change discarded on request", metadata: ["cipher": "\(cipherId)", "server copy": "\(serverCopy != nil)"])
            return serverCopy.map { .serverVersionRestored($0) } ?? .removedLocally
        }
    }

    /// `retryDeadLetters(userId:cipherIds:)` from async code: the append commits on the log's
    /// writer thread, off the caller's.
    public func retryDeadLetters(userId: String, cipherIds: [String]? = nil) async throws {
        let events = try retryEvents(userId: userId, cipherIds: cipherIds)
        if !events.isEmpty { try await store.append(userId: userId, events: events) }
    }
}
