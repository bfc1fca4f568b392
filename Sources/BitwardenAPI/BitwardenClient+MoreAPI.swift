import Foundation
import Logging
@_spi(Tools) import OfflineSync
import Synchronization
import VaultCrypto
import VaultModel

extension BitwardenClient {
    // MARK: More API

    /// `GET /api/sync?excludeDomains=true` with profile and folders.
    public func fullSync() async throws -> SyncResponse {
        try decode(SyncResponse.self, try await send(.sync, query: "?excludeDomains=true"), route: BitwardenEndpoint.sync.route())
    }

    /// `GET /api/ciphers`: every item of the user.
    public func ciphers() async throws -> [Cipher] {
        try decode(ListResponse<Cipher>.self, try await send(.listCiphers), route: BitwardenEndpoint.listCiphers.route()).data
    }

    /// `GET /api/folders`.
    public func folders() async throws -> [Folder] {
        try decode(ListResponse<Folder>.self, try await send(.listFolders), route: BitwardenEndpoint.listFolders.route()).data
    }

    /// `POST /api/folders` with an encrypted name.
    public func createFolder(name: EncString) async throws -> Folder {
        let body = try JSONSerialization.data(withJSONObject: ["name": name.serialized])
        return try decode(Folder.self, try await send(.createFolder, body: body), route: BitwardenEndpoint.createFolder.route())
    }

    /// The port's freshness check (``revisionDate()``).
    public func accountRevisionDate() async throws -> Date? { try await revisionDate() }

    /// `GET /api/accounts/revision-date`: when anything in the account last changed. Compare it
    /// with the last sync to skip `/sync` when nothing changed.
    public func revisionDate() async throws -> Date {
        let route = BitwardenEndpoint.revisionDate.route()
        let data = try await send(.revisionDate)
        guard let text = String(data: data, encoding: .utf8)?.trimmingCharacters(in: .whitespacesAndNewlines),
              let milliseconds = Int64(text) else {
            throw malformed(route, "expected epoch milliseconds")
        }
        return Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }
}
