// README: begin
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
// README: end

import BitwardenEmulator
import Testing

/// The README's embedding example is this file's code between the markers: it compiles with
/// the package, runs against the emulator on loopback, and must stay the same text as the
/// README's, so the README can never show code that does not build.
@Suite("README example")
struct ReadmeExampleTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test func theExample_runsAgainstTheEmulator_andLeavesTheEditOnTheServer() async throws {
        let emulator = BitwardenEmulator()
        let account = try emulator.createAccount(email: "app@example.com", password: "correct horse", iterations: 5000)
        let server = try await emulator.start()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("readme-example-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        do {
            let result = try await runEmbeddingExample(server: server, email: "app@example.com", masterPassword: "correct horse",
                                                       storeURL: dir)
            #expect(result.isApplied, "\(result)")
            let items = emulator.ciphers(userId: account.userId)
            #expect(items.count == 1)
            let view = try #require(items.first).decrypt(userKey: account.userKey)
            #expect(view.name == "Bank" && view.login?.password == "second")
            let store = try VaultLogStore(directory: dir)
            #expect(try store.pendingCount(userId: account.userId) == 0)
        } catch {
            await emulator.stop()
            throw error
        }
        await emulator.stop()
    }

    @Test func theReadme_showsExactlyThisCode() throws {
        let source = try String(contentsOf: Self.root.appendingPathComponent("Tests/BitwardenEmulatorTests/ReadmeExampleTests.swift"),
                                encoding: .utf8)
        let example = try #require(source.components(separatedBy: "// README: begin\n").dropFirst().first?
            .components(separatedBy: "// README: end").first)
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(readme.contains("```swift\n" + example + "```\n"),
                "README.md's embedding example differs from the code between the README markers of this file: copy it over")
    }
}
