import BitwardenAPI
import BitwardenEmulator
import Foundation
@_spi(Tools) import OfflineSync
import Testing
import VaultCrypto
import VaultModel
import VaultLogTesting

@Suite("State file and determinism")
struct StateAndDeterminismTests {
    @Test func saveAndLoad_keepAccountsCiphersAndFolders() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("emulator-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let (cipherId, folderId) = try await Harness.with(.bitwarden) { h in
            let created = try await h.client.createCipher(h.loginCipher(name: "Persisted"))
            let folder = try await h.client.createFolder(name: EncString.encrypt("F", key: h.account.userKey, random: h.random))
            try h.emulator.save(to: path)
            return (created.id!, folder.id)
        }
        let clock = ManualClock(Harness.start)
        let emulator = try BitwardenEmulator.load(from: path, configuration: EmulatorConfiguration(now: { clock.now }))
        let base = try await emulator.start()
        let client = BitwardenClient(configuration: Harness.clientConfiguration(base))
        let login = try await client.login(email: Harness.email, password: Harness.password)
        let cipher = try await client.getCipher(id: cipherId)
        #expect(try cipher.name?.decryptString(key: login.userKey) == "Persisted")
        #expect(try await client.folders().map(\.id) == [folderId])
        await emulator.stop()
    }

    @Test func loadingAMissingFile_namesThePath() {
        let error = #expect(throws: EmulatorError.self) { try BitwardenEmulator.load(from: "/nonexistent/state.json") }
        #expect(error?.description.contains("/nonexistent/state.json") == true)
    }

    @Test func sameSeedAndClock_giveTheSameIdsDatesAndKeys() throws {
        func run() throws -> ([String?], [BitwardenDate?], String) {
            let clock = ManualClock(Harness.start)
            let emulator = BitwardenEmulator(configuration: EmulatorConfiguration(now: { clock.now }, random: SeededRandomSource(seed: 99)))
            let account = try emulator.createAccount(email: "d@example.com", password: "pw", iterations: 5000)
            var ids: [String?] = []
            var dates: [BitwardenDate?] = []
            for i in 0..<3 {
                clock.advance(by: Double(i) + 0.25)
                let c = emulator.insertCipher(userId: account.userId, Cipher(type: .secureNote,
                    name: EncString.encrypt("n\(i)", key: account.userKey, random: SeededRandomSource(seed: UInt64(i)))))
                ids.append(c.id)
                dates.append(c.revisionDate)
            }
            return ([account.userId] + ids, dates, account.protectedUserKey.serialized)
        }
        let first = try run()
        let second = try run()
        #expect(first.0 == second.0)
        #expect(first.1 == second.1)
        #expect(first.1.map { $0?.text } == second.1.map { $0?.text })
        #expect(first.2 == second.2)
    }

    @Test func frozenClock_stillGivesStrictlyIncreasingRevisions() throws {
        let emulator = BitwardenEmulator(configuration: EmulatorConfiguration(now: { Harness.start }, random: SeededRandomSource(seed: 1)))
        let account = try emulator.createAccount(email: "e@example.com", password: "pw", iterations: 5000)
        let c = emulator.insertCipher(userId: account.userId, Cipher(type: .secureNote,
            name: EncString.encrypt("n", key: account.userKey, random: SeededRandomSource(seed: 2))))
        let edited = try emulator.editAsAnotherDevice(cipherId: c.id!) { $0.favorite = true }
        #expect(edited.revisionDate! > c.revisionDate!)
        #expect(edited.favorite == true)
    }
}
