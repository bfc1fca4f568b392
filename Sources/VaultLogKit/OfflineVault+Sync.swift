import Foundation
@_spi(Tools) import OfflineSync

extension OfflineVault {
    // MARK: Sync

    /// Sends the changes saved on this device, then applies the server's items to every item
    /// with nothing waiting (a stuck item keeps its local copy and never keeps the others'
    /// changes away). ``statusUpdates()`` follows the steps. Without `force`, the fetch is
    /// skipped when nothing is pending and the account has not changed since the last sync.
    ///
    /// Beside other callers: a second sync waits for the first's resolution and sends nothing
    /// twice; a save made meanwhile is never overwritten (it is sent by one more pass, or by
    /// the next sync). Cancelling the task throws `CancellationError`; what was saved stays.
    @discardableResult
    public func sync(force: Bool = false) async throws -> SyncResult {
        let userId: String
        do { userId = try unlockedUser() } catch { throw VaultError.wrapping(error) }
        do {
            let pending = try store.pendingState(userId: userId).count
            setSyncStep(.sendingChanges(count: pending))
            if pending > 0 { try await resolver.processPendingChanges(userId: userId) }
            setSyncStep(.fetching)
            let result = try await SyncService(store: store, server: client, resolver: resolver, logger: logger)
                .fetchSync(userId: userId, forceSync: force)
            endSync(trouble: nil)
            return result
        } catch {
            let wrapped = VaultError.wrapping(error)
            let trouble: SyncStatus.Phase? = switch (wrapped as? VaultError)?.kind {
            case .offline?: .waitingForNetwork
            case .needsLogin?: .needsLogin
            case .wrongPassword?, .unknownAccount?, .locked?, .rejected?, .conflict?, .corruptStore?, .storeInUse?, .notPossible?, nil: nil
            }
            endSync(trouble: trouble)
            throw wrapped
        }
    }

    /// Compacts the account's log under `policy` (by default: 30 days of history and the last
    /// 5 versions of every item); changes still waiting keep every event. Run it after a sync.
    @discardableResult
    public func compact(policy: RetentionPolicy = .default) async throws -> CompactionResult {
        try await vaultCall { try await store.compact(userId: try unlockedUser(), policy: policy) }
    }

    private func setSyncStep(_ step: SyncStatus.SyncStep) {
        state.withLock { $0.syncStep = step }
        publishStatus()
    }

    private func endSync(trouble: SyncStatus.Phase?) {
        state.withLock {
            $0.syncStep = nil
            $0.trouble = trouble
        }
        publishStatus()
    }

    // MARK: Status

    /// The vault's status now.
    public func status() -> SyncStatus {
        let (userId, step, trouble) = state.withLock { ($0.userId, $0.syncStep, $0.trouble) }
        var status = SyncStatus(phase: .idle)
        do {
            guard let userId,
                  let projection = try whileOpen({ store.isUnlocked(userId: userId) ? try store.projection(userId: userId) : nil }) ?? nil
            else { return SyncStatus(phase: .locked) }
            status.pendingCount = projection.pendingCount
            status.pendingFolderCount = projection.folders?.count ?? 0
            status.deadLetters = projection.pendingItems.filter(\.needsDecision)
            status.lastSyncedAt = projection.lastSyncAppliedAt?.date
        } catch {
            logger.warning("could not read the pending state for the status", metadata: ["error": "\(error)"])
        }
        if let step {
            status.phase = .syncing(step)
        } else if let trouble {
            status.phase = trouble
        } else if !status.deadLetters.isEmpty {
            status.phase = .blocked
        }
        return status
    }

    /// The vault's status now and whenever it changes: a sync's steps, a lock, a save or a
    /// sync in another process on the store (seen within about 250 ms). Never the same value
    /// twice in a row; a slow consumer gets the newest. Ends when its task is cancelled or the
    /// vault closes.
    public func statusUpdates() -> AsyncStream<SyncStatus> {
        statusHub.subscribe(initial: status())
    }

    /// Offers the current status to every stream.
    func publishStatus() {
        statusHub.publish(status())
    }
}
