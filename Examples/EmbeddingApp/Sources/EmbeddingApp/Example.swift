import Foundation
import BitwardenAPI
import VaultLogKit
import VaultModel

/// An app's whole story with one object: log in, save, lose the connection and keep saving,
/// sync when it is back, and tell the user what happened — a conflict report with the backup's
/// name and the side kept, and the status as the sync runs. `desktop` is another device that
/// changes the same item on the server while this one is offline.
func runEmbeddingExample(server: URL, email: String, masterPassword: String, storeURL: URL,
                         desktop: @Sendable (String) async throws -> Void) async throws -> [ConflictReport] {
    let vault = try OfflineVault(directory: storeURL, server: .selfHosted(server),
                                 tokenStore: InMemoryTokenStore())      // an app: the keychain
    defer { vault.close() }
    try await vault.logIn(email: email, masterPassword: masterPassword)  // later launches, offline too: vault.unlock(...)

    let statusPrinter = Task {                                           // the vault screen's banner
        for await status in vault.statusUpdates() { print("status: \(status.phase), \(status.pendingCount) pending") }
    }
    defer { statusPrinter.cancel() }

    var bank = CipherView(type: .login, name: "Bank", login: LoginView(username: "alice", password: "first"))
    bank = try await vault.save(bank).cipher!.decrypt(userKey: vault.store.userKey(userId: vault.userId!))

    vault.client.setBaseURL(URL(string: "http://127.0.0.1:9")!)          // the phone loses its connection
    bank.login?.password = "typed offline"
    let edit = try await vault.save(bank)                                // durable on the device when it returns
    print(edit.isOffline ? "saved on the device" : "saved on the server")
    try await desktop(bank.id!)                                          // meanwhile another device changes it too
    vault.client.setBaseURL(server)                                      // back online

    let result = try await vault.sync()                                  // sends, resolves, then applies the server's items
    print("sync: \(result.isCurrent ? "up to date" : "\(result.stillPending.count) still pending")")
    let reports = try vault.conflictReports()                            // from the log: also after a relaunch
    for report in reports {
        print("conflict: \(report.summary) [kept: \(report.record.sideKept?.rawValue ?? "-"), backup: \(report.backupName ?? "-")]")
    }
    if let last = reports.last { try await vault.markReviewed(through: last) }
    return reports
}
