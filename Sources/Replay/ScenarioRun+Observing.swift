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

extension Run {
    // MARK: Observing

    func content(_ view: CipherView) -> ScenarioItem {
        ScenarioItem(name: view.name, notes: view.notes, username: view.login?.username, password: view.login?.password,
                     folder: folderRef(view.folderId))
    }

    /// The ref of a folder id as the device holds it (nil for none): a step's folder id, or the
    /// server id the resolver mapped a temporary one to; `unknown folder {id}` for any other id.
    func folderRef(_ id: String?) -> String? {
        guard let id else { return nil }
        if let ref = folders.first(where: { $0.value.lowercased() == id.lowercased() })?.key { return ref }
        return serverFolderRef(id)
    }

    /// The ref of a folder id as the server holds it: only the server's ids count, so an item
    /// sent with a temporary id that was mapped shows as `unknown folder {id}`.
    func serverFolderRef(_ id: String?) -> String? {
        guard let id else { return nil }
        if let ref = folders.first(where: { serverFolderId($0.value).lowercased() == id.lowercased() })?.key { return ref }
        return "unknown folder \(id)"
    }

    func observe() async throws -> ScenarioExpectation {
        var outcomes: [String: [String]] = [:]
        var pending: [String: Int] = [:]
        var deadLetters: [String: [String]] = [:]
        var server: [String: [ScenarioItemExpectation]] = [:]
        for user in users {
            let wasLocked = !store.isUnlocked(userId: user.userId)
            if wasLocked { store.unlock(userId: user.userId, userKey: user.userKey) }
            defer { if wasLocked { store.lock(userId: user.userId) } }
            let projection = try store.projection(userId: user.userId)
            if let difference = try store.lazyFoldDisagreement(userId: user.userId) {
                throw ReplayError.badStep(index: scenario.steps.count - 1, reason: difference)
            }
            pending[user.ref] = projection.pendingCount
            let events = try store.events(userId: user.userId)
            for (ref, entry) in refs where entry.user == user.ref {
                var chain = [entry.id]
                var current = entry.id
                for _ in 0..<8 { guard let next = projection.idMap[current], next != current else { break }; chain.append(next); current = next }
                itemIds[ref] = chain
                let ids = Set(chain)
                outcomes[ref] = events.filter { ids.contains($0.cipherId) && !$0.type.isOperation && $0.type != .createPlanned
                                                 && $0.type != .attachmentPlanned }
                    .map(\.type.description)
                if projection.pending.values.contains(where: { ids.contains($0.cipherId) && $0.isDeadLetter }) {
                    deadLetters[user.ref, default: []].append(ref)
                }
            }
            let serverCiphers = try await user.onOtherDevice { try await $0.sync().ciphers }
            var observed: [ScenarioItemExpectation] = []
            for cipher in serverCiphers {
                let view = try cipher.decrypt(userKey: user.userKey)
                var item = ScenarioItemExpectation(name: view.name, password: view.login?.password, notes: view.notes,
                                                   passwordHistory: (view.passwordHistory ?? []).compactMap(\.password),
                                                   deleted: view.deletedDate != nil, folder: serverFolderRef(view.folderId),
                                                   username: view.login?.username, favorite: view.favorite == true ? true : nil)
                item.attachments = try await serverAttachments(of: cipher, user: user)
                observed.append(item)
            }
            server[user.ref] = observed.sorted { ($0.name ?? "", $0.password ?? "") < ($1.name ?? "", $1.password ?? "") }
        }
        var observed = ScenarioExpectation(outcomes: outcomes, pending: pending, deadLetters: deadLetters, server: server,
                                           syncResults: syncResults)
        observed.folders = try await observeFolders()
        observed.deviceFolders = try observeDeviceFolders()
        return observed
    }
}
