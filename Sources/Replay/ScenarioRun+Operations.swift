import BitwardenAPI
import Foundation
@_spi(Tools) import OfflineSync
import Synchronization
import VaultModel
import VaultLogTesting

/// What a library call of a step gave: a save's result, a sync's result, or a resolution run.
enum OperationOutcome: Sendable {
    case saved(SaveResult)
    case synced(SyncResult)
    case resolvedAll
    case folderSaved
}

/// A step split in three, so that several can run at once: `prepare` reads the run's state
/// (serially), `call` is the library call alone (it may run beside others, or inside another
/// step's resolution), `record` writes the journal (serially, afterwards, in step order).
struct PreparedOperation: Sendable {
    let step: ScenarioStep
    let index: Int
    /// The acting user's id.
    let userId: String
    /// The device was offline when the step was prepared.
    let wasOffline: Bool
    let call: @Sendable () async throws -> OperationOutcome
    let record: @Sendable (OperationOutcome) throws -> Void
}

/// The scope of one `sync` or `resolve` step, seen by the shared resolver's server through a
/// task-local: it counts the step's server effects, crashes after the scheduled one, and runs
/// the `atEffect` saves after theirs. Saves and other steps run outside any scope.
final class EffectScope: Sendable {
    /// The scope of the step running on this task (nil: effects are not counted).
    @TaskLocal static var current: EffectScope?

    private let state = Mutex<(count: Int, fired: Bool)>((0, false))
    let crashAt: Int?
    let planAt: Int?
    let onPlan: @Sendable () async -> Void

    init(crashAt: Int?, planAt: Int?, onPlan: @escaping @Sendable () async -> Void) {
        self.crashAt = crashAt
        self.planAt = planAt
        self.onPlan = onPlan
    }

    /// Whether the planned saves ran (the step made at least `planAt` effects).
    var planFired: Bool { state.withLock { $0.fired } }

    /// Counts an effect; throws the scheduled crash, or runs the planned saves (once).
    func observe(_ effect: ServerEffect) async throws {
        let planAt = self.planAt
        let (count, fire) = state.withLock { state -> (Int, Bool) in
            state.count += 1
            let fire = !state.fired && state.count == planAt
            if fire { state.fired = true }
            return (state.count, fire)
        }
        if count == crashAt { throw ReplayCrash() }
        if fire { await onPlan() }
    }
}

extension Run {
    // MARK: Operations

    /// How long the resolution waits for an `atEffect` save to return; past it the resolution
    /// goes on (an engine that makes a save wait for the resolution in flight is slower here,
    /// not wrong: the save finishes after it).
    static let saveWait: Duration = .seconds(2)

    /// A save, sync or resolve step, run alone: prepared, called, recorded. A sync or resolve
    /// runs in its own ``EffectScope`` (a scheduled crash, `atEffect` saves).
    func performOperation(_ step: ScenarioStep, index: Int) async throws {
        let operation = try prepare(step, index: index)
        guard step.do == .sync || step.do == .resolve else {
            try finish(operation, await Self.call(operation))
            return
        }
        let crashAt = pendingCrash
        let plan = effectPlan
        pendingCrash = nil
        effectPlan = nil
        let spawned = Mutex<[(PreparedOperation, Task<Result<OperationOutcome, any Error>, Never>)]>([])
        let scope = EffectScope(crashAt: crashAt, planAt: plan?.afterEffect) { [self] in
            guard let plan else { return }
            for task in await runPlanned(plan.steps, index: plan.step) { spawned.withLock { $0.append(task) } }
        }
        let result = await EffectScope.$current.withValue(scope) { await Self.call(operation) }
        // The saves made during the resolution finish (and are recorded) before it is.
        let saves = spawned.withLock { $0 }
        for (save, task) in saves { try finish(save, await task.value) }
        if !saves.isEmpty { await checkPendingCounts(when: "after step \(index + 1) and the saves made during it") }
        if case .failure(let error) = result, error is ReplayCrash {
            if step.do == .sync { syncResults.append("crashed") }
            try await reopen()
        } else {
            try finish(operation, result)
        }
        // The resolution made fewer effects than planned: the saves come after it.
        if let plan, !scope.planFired {
            for sub in plan.steps {
                if sub.do == .offline || sub.do == .online {
                    try await perform(sub, index: plan.step)
                    continue
                }
                do {
                    let save = try prepare(sub, index: plan.step)
                    try finish(save, await Self.call(save))
                } catch where sub.optional == true {
                    runner.logger.debug("optional step failed", metadata: ["step": "\(plan.step + 1)", "error": "\(error)"])
                }
            }
        }
    }

    /// `concurrently`: every sub-step prepared in order, then all called at once (one task
    /// each, on the user's shared resolver), then recorded in order.
    func performConcurrently(_ step: ScenarioStep, index: Int) async throws {
        guard let steps = step.steps, !steps.isEmpty else {
            throw ReplayError.badStep(index: index, reason: "'concurrently' needs 'steps'")
        }
        let allowed: Set<ScenarioAction> = [.sync, .resolve, .create, .update, .softDelete, .delete, .restore, .folderDelete]
        if let bad = steps.first(where: { !allowed.contains($0.do) }) {
            throw ReplayError.badStep(index: index, reason: "'concurrently' runs sync, resolve, create, update, softDelete, delete, restore and folderDelete, not '\(bad.do)'")
        }
        var operations: [PreparedOperation] = []
        for sub in steps {
            do {
                operations.append(try prepare(sub, index: index))
            } catch where sub.optional == true {
                runner.logger.debug("optional step failed", metadata: ["step": "\(index + 1)", "error": "\(error)"])
            }
        }
        let prepared = operations
        let results = await withTaskGroup(of: (Int, Result<OperationOutcome, any Error>).self) { group in
            for (position, operation) in prepared.enumerated() {
                group.addTask { (position, await Self.call(operation)) }
            }
            var results = [Result<OperationOutcome, any Error>?](repeating: nil, count: prepared.count)
            for await (position, result) in group { results[position] = result }
            return results
        }
        // The calls are done: the badge must show the log's count (appends made at once may
        // notify out of order).
        await checkPendingCounts(when: "after the concurrent step \(index + 1)")
        for (operation, result) in zip(prepared, results) {
            do {
                try finish(operation, result!)
            } catch where operation.step.optional == true {
                runner.logger.debug("optional step failed", metadata: ["step": "\(index + 1)", "error": "\(error)"])
            }
        }
        if steps.contains(where: { $0.do == .folderDelete }) { checkSavesKept(prepared, results, step: index) }
    }

    /// Sub-steps of `atEffect` must be saves, or the network going down or up (a blip while
    /// the resolution is in flight).
    static func expectSaves(_ steps: [ScenarioStep], in step: ScenarioStep, index: Int) throws {
        let saves: Set<ScenarioAction> = [.create, .update, .softDelete, .delete, .restore, .offline, .online]
        if let bad = steps.first(where: { !saves.contains($0.do) }) {
            throw ReplayError.badStep(index: index, reason: "'\(step.do)' runs saves (create, update, softDelete, delete, restore) and offline/online, not '\(bad.do)'")
        }
    }

    static func call(_ operation: PreparedOperation) async -> Result<OperationOutcome, any Error> {
        do {
            return .success(try await operation.call())
        } catch {
            return .failure(error)
        }
    }

    /// Records a called operation; a failure is thrown (as the step's error). A save the
    /// library refused while the device was offline is a violation (invariant 10): an edit
    /// made offline is always saved offline, a locked vault aside.
    func finish(_ operation: PreparedOperation, _ result: Result<OperationOutcome, any Error>) throws {
        switch result {
        case .success(let outcome):
            try operation.record(outcome)
        case .failure(let error):
            let saves: Set<ScenarioAction> = [.create, .update, .softDelete, .delete, .restore]
            if operation.wasOffline, saves.contains(operation.step.do), !(error is ReplayError),
               !(error is ReplayCrash), !Self.isLockedVault(error), !Self.isNothingToRestore(error) {
                runViolations.append("invariant 10: step \(operation.index + 1): '\(operation.step.do)' of \(operation.step.ref ?? "a new item") made while offline was refused: \(error)")
            }
            if saves.contains(operation.step.do), Self.isFolderRefusal(error) {
                runViolations.append("invariant 17: step \(operation.index + 1): '\(operation.step.do)' of \(operation.step.ref ?? "a new item") was refused for its folder: \(error)")
            }
            throw error
        }
    }

    /// The server refused a save for the folder it named (Vaultwarden's 400 "Invalid folder": the
    /// folder is gone). The library knows the folders it may send; a save is never lost to one.
    static func isFolderRefusal(_ error: any Error) -> Bool {
        error.serverErrorKind != .unavailable && "\(error)".contains("Invalid folder")
    }

    static func isLockedVault(_ error: any Error) -> Bool {
        if case .vaultLocked? = error as? OfflineSyncError { return true }
        return false
    }

    /// A restore of an item that is not in the trash on the device: refused online and offline
    /// alike, with nothing written (not a save lost to being offline).
    static func isNothingToRestore(_ error: any Error) -> Bool {
        if case .cannotRestore? = error as? OfflineSyncError { return true }
        return false
    }

    /// `atEffect`: each save is started outside the resolution's scope, and the resolution
    /// waits until it returns (at most ``saveWait``); `offline` and `online` switch the network
    /// there and then. Returns the started saves, to be joined and recorded after the step.
    func runPlanned(_ steps: [ScenarioStep], index: Int) async -> [(PreparedOperation, Task<Result<OperationOutcome, any Error>, Never>)] {
        var started: [(PreparedOperation, Task<Result<OperationOutcome, any Error>, Never>)] = []
        for sub in steps {
            if sub.do == .offline || sub.do == .online {
                try? await perform(sub, index: index)
                continue
            }
            let operation: PreparedOperation
            do {
                operation = try prepare(sub, index: index)
            } catch {
                runner.logger.debug("a save planned at an effect could not be prepared", metadata: ["error": "\(error)"])
                continue
            }
            let (done, finished) = AsyncStream<Void>.makeStream()
            let task = EffectScope.$current.withValue(nil) {
                Task { () -> Result<OperationOutcome, any Error> in
                    defer { finished.yield(); finished.finish() }
                    return await Self.call(operation)
                }
            }
            started.append((operation, task))
            await withTaskGroup(of: Void.self) { group in
                group.addTask { for await _ in done { return } }
                group.addTask { try? await Task.sleep(for: Self.saveWait) }
                await group.next()
                group.cancelAll()
            }
        }
        return started
    }

    // MARK: Preparing

    /// Reads what the step needs from the run's state; the returned call touches only the
    /// library (and values captured here).
    func prepare(_ step: ScenarioStep, index: Int) throws -> PreparedOperation {
        let wasOffline = offline
        func operation(_ user: User, _ call: @escaping @Sendable () async throws -> OperationOutcome,
                       record: @escaping @Sendable (OperationOutcome) throws -> Void) -> PreparedOperation {
            PreparedOperation(step: step, index: index, userId: user.userId, wasOffline: wasOffline, call: call, record: record)
        }
        switch step.do {
        case .create:
            let user = try self.user(step.user, step: index)
            let ref = try self.ref(step, index)
            let view = Self.view(try resolvingFolder(try item(step, index), step: index))
            let repository = repository(user)
            return operation(user, { .saved(try await repository.addCipher(view)) }) { [self] outcome in
                guard case .saved(let result) = outcome, let id = result.cipher?.id else {
                    throw ReplayError.badStep(index: index, reason: "create returned no item")
                }
                refs[ref] = (user.ref, id)
                journal.append(.init(step: index, ref: ref, action: .create, content: content(view), offline: Self.leftNothingOnServer(result),
                                     pendingBefore: false, user: user.ref))
            }
        case .update:
            let ref = try self.ref(step, index)
            let changes = try resolvingFolder(try item(step, index), step: index)
            let pendingBefore = isPending(ref)
            let (user, id) = try currentId(ref, step: index)
            let local = try store.localCipher(userId: user.userId, id: id).map { try $0.decrypt(userKey: user.userKey) }
            let (base, viewStep) = try startingView(step, ref: ref, local: local, index: index)
            var edited = base
            Self.apply(changes, to: &edited)
            // What the user means: these changes over the item's current version (a save from a
            // stale view must keep what was saved since; `Docs/Fixtures.md`).
            var merged = local ?? edited
            Self.apply(changes, to: &merged)
            let view = edited, intended = merged
            let repository = repository(user)
            return operation(user, { .saved(try await repository.updateCipher(view)) }) { [self] outcome in
                guard case .saved(let result) = outcome else { return }
                var entry = ScenarioJournalEntry(step: index, ref: ref, action: .update, content: content(intended),
                                                 offline: Self.leftNothingOnServer(result), pendingBefore: pendingBefore, user: user.ref)
                entry.changes = changes
                entry.viewStep = viewStep
                journal.append(entry)
            }
        case .softDelete:
            let ref = try self.ref(step, index)
            let pendingBefore = isPending(ref)
            let (user, id) = try currentId(ref, step: index)
            let local = try store.localCipher(userId: user.userId, id: id).map { try $0.decrypt(userKey: user.userKey) }
            let (view, _) = try startingView(step, ref: ref, local: local, index: index)
            let repository = repository(user)
            return operation(user, { .saved(try await repository.softDeleteCipher(view)) }) { [self] outcome in
                guard case .saved(let result) = outcome else { return }
                journal.append(.init(step: index, ref: ref, action: .softDelete, content: nil, offline: Self.leftNothingOnServer(result),
                                     pendingBefore: pendingBefore, user: user.ref))
            }
        case .delete:
            let ref = try self.ref(step, index)
            let pendingBefore = isPending(ref)
            let (user, id) = try currentId(ref, step: index)
            let repository = repository(user)
            return operation(user, { .saved(try await repository.deleteCipher(id: id)) }) { [self] outcome in
                guard case .saved(let result) = outcome else { return }
                journal.append(.init(step: index, ref: ref, action: .delete, content: nil, offline: Self.leftNothingOnServer(result),
                                     pendingBefore: pendingBefore, user: user.ref))
            }
        case .restore:
            let ref = try self.ref(step, index)
            let pendingBefore = isPending(ref)
            let (user, id) = try currentId(ref, step: index)
            let repository = repository(user)
            return operation(user, { .saved(try await repository.restoreCipher(id: id)) }) { [self] outcome in
                guard case .saved(let result) = outcome else { return }
                journal.append(.init(step: index, ref: ref, action: .restore, content: nil, offline: Self.leftNothingOnServer(result),
                                     pendingBefore: pendingBefore, user: user.ref))
            }
        case .sync:
            let user = try self.user(step.user, step: index)
            // Forced, as a pull-to-refresh: every sync step fetches the server's items.
            let service = SyncService(store: store, server: user.client, resolver: resolver(user), logger: runner.logger)
            return operation(user, { .synced(try await service.fetchSync(userId: user.userId, forceSync: true)) }) { [self] outcome in
                guard case .synced(let result) = outcome else { return }
                syncResults.append(Self.syncResultWord(result))
                if result.isApplied {
                    let kept = refs.filter { $0.value.user == user.ref && isPending($0.key) }.map(\.key).sorted()
                    journal.append(.init(step: index, ref: "", action: .syncApplied, content: nil, offline: false, user: user.ref,
                                         kept: kept.isEmpty ? nil : kept))
                }
            }
        case .resolve:
            let user = try self.user(step.user, step: index)
            let resolver = resolver(user)
            return operation(user, {
                _ = try await resolver.processPendingChanges(userId: user.userId)
                return .resolvedAll
            }, record: { _ in })
        case .folderDelete:
            let user = try self.user(step.user, step: index)
            let ref = try self.ref(step, index)
            guard let id = folders[ref] else { throw ReplayError.badStep(index: index, reason: "unknown folder ref '\(ref)'") }
            let repository = repository(user)
            return operation(user, {
                try await repository.deleteFolder(id: id)
                return .folderSaved
            }, record: { _ in })
        case .offline, .online, .advance, .anotherDevice, .anotherDeviceDelete, .anotherDeviceCreate, .createFolder, .lock, .unlock,
             .retryDeadLetters, .fault, .crash, .compact, .concurrently, .atEffect, .openView, .anotherDeviceFavorite, .anotherDeviceMove,
             .anotherDeviceRestore, .anotherDeviceReencrypt, .coldStart, .login, .anotherDeviceAttach, .folderCreate, .folderRename,
             .anotherDeviceFolderRename, .anotherDeviceFolderDelete, .folderDiscard:
            throw ReplayError.badStep(index: index, reason: "'\(step.do)' is not a save, sync or resolve")
        }
    }

    /// The view a save starts from: the one `openView` kept under the step's `view` (and the
    /// step that read it), else the item's local copy.
    func startingView(_ step: ScenarioStep, ref: String, local: CipherView?, index: Int) throws -> (CipherView, Int?) {
        if let name = step.view {
            guard let kept = views[name], kept.ref == ref else {
                throw ReplayError.badStep(index: index, reason: "no view '\(name)' of item '\(ref)' was opened")
            }
            return (kept.view, kept.step)
        }
        guard let local else { throw ReplayError.badStep(index: index, reason: "item '\(ref)' is not in the local store") }
        return (local, nil)
    }
}

extension Run {
    /// The journal's `offline` flag: the operation did not reach the server (saved offline,
    /// discarded before it ever did, or nothing to do), as the invariants read it.
    static func leftNothingOnServer(_ result: SaveResult) -> Bool {
        switch result {
        case .discardedLocally, .noOp: true
        case .online, .savedOffline, .resolved: result.isOffline
        }
    }

    /// A sync's result in a scenario's `syncResults`: `applied` (nothing left pending),
    /// `partial` (applied; some items still pending kept their local copies), `aborted`.
    static func syncResultWord(_ result: SyncResult) -> String {
        switch result {
        case .applied(_, let pending, _): pending.isEmpty ? "applied" : "partial"
        case .upToDate: "applied"
        case .aborted: "aborted"
        }
    }
}
