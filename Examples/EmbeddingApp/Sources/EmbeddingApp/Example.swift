import Foundation
import BitwardenAPI
import OfflineSync
import VaultModel

/// Logs in, opens the device's store, adds an item and edits it (an edit the server cannot
/// take is saved offline, durably), follows the pending count, and syncs.
func runEmbeddingExample(server: URL, email: String, masterPassword: String, storeURL: URL) async throws -> SyncResult {
    let client = BitwardenClient(configuration: .selfHosted(server))
    let login = try await client.login(email: email, password: masterPassword)
    let store = try VaultLogStore(directory: storeURL)                 // one per device and process
    defer { store.close() }
    try store.saveAccount(StoredAccount(userId: login.userId, email: email, kdf: login.kdf,
                                        protectedUserKey: login.protectedUserKey))
    store.unlock(userId: login.userId, userKey: login.userKey)        // offline later: store.unlock(email:masterPassword:)

    let badge = Task {                                                // the app's badge, as it changes
        for await count in store.pendingCountUpdates(userId: login.userId) { print("pending changes:", count) }
    }
    defer { badge.cancel() }

    let resolver = OfflineSyncResolver(store: store, server: client)  // one per store, shared
    let repository = VaultRepository(store: store, userId: login.userId, server: client, resolver: resolver)
    let added = try await repository.addCipher(
        CipherView(type: .login, name: "Bank", login: LoginView(username: "alice", password: "first")))
    guard var item = try added.cipher?.decrypt(userKey: login.userKey) else { throw CancellationError() }
    item.login?.password = "second"
    let edit = try await repository.updateCipher(item)                // online; or saved offline; or, when the item
    print(edit.isOffline ? "saved offline" : "saved on the server")   // had pending changes, appended and resolved

    let sync = SyncService(store: store, server: client, resolver: resolver)
    let result = try await sync.fetchSync(userId: login.userId)       // resolves first; never overwrites pending edits
    switch result {
    case .applied, .upToDate: print("in sync")
    case .aborted(let count, let reasons, _): print("\(count) changes still pending:", reasons)
    }
    return result
}
