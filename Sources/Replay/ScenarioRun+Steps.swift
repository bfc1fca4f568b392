import BitwardenAPI
import BitwardenAPINIO
import BitwardenEmulator
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
@_spi(Tools) import OfflineSync
import Synchronization
import VaultCrypto
import VaultModel
import VaultLogTesting

extension Run {
    // MARK: Steps

    func perform() async throws {
        for (index, step) in scenario.steps.enumerated() {
            runner.onProgress?("step \(index + 1) of \(scenario.steps.count): \(step.do)")
            do {
                try await perform(step, index: index)
                if index % 4 == 3 { try checkLazyFolds(index: index) }
                if let expected = step.expectError {
                    throw ReplayError.badStep(index: index, reason: "expected an error containing '\(expected)', but '\(step.do)' succeeded")
                }
            } catch where step.optional == true {
                runner.logger.debug("optional step failed", metadata: ["step": "\(index + 1)", "error": "\(error)"])
            } catch let error as ReplayError {
                throw error
            } catch {
                guard let expected = step.expectError, "\(error)".contains(expected) else {
                    throw ReplayError.badStep(index: index, reason: "'\(step.do)' failed: \(error)")
                }
            }
        }
    }

    /// The fold reads no snapshot until the end of a fold: the projection it gives must be
    /// the eager fold's, for every unlocked user (checked every fourth step and at the end).
    func checkLazyFolds(index: Int) throws {
        for user in users where store.isUnlocked(userId: user.userId) {
            if let difference = try store.lazyFoldDisagreement(userId: user.userId) {
                throw ReplayError.badStep(index: index, reason: difference)
            }
        }
    }

    /// The user's repository; items with pending state are resolved at once by the user's
    /// shared resolver (outside a sync's scope, so a scheduled crash belongs to the next sync).
    func repository(_ user: User) -> VaultRepository {
        VaultRepository(store: store, userId: user.userId, server: user.client, resolver: resolver(user), logger: runner.logger)
    }

    /// The user's one resolver on the current store, shared by every sync, resolve and save
    /// (an app shares one): serial and deterministic, its server reports each effect to the
    /// ``EffectScope`` of the step running it (a scheduled crash, `atEffect` saves).
    func resolver(_ user: User) -> OfflineSyncResolver {
        if let shared = resolvers[user.userId] { return shared }
        var options = ResolverOptions()
        options.concurrency = 1
        options.jitter = 0
        options.mergesDisjointChanges = scenario.merge ?? true
        let server = EffectObservingServer(user.client) { effect in try await EffectScope.current?.observe(effect) }
        let resolver = OfflineSyncResolver(store: store, server: server, options: options, logger: runner.logger)
        resolvers[user.userId] = resolver
        return resolver
    }

    /// A crash: every in-memory state is dropped and the store reopened (unlocked users stay
    /// unlocked: the app unlocks again on restart).
    func reopen() async throws {
        // The badge first: what the closing store's pending-count stream said last.
        await checkPendingCounts(when: "before the store was reopened")
        let unlocked = users.filter { store.isUnlocked(userId: $0.userId) }
        store.close()
        // A new seed per reopen: restarting one sequence would hand out the same ids again
        // (a temporary id of an earlier create, after a second crash).
        reopens += 1
        store = try Self.openStore(storePath, clock: clock, seed: seed &+ 100 &+ UInt64(reopens) &* 7919, realTime: emulator == nil,
                                   logger: runner.logger)
        for user in unlocked { store.unlock(userId: user.userId, userKey: user.userKey) }
        resolvers = [:]
        views = [:]
        subscribeToPendingCounts()
    }

    func item(_ step: ScenarioStep, _ index: Int) throws -> ScenarioItem {
        guard let item = step.item else { throw ReplayError.badStep(index: index, reason: "'\(step.do)' needs 'item'") }
        return item
    }

    func ref(_ step: ScenarioStep, _ index: Int) throws -> String {
        guard let ref = step.ref else { throw ReplayError.badStep(index: index, reason: "'\(step.do)' needs 'ref'") }
        return ref
    }

    /// The longest clock step a scenario may take (100 years): enough for any retention or
    /// expiry rule, and far from the dates a header's millisecond field can hold.
    static let maxAdvance: Double = 100 * 365 * 86_400

    func perform(_ step: ScenarioStep, index: Int) async throws {
        switch step.do {
        case .offline:
            // The device's transport points at a closed port; other devices still reach the server.
            for user in users { user.client.setBaseURL(offlineURL) }
            offline = true
        case .online:
            for user in users { user.client.setBaseURL(serverURL) }
            offline = false
        case .advance:
            guard let seconds = step.seconds, seconds >= 0, seconds <= Self.maxAdvance else {
                throw ReplayError.badStep(index: index, reason: "'advance' needs 'seconds' from 0 to \(Int(Self.maxAdvance)) (100 years)")
            }
            if emulator == nil {
                // A real server's clock cannot be moved: wait for real (whole seconds matter for backup names).
                try await Task.sleep(for: .seconds(min(seconds, 2)))
            } else {
                clock.advance(by: seconds)
            }
        case .create, .update, .softDelete, .delete, .restore:
            try await performOperation(step, index: index)
        case .anotherDevice:
            // A real edit by a second login: read, change, write with lastKnownRevisionDate.
            let (user, id) = try currentId(try ref(step, index), step: index)
            let current = try await user.onOtherDevice { try await $0.getCipher(id: id) }
            var view = try current.decrypt(userKey: user.userKey)
            let before = view
            let changes = try resolvingFolder(try item(step, index), step: index)
            Self.apply(changes, to: &view)
            view = view.applyingPasswordHistory(original: before, now: BitwardenDate(clock.now))
            var encrypted = try view.encrypt(userKey: user.userKey, random: random(UInt64(index) &+ 1000))
            encrypted.id = id
            // Journaled before the request: a lost response may still have applied it.
            journal.append(.init(step: index, ref: step.ref!, action: .anotherDevice, content: content(view), offline: false,
                                 pendingBefore: isPending(step.ref!), user: user.ref))
            let entry = journal.count - 1
            if current.deletedDate != nil { journal[entry].sawTrashed = true }
            // The fields it set, for the invariants that follow another device's changes: the
            // step's item, its folder as a ref like the content's.
            var set = changes
            set.folderId = nil
            journal[entry].changes = set
            let answer = try await asAnotherDevice(entry: entry, user: user, id: id, before: current.revisionDate) {
                try await $0.updateCipher(encrypted, lastKnownRevisionDate: current.revisionDate)
            }
            journal[entry].applied = true
            if let after = answer.revisionDate, let before = current.revisionDate {
                journal[entry].newRevision = outlastsStaleCheck(before: before, after: after)
            }
        case .anotherDeviceDelete:
            let (user, id) = try currentId(try ref(step, index), step: index)
            journal.append(.init(step: index, ref: step.ref!, action: .anotherDeviceDelete, content: nil, offline: false,
                                 pendingBefore: isPending(step.ref!), user: user.ref))
            let entry = journal.count - 1
            try await asAnotherDevice(entry: entry, user: user, id: id, before: nil, isDelete: true) { try await $0.deleteCipher(id: id) }
            journal[entry].applied = true
        case .anotherDeviceCreate:
            let user = try self.user(step.user, step: index)
            let encrypted = try Self.view(try item(step, index)).encrypt(userKey: user.userKey, random: random(UInt64(index)))
            let stored = try await user.onOtherDevice { try await $0.createCipher(encrypted) }
            refs[try ref(step, index)] = (user.ref, stored.id!)
        case .createFolder:
            let user = try self.user(step.user, step: index)
            let name = EncString.encrypt("folder \(try ref(step, index))", key: user.userKey,
                                         random: random(UInt64(index) &+ 3000))
            folders[try ref(step, index)] = try await user.onOtherDevice { try await $0.createFolder(name: name).id }
        case .lock: store.lock(userId: try user(step.user, step: index).userId)
        case .unlock:
            let user = try self.user(step.user, step: index)
            store.unlock(userId: user.userId, userKey: user.userKey)
        case .sync, .resolve:
            try await performOperation(step, index: index)
        case .retryDeadLetters:
            let user = try self.user(step.user, step: index)
            try await resolver(user).retryDeadLetters(userId: user.userId)
        case .fault:
            guard let fault = step.fault else { throw ReplayError.badStep(index: index, reason: "'fault' needs 'fault'") }
            try applyFault(fault, index: index)
        case .crash:
            guard let n = step.afterEffect, n >= 1 else { throw ReplayError.badStep(index: index, reason: "'crash' needs 'afterEffect' ≥ 1") }
            pendingCrash = n
        case .compact:
            try await compact(step, index: index)
        case .concurrently:
            try await performConcurrently(step, index: index)
        case .atEffect:
            guard let n = step.afterEffect, n >= 1, let steps = step.steps, !steps.isEmpty else {
                throw ReplayError.badStep(index: index, reason: "'atEffect' needs 'afterEffect' ≥ 1 and 'steps'")
            }
            try Self.expectSaves(steps, in: step, index: index)
            effectPlan = (n, steps, index)
        case .openView:
            try openView(step, index: index)
        case .anotherDeviceFavorite, .anotherDeviceMove, .anotherDeviceRestore, .anotherDeviceReencrypt:
            try await anotherDeviceKeepingFields(step, index: index)
        case .anotherDeviceAttach:
            try await anotherDeviceAttach(step, index: index)
        case .folderCreate, .folderRename, .folderDelete, .anotherDeviceFolderRename, .anotherDeviceFolderDelete, .folderDiscard:
            try await performFolderStep(step, index: index)
        case .coldStart:
            try await coldStart()
        case .login:
            for user in users where user.client.tokens == nil {
                _ = try await user.client.login(email: user.email, password: user.password)
            }
        }
    }

    /// A compaction under the step's policy. The projection must then be what it was before:
    /// first as the same store gives it (its in-memory projection may not have folded the last
    /// events, which the compaction may have removed), then after a reopen (the fold starts from
    /// the snapshot), and so must the pending set from headers. Compaction needs the key: a
    /// locked vault skips it. Every item's history is checked before and after (compactions
    /// come at random points and at the end, when the log holds the whole run).
    func compact(_ step: ScenarioStep, index: Int) async throws {
        let user = try self.user(step.user, step: index)
        try expectCompleteItemHistories(step: index, when: "before a compaction")
        // The events it may remove are the record of the copies invariant 14 checks.
        await checkAttachmentsOfCopies(when: "before the compaction at step \(index + 1)")
        guard store.isUnlocked(userId: user.userId) else { return }
        let policy = RetentionPolicy(keepDays: step.keepDays ?? RetentionPolicy.default.keepDays,
                                     keepVersions: step.keepVersions ?? RetentionPolicy.default.keepVersions)
        // As of the last event, without touching the store's in-memory projection.
        let before = try store.projection(userId: user.userId, at: store.log.lastSequence())
        let headersBefore = try store.pendingFromHeaders(userId: user.userId).pending
        // The blocking form, as before this function was async.
        let compactNow = { [store] in try store.compactBlocking(userId: user.userId, policy: policy) }
        let result = try compactNow()
        compactedEvents += result.counts.removedEvents
        try expectSame(before, try store.projection(userId: user.userId), user: user, horizon: result.plan.horizon, step: index, when: "in the same store")
        try await reopen()
        try expectSame(before, try store.projection(userId: user.userId), user: user, horizon: result.plan.horizon, step: index, when: "after a reopen")
        let headersAfter = try store.pendingFromHeaders(userId: user.userId).pending
        guard headersAfter == headersBefore else {
            throw ReplayError.badStep(index: index, reason: "compaction through \(result.plan.horizon ?? 0) changed the pending set from headers of user \(user.ref)")
        }
        try expectCompleteItemHistories(step: index, when: "after a compaction")
    }

    /// One item's events (the item index, merged every few events, then the headers after it)
    /// must be the log's events of that user and item.
    func expectCompleteItemHistories(step index: Int, when: String) throws {
        let violations = try Simulation.itemHistoryViolations(store.log)
        guard violations.isEmpty else {
            throw ReplayError.badStep(index: index, reason: "\(when): " + violations.prefix(3).joined(separator: "; "))
        }
    }

    func expectSame(_ before: Projection, _ after: Projection, user: User, horizon: UInt64?, step index: Int, when: String) throws {
        guard after != before else { return }
        let items = Set(before.pending.keys).union(after.pending.keys).filter { before.pending[$0] != after.pending[$0] }.sorted()
        throw ReplayError.badStep(index: index, reason: "compaction through \(horizon ?? 0) changed the projection of user \(user.ref) (\(when)): "
                                  + (items.isEmpty ? "id map, sync state or quarantine differ" : "the pending change of \(items.joined(separator: ", ")) differs"))
    }

    func applyFault(_ fault: ScenarioFault, index: Int) throws {
        guard let emulator else {
            throw ReplayError.badStep(index: index, reason: "server faults need the embedded emulator (not a remote server)")
        }
        if fault.clear == true { emulator.faults.clear(); return }
        var path = fault.path ?? ""
        if path.contains("{"), let open = path.firstIndex(of: "{"), let close = path.firstIndex(of: "}") {
            let ref = String(path[path.index(after: open)..<close])
            let (_, id) = try currentId(ref, step: index)
            path.replaceSubrange(open...close, with: id)
        }
        let route = RouteMatcher(method: fault.method, path: path)
        for (name, count) in [("failNext", fault.failNext), ("dropResponseAfterApply", fault.dropResponseAfterApply)] {
            if let count, !(1...1_000_000).contains(count) {
                throw ReplayError.badStep(index: index, reason: "'\(name)' must be a count from 1 to 1000000 (got \(count))")
            }
        }
        if let status = fault.status, !(100...599).contains(status) {
            throw ReplayError.badStep(index: index, reason: "'status' must be an HTTP status from 100 to 599 (got \(status))")
        }
        if let n = fault.failNext {
            let status = fault.status ?? 500
            emulator.faults.failNext(n, matching: route, with: fault.body.map { .reply(status: status, body: $0) } ?? .status(status))
        } else if let n = fault.dropResponseAfterApply {
            emulator.faults.dropResponseAfterApplying(next: n, matching: route)
        } else {
            throw ReplayError.badStep(index: index, reason: "a fault needs 'failNext', 'dropResponseAfterApply' or 'clear'")
        }
    }
}
