import BitwardenAPI
import Foundation
@_spi(Tools) import OfflineSync
import VaultModel

extension Run {
    // MARK: Views, other devices, cold starts, the pending badge

    /// `openView`: a screen reads the item as an app does (its local copy, decrypted) and
    /// keeps the view; a later `update` or `softDelete` naming it saves from it, however stale.
    func openView(_ step: ScenarioStep, index: Int) throws {
        let ref = try self.ref(step, index)
        guard let name = step.view else { throw ReplayError.badStep(index: index, reason: "'openView' needs 'view'") }
        let (user, id) = try currentId(ref, step: index)
        guard let local = try store.localCipher(userId: user.userId, id: id) else {
            throw ReplayError.badStep(index: index, reason: "item '\(ref)' is not in the local store")
        }
        views[name] = (index, ref, try local.decrypt(userKey: user.userKey))
    }

    /// Another device changes the item without touching its encrypted fields (a favourite, a
    /// folder move, a restore from the trash), or encrypts it again with every field unchanged.
    /// Journaled before the request (a lost answer may still have applied it) and marked
    /// `applied` once the server answered with a new revision (a restore of an item that is not
    /// in the trash changes nothing on Bitwarden).
    func anotherDeviceKeepingFields(_ step: ScenarioStep, index: Int) async throws {
        let ref = try self.ref(step, index)
        let (user, id) = try currentId(ref, step: index)
        let current = try await user.onOtherDevice { try await $0.getCipher(id: id) }
        let action: JournalAction
        var changed = current
        switch step.do {
        case .anotherDeviceFavorite:
            action = .anotherDeviceFavorite
            changed.favorite = !(current.favorite ?? false)
        case .anotherDeviceMove:
            action = .anotherDeviceMove
            changed.folderId = try step.item.map { try resolvingFolder($0, step: index).folderId.map(serverFolderId) } ?? nil
        case .anotherDeviceReencrypt:
            action = .anotherDeviceReencrypt
            changed = try current.decrypt(userKey: user.userKey).encrypt(userKey: user.userKey, random: random(UInt64(index) &+ 5000))
            changed.id = id
        case .anotherDeviceRestore:
            action = .anotherDeviceRestore
            changed.deletedDate = nil
        case .offline, .online, .advance, .create, .update, .softDelete, .delete, .anotherDevice, .anotherDeviceDelete,
             .anotherDeviceCreate, .createFolder, .lock, .unlock, .sync, .resolve, .retryDeadLetters, .fault, .crash, .compact,
             .concurrently, .atEffect, .openView, .coldStart, .login, .restore, .anotherDeviceAttach, .folderCreate, .folderRename,
             .folderDelete, .anotherDeviceFolderRename, .anotherDeviceFolderDelete, .folderDiscard:
            throw ReplayError.badStep(index: index, reason: "'\(step.do)' is not a change that keeps the item's fields")
        }
        journal.append(.init(step: index, ref: ref, action: action, content: content(try changed.decrypt(userKey: user.userKey)),
                             offline: false, pendingBefore: isPending(ref), user: user.ref))
        let entry = journal.count - 1
        if current.deletedDate != nil { journal[entry].sawTrashed = true }
        let restoring = step.do == .anotherDeviceRestore
        let answer = try await asAnotherDevice(entry: entry, user: user, id: id, before: current.revisionDate) {
            restoring ? try await $0.restoreCipher(id: id) : try await $0.updateCipher(changed, lastKnownRevisionDate: current.revisionDate)
        }
        journal[entry].applied = answer.revisionDate != current.revisionDate
    }

    /// `coldStart`: the app starts again with the device as it is (offline, perhaps): every
    /// in-memory state dropped, the store reopened, the vaults that were unlocked unlocked again
    /// from the stored accounts (master password), and the device's clients without a session.
    func coldStart() async throws {
        await checkPendingCounts(when: "before the cold start")
        let unlocked = users.filter { store.isUnlocked(userId: $0.userId) }
        store.close()
        reopens += 1
        store = try Self.openStore(storePath, clock: clock, seed: seed &+ 100 &+ UInt64(reopens) &* 7919, realTime: emulator == nil,
                                   logger: runner.logger)
        for user in unlocked { _ = try store.unlockBlocking(email: user.email, masterPassword: user.password) }
        for user in users { user.client.logout() }
        resolvers = [:]
        views = [:]
        subscribeToPendingCounts()
    }

    /// Subscribes to every user's pending count on the current store (a badge).
    func subscribeToPendingCounts() {
        countStreams = Dictionary(uniqueKeysWithValues: users.map { ($0.userId, store.pendingCountUpdates(userId: $0.userId)) })
    }

    /// Invariant 11, at a quiet moment (after steps run at once, before the store is
    /// reopened, at the end): the newest value each pending-count stream delivered (the stream
    /// keeps only the newest, and nobody reads it in between) is the log's pending count. The
    /// streams are then subscribed again (a read stream has nothing left until the next change).
    func checkPendingCounts(when: String = "at the end") async {
        for user in users {
            guard let stream = countStreams[user.userId] else { continue }
            var iterator = stream.makeAsyncIterator()
            let last = await iterator.next()
            let count = try? store.pendingCount(userId: user.userId)
            if last != count {
                runViolations.append("invariant 11: user \(user.ref): the pending-count stream said \(last.map(String.init) ?? "nothing") \(when), the log holds \(count.map(String.init) ?? "?") pending items")
            }
        }
        subscribeToPendingCounts()
    }
}
