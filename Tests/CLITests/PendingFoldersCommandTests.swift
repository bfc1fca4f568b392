import Foundation
@_spi(Tools) import OfflineSync
import Testing
import VaultCrypto
import VaultModel
import VaultLogTestSupport

/// `vaultlog pending` with a key lists the folder changes waiting for the server, with their
/// names decrypted and the folder id map.
@Suite struct PendingFoldersCommandTests {
    @Test func pending_withKey_listsFolderChangesWaiting() throws {
        let fixture = try HistoryFixture(items: 1, edits: 1)
        do {
            let store = try VaultLogStore(path: fixture.store)
            defer { store.close() }
            store.unlock(userId: HistoryFixture.userId, userKey: fixture.userKey)
            let at = BitwardenDate(Date(timeIntervalSince1970: 1_767_300_000))
            func named(_ name: String) -> OutcomeBody {
                var body = OutcomeBody(at: at)
                body.folderName = EncString.encrypt(name, key: fixture.userKey).serialized
                return body
            }
            try store.append(userId: HistoryFixture.userId, events: [
                .init(cipherId: "folder-new", type: .folderCreated, body: .outcome(named("Travel"))),
                .init(cipherId: "folder-old", type: .folderRenamed, body: .outcome(named("Bills 2026"))),
            ])
        }
        let text = try CLI.run(["pending", fixture.store] + fixture.keyArgs)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("0 pending and 2 folder changes"), "\(text.stdout)")
        #expect(text.stdout.contains("folder folder-new  create  \"Travel\""), "\(text.stdout)")
        #expect(text.stdout.contains("folder folder-old  rename  \"Bills 2026\""), "\(text.stdout)")

        let users = try CLI.run(["pending", fixture.store, "--json"] + fixture.keyArgs).jsonDocument()["users"] as? [[String: Any]]
        let folders = try #require(users?.first?["pendingFolders"] as? [[String: Any]])
        #expect(folders.compactMap { $0["name"] as? String } == ["Travel", "Bills 2026"])
        #expect(folders.compactMap { $0["change"] as? String } == ["create", "rename"])
    }
}
