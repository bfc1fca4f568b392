import BitwardenAPI
import Foundation
import OfflineSync
import VaultLogKit
import VaultModel

// Runs the README's example (Example.swift) against a Bitwarden-compatible server, then checks
// with a second client that the server holds both versions. `make example` starts the emulator
// and runs: EmbeddingApp SERVER-URL EMAIL STORE-DIR, with the master password in VAULTLOG_PASSWORD.
let arguments = CommandLine.arguments.dropFirst()
guard arguments.count == 3, let server = URL(string: arguments[arguments.startIndex]),
      let password = ProcessInfo.processInfo.environment["VAULTLOG_PASSWORD"] else {
    FileHandle.standardError.write(Data("usage: VAULTLOG_PASSWORD=… EmbeddingApp SERVER-URL EMAIL STORE-DIR\n".utf8))
    exit(2)
}
let email = arguments[arguments.startIndex + 1]
let store = URL(fileURLWithPath: arguments[arguments.startIndex + 2])

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("example: FAILED: \(message)\n".utf8))
    exit(1)
}

do {
    // "Another device": a second client that changes the item's password on the server.
    let desktop: @Sendable (String) async throws -> Void = { id in
        let client = BitwardenClient(configuration: .selfHosted(server))
        let login = try await client.login(email: email, password: password)
        let current = try await client.getCipher(id: id)
        var view = try current.decrypt(userKey: login.userKey)
        view.login?.password = "changed on the desktop"
        _ = try await client.updateCipher(try view.encrypt(userKey: login.userKey), lastKnownRevisionDate: current.revisionDate)
    }
    let reports = try await runEmbeddingExample(server: server, email: email, masterPassword: password, storeURL: store, desktop: desktop)
    guard let backup = reports.first(where: { $0.record.kind == .localVersionBackedUp }), let name = backup.backupName,
          backup.record.sideKept == .server else {
        fail("no conflict report with a backup of the offline edit: \(reports.map(\.summary))")
    }

    let check = BitwardenClient(configuration: .selfHosted(server))
    let login = try await check.login(email: email, password: password)
    let items = try await check.ciphers().map { try $0.decrypt(userKey: login.userKey) }
    guard items.contains(where: { $0.name == "Bank" && $0.login?.password == "changed on the desktop" }),
          items.contains(where: { $0.name == name && $0.login?.password == "typed offline" }) else {
        fail("the server does not hold both versions: \(items.map(\.name))")
    }
    let reopened = try OfflineVault(directory: store, server: .selfHosted(server), tokenStore: InMemoryTokenStore())
    defer { reopened.close() }
    try await reopened.unlock(email: email, masterPassword: password)
    guard reopened.status().pendingCount == 0 else { fail("changes are still pending in the store") }
    guard try reopened.conflictReports().isEmpty, try reopened.reports(after: 0).count == reports.count else {
        fail("the review mark or the reports did not survive a relaunch")
    }
    print("example: OK (the server holds both versions; the report named \(name); nothing pending)")
} catch {
    fail("\(error)")
}
