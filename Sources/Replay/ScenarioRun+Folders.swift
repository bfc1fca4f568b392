import BitwardenAPI
import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultModel

extension Run {
    // MARK: Folders

    /// `folderCreate`, `folderRename`, `folderDelete` (the user, through the repository: online
    /// or offline), `folderDiscard` (the user's discard of a pending folder change) and
    /// `anotherDeviceFolderRename` / `anotherDeviceFolderDelete` (the server).
    func performFolderStep(_ step: ScenarioStep, index: Int) async throws {
        let user = try self.user(step.user, step: index)
        let ref = try self.ref(step, index)
        let name = step.item?.name ?? "folder \(ref)"
        if step.do == .folderCreate {
            folders[ref] = try await repository(user).createFolder(name: name)
            return
        }
        guard let id = folders[ref] else { throw ReplayError.badStep(index: index, reason: "unknown folder ref '\(ref)'") }
        switch step.do {
        case .folderRename: try await repository(user).renameFolder(id: id, name: name)
        case .folderDelete: try await repository(user).deleteFolder(id: id)
        case .anotherDeviceFolderRename:
            let encrypted = EncString.encrypt(name, key: user.userKey, random: random(UInt64(index) &+ 3100))
            _ = try await user.onOtherDevice { try await $0.updateFolder(id: serverFolderId(id), name: encrypted) }
        case .anotherDeviceFolderDelete:
            try await user.onOtherDevice { try await $0.deleteFolder(id: serverFolderId(id)) }
        case .folderDiscard:
            _ = try await resolver(user).discardPendingFolderChange(userId: user.userId, folderId: id)
        case .offline, .online, .advance, .create, .update, .softDelete, .delete, .anotherDevice, .anotherDeviceDelete,
             .anotherDeviceCreate, .createFolder, .lock, .unlock, .sync, .resolve, .retryDeadLetters, .fault, .crash, .compact,
             .concurrently, .atEffect, .openView, .anotherDeviceFavorite, .anotherDeviceMove, .anotherDeviceRestore,
             .anotherDeviceReencrypt, .coldStart, .login, .restore, .anotherDeviceAttach, .folderCreate:
            preconditionFailure("performFolderStep takes folder steps only")
        }
    }

    /// Invariant 16: a folder delete run beside saves leaves each saved item's local copy with
    /// what the save typed (the move of the folder's items never puts back an older copy).
    func checkSavesKept(_ operations: [PreparedOperation], _ results: [Result<OperationOutcome, any Error>?], step index: Int) {
        for (operation, result) in zip(operations, results) where operation.step.do == .update {
            guard case .success = result, let ref = operation.step.ref, let typed = operation.step.item,
                  let (user, id) = try? currentId(ref, step: index),
                  let local = try? store.localCipher(userId: user.userId, id: id)?.decrypt(userKey: user.userKey) else { continue }
            if let password = typed.password, local.login?.password != password {
                runViolations.append("invariant 16: step \(index + 1): \(ref)'s local copy lost the password the save beside a folder delete typed")
            }
            if let notes = typed.notes, local.notes != notes {
                runViolations.append("invariant 16: step \(index + 1): \(ref)'s local copy lost the notes the save beside a folder delete typed")
            }
        }
    }

    /// The server's id of a folder id a step holds: a temporary id the resolver mapped, followed
    /// through every user's projection (a locked vault is read with its key, then locked again,
    /// as the end of a run observes it); else the id itself.
    func serverFolderId(_ id: String) -> String {
        for user in users {
            let wasLocked = !store.isUnlocked(userId: user.userId)
            if wasLocked { store.unlock(userId: user.userId, userKey: user.userKey) }
            defer { if wasLocked { store.lock(userId: user.userId) } }
            if let mapped = (try? store.projection(userId: user.userId))?.folderIdMap?[id] { return mapped }
        }
        return id
    }

    /// The folder names each user's device lists, decrypted (the vault unlocked for the read).
    func observeDeviceFolders() throws -> [String: [String]] {
        var names: [String: [String]] = [:]
        for user in users {
            let wasLocked = !store.isUnlocked(userId: user.userId)
            if wasLocked { store.unlock(userId: user.userId, userKey: user.userKey) }
            defer { if wasLocked { store.lock(userId: user.userId) } }
            names[user.ref] = try store.localFolders(userId: user.userId).map { try $0.name.decryptString(key: user.userKey) }.sorted()
        }
        return names
    }

    /// Each user's folder names on the server, decrypted.
    func observeFolders() async throws -> [String: [String]] {
        var names: [String: [String]] = [:]
        for user in users {
            let list = try await user.onOtherDevice { try await $0.folders() }
            names[user.ref] = try list.map { try $0.name.decryptString(key: user.userKey) }.sorted()
        }
        return names
    }
}
