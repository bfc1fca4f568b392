import BitwardenAPI
import Foundation
import OfflineSync

// Runs the README's example (Example.swift) against a Bitwarden-compatible server, then checks
// with a second client that the server holds the edit. `make example` starts the emulator and
// runs: EmbeddingApp SERVER-URL EMAIL STORE-DIR, with the master password in VAULTLOG_PASSWORD.
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
    let result = try await runEmbeddingExample(server: server, email: email, masterPassword: password, storeURL: store)
    guard result.isApplied else { fail("the sync did not apply: \(result)") }

    let check = BitwardenClient(configuration: .selfHosted(server))
    let login = try await check.login(email: email, password: password)
    let items = try await check.ciphers().map { try $0.decrypt(userKey: login.userKey) }
    guard items.contains(where: { $0.name == "Bank" && $0.login?.password == "second" }) else {
        fail("the server does not hold the edited item: \(items.map(\.name))")
    }
    let reopened = try VaultLogStore(directory: store)
    defer { reopened.close() }
    guard try reopened.pendingCount(userId: login.userId) == 0 else { fail("changes are still pending in the store") }
    print("example: OK (the server holds the edit; nothing pending)")
} catch {
    fail("\(error)")
}
