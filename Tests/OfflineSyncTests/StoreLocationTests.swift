import Foundation
@_spi(Tools) import OfflineSync
import Testing
import VaultCrypto
import VaultLogTesting
import VaultLogTestSupport

/// Apps name their store with a URL (Application Support); tools with a path. Both open the
/// same store.
@Suite struct StoreLocationTests {
    @Test func fileURL_opensTheSameStoreAsItsPath() throws {
        let dir = TemporaryDirectory("store-url")
        let key = EncString.encrypt(Array("protected".utf8), key: SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 4)),
                                    iv: [UInt8](repeating: 4, count: 16))
        let account = StoredAccount(userId: "u1", email: "u1@example.com", kdf: .pbkdf2(iterations: 600_000), protectedUserKey: key)
        do {
            let store = try VaultLogStore(directory: URL(fileURLWithPath: dir.path, isDirectory: true))
            try store.saveAccount(account)
            store.close()
        }
        let reopened = try VaultLogStore(path: dir.path)
        #expect(try reopened.storedAccounts() == [account])
    }

    @Test func remoteURL_isRefusedNamingIt_andCreatesNothing() throws {
        let url = try #require(URL(string: "https://example.com/vault"))
        #expect(throws: OfflineSyncError.notAFileLocation("https://example.com/vault")) {
            try VaultLogStore(directory: url)
        }
        #expect(!FileManager.default.fileExists(atPath: url.path))
    }
}
