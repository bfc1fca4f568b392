import BitwardenAPI
import Foundation
import OfflineSync

// Opens a store, counts what is pending, and points a client at a server: the library alone.
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("library-only-\(UUID().uuidString)")
defer { try? FileManager.default.removeItem(at: directory) }
let store = try VaultLogStore(directory: directory)
let client = BitwardenClient(configuration: .selfHosted(URL(string: "https://vault.example.com")!))
_ = client
print("users with pending changes:", try store.storedAccounts().filter { try store.pendingCount(userId: $0.userId) > 0 }.count)
store.close()
