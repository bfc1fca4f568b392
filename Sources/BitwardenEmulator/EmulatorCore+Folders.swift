import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultJSON
import VaultModel

extension EmulatorCore {
    // MARK: Folders

    func folderJSON(_ folder: StoredFolder) -> JSONObject {
        ["object": .string("folder"), "id": .string(folder.id), "name": .string(folder.name), "revisionDate": flavor.date(folder.revisionTicks)]
    }

    func listFolders(userId: String) -> EmulatorResponse {
        withLock { state in
            .json(200, ["object": .string("list"), "data": .array(state.folders(of: userId).map { .object(folderJSON($0)) }),
                        "continuationToken": .null])
        }
    }

    func folderName(_ request: EmulatorRequest) -> Result<String, EmulatorResponse> {
        var errors = ValidationErrors()
        guard case .object(let body)? = try? JSONValue(parsing: request.body) else {
            errors.add("", request.body.isEmpty ? "Body is empty." : "The request body is not a JSON object.")
            return .failure(ErrorBodies.invalidModel(flavor, errors))
        }
        guard case .string(let name)? = body["name"], !name.isEmpty else {
            errors.add("Name", "The Name field is required.")
            return .failure(ErrorBodies.invalidModel(flavor, errors))
        }
        if flavor == .bitwarden {
            if !EncStringRules.isValid(name) {
                errors.add("Name", "Name is not a valid encrypted string.")
            } else if name.utf8.count > 1000 {
                errors.add("Name", "The field Name exceeds the maximum encrypted value length of 1000 characters.")
            }
            if !errors.isEmpty { return .failure(ErrorBodies.invalidModel(flavor, errors)) }
        }
        return .success(name)
    }

    func createFolder(_ request: EmulatorRequest, userId: String) -> EmulatorResponse {
        let name: String
        switch folderName(request) {
        case .success(let n): name = n
        case .failure(let response): return response
        }
        return withLock { state in
            let folder = StoredFolder(id: newID(), userId: userId, sequence: state.takeSequence(), name: name, revisionTicks: nowTicks())
            state.folders[folder.id] = folder
            touchAccount(userId, in: &state)
            return .json(200, folderJSON(folder))
        }
    }

    func getFolder(_ id: String, userId: String) -> EmulatorResponse {
        withLock { state in
            guard let folder = state.folders[id.lowercased()], folder.userId == userId else { return missing("Invalid folder") }
            return .json(200, folderJSON(folder))
        }
    }

    func updateFolder(_ id: String, _ request: EmulatorRequest, userId: String) -> EmulatorResponse {
        let name: String
        switch folderName(request) {
        case .success(let n): name = n
        case .failure(let response): return response
        }
        return withLock { state in
            guard var folder = state.folders[id.lowercased()], folder.userId == userId else { return missing("Invalid folder") }
            folder.name = name
            folder.revisionTicks = bumped(after: folder.revisionTicks)
            state.folders[folder.id] = folder
            touchAccount(userId, in: &state)
            return .json(200, folderJSON(folder))
        }
    }

    func deleteFolder(_ id: String, userId: String) -> EmulatorResponse {
        withLock { state in
            guard let folder = state.folders[id.lowercased()], folder.userId == userId else { return missing("Invalid folder") }
            state.folders[folder.id] = nil
            for (cipherId, var cipher) in state.ciphers where cipher.userId == userId && cipher.data["folderId"] == .string(folder.id) {
                cipher.data["folderId"] = .null
                state.ciphers[cipherId] = cipher
            }
            touchAccount(userId, in: &state)
            return .empty()
        }
    }

    /// A cipher create or update whose `folderId` names no folder of the user (another device
    /// deleted it): Vaultwarden refuses it with 400 "Invalid folder"; Bitwarden stores the id as
    /// given (it checks folders only on `PUT ciphers/move`), so the item names a folder that
    /// `/sync` does not list. Nil when the request may go on.
    func folderCheck(_ data: JSONObject, userId: String, state: EmulatorState) -> EmulatorResponse? {
        guard flavor == .vaultwarden, case .string(let folderId)? = data["folderId"] else { return nil }
        if let folder = state.folders[folderId.lowercased()], folder.userId == userId { return nil }
        return ErrorBodies.error(flavor, status: 400, message: "Invalid folder")
    }

    /// Not found: Bitwarden's 404, or Vaultwarden's 400 with its message.
    func missing(_ vaultwardenMessage: String) -> EmulatorResponse {
        switch flavor {
        case .bitwarden: ErrorBodies.notFound(flavor)
        case .vaultwarden: ErrorBodies.error(flavor, status: 400, message: vaultwardenMessage)
        }
    }
}
