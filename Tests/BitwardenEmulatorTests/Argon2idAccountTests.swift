import BitwardenAPI
import BitwardenEmulator
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@_spi(Tools) import OfflineSync
import Testing
import VaultCrypto
import VaultLogTesting

/// Argon2id accounts end to end over loopback HTTP, and KDF settings a server must not be able
/// to impose (absurd prelogin answers, admin inputs).
@Suite("Argon2id accounts and KDF bounds")
struct Argon2idAccountTests {
    static let kdf = KdfConfig.argon2id(iterations: 2, memoryMiB: 16, parallelism: 2)

    @Test(arguments: EmulatorFlavor.allCases)
    func argon2idAccount_logsIn_andUnlocksOfflineFromTheStoredAccount(flavor: EmulatorFlavor) async throws {
        let emulator = BitwardenEmulator(configuration: EmulatorConfiguration(flavor: flavor, random: SeededRandomSource(seed: 3)))
        let account = try emulator.createAccount(email: "Argon@Example.com", password: "argon pw", kdf: Self.kdf)
        let base = try await emulator.start()
        defer { Task { await emulator.stop() } }

        let prelogin = try RawHTTP.json(try await RawHTTP.send("POST", base.appendingPathComponent("identity/accounts/prelogin"),
                                                               body: Data(#"{"email":"argon@example.com"}"#.utf8), token: "").body)
        #expect(prelogin["kdf"] as? Int == 1)
        #expect(prelogin["kdfIterations"] as? Int == 2)
        #expect(prelogin["kdfMemory"] as? Int == 16)
        #expect(prelogin["kdfParallelism"] as? Int == 2)

        let client = BitwardenClient(configuration: Harness.clientConfiguration(base))
        let login = try await client.login(email: " argon@example.com ", password: "argon pw")
        #expect(login.kdf == Self.kdf)
        #expect(login.userKey == account.userKey)

        // The stored account unlocks the vault offline with the same derivation.
        let dir = NSTemporaryDirectory() + "/vaultlog-argon-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try VaultLogStore(path: dir)
        defer { store.close() }
        try store.saveAccount(StoredAccount(userId: login.userId, email: "argon@example.com", kdf: login.kdf,
                                            protectedUserKey: login.protectedUserKey, salt: login.salt))
        #expect(try store.unlockBlocking(email: "ARGON@example.com", masterPassword: "argon pw") == login.userId)
        #expect(try store.userKey(userId: login.userId) == account.userKey)
        #expect(throws: VaultCryptoError.authenticationFailed) { try store.unlockBlocking(email: "argon@example.com", masterPassword: "wrong") }
        await emulator.stop()
    }

    /// A server (or something between) that answers prelogin with settings out of Bitwarden's
    /// ranges gets a clear error naming the setting: no trap in the primitive, no hours of work.
    @Test(arguments: [
        (#"{"kdf":0,"kdfIterations":5000000000}"#, "PBKDF2 iterations 5000000000 is outside the accepted range 5000–2000000"),
        (#"{"kdf":0,"kdfIterations":1e300}"#, "'kdfIterations' in the prelogin reply is not a whole number"),
        (#"{"kdf":1,"kdfIterations":3,"kdfMemory":1000000,"kdfParallelism":4}"#, "Argon2id memory 1000000 MiB is outside the accepted range 16–1024 MiB"),
        (#"{"kdf":1,"kdfIterations":3,"kdfMemory":64,"kdfParallelism":64}"#, "Argon2id parallelism 64 is outside the accepted range 1–16"),
        (#"{"kdf":9,"kdfIterations":3}"#, "unsupported KDF type 9"),
        (#"{"kdf":0}"#, "no kdf/kdfIterations"),
    ])
    func absurdPreloginAnswer_isAClearError(body: String, message: String) async throws {
        try await Harness.with(.bitwarden) { h in
            h.emulator.faults.failNext(matching: RouteMatcher("POST /identity/accounts/prelogin"), with: .reply(status: 200, body: body))
            let client = BitwardenClient(configuration: Harness.clientConfiguration(h.baseURL))
            do {
                _ = try await client.login(email: Harness.email, password: Harness.password)
                Issue.record("login succeeded with prelogin \(body)")
            } catch let error as BitwardenAPIError {
                #expect(error.message.contains(message), "\(error)")
                #expect(error.route == "POST /identity/accounts/prelogin")
            }
        }
    }

    @Test func adminAccountRoute_refusesAbsurdNumbers_andMakesArgon2idAccounts() async throws {
        try await Harness.with(.bitwarden, adminToken: "s3cret-admin") { h in
            let admin = ["X-Admin-Token": "s3cret-admin"]
            for body in [#"{"email":"x@example.com","password":"p","iterations":1e300}"#,
                         #"{"email":"x@example.com","password":"p","iterations":100}"#,
                         #"{"email":"x@example.com","password":"p","kdf":"argon2id","memory":4096}"#,
                         #"{"email":"x@example.com","password":"p","kdf":"scrypt"}"#] {
                let reply = try await h.raw("POST", "/admin/accounts", body: Data(body.utf8), token: "", headers: admin)
                #expect(reply.status == 400, "\(body): \(String(decoding: reply.body, as: UTF8.self))")
            }
            for body in [#"{"route":"GET /api/sync","failure":503,"count":1e300}"#, #"{"latency":1e300}"#] {
                let path = body.contains("latency") ? "/admin/faults/latency" : "/admin/faults/fail-next"
                let reply = try await h.raw("POST", path, body: Data(body.utf8), token: "", headers: admin)
                #expect(reply.status == 400, "\(body): \(String(decoding: reply.body, as: UTF8.self))")
            }
            let made = try await h.raw("POST", "/admin/accounts", body:
                Data(#"{"email":"argon@example.com","password":"p","kdf":"argon2id","iterations":2,"memory":16,"parallelism":1}"#.utf8),
                token: "", headers: admin)
            #expect(made.status == 200)
            #expect(String(decoding: made.body, as: UTF8.self).contains("Argon2id (2 iterations, 16 MiB, parallelism 1)"))
            let client = BitwardenClient(configuration: Harness.clientConfiguration(h.baseURL))
            #expect(try await client.login(email: "argon@example.com", password: "p").kdf == .argon2id(iterations: 2, memoryMiB: 16, parallelism: 1))
        }
    }

    /// Plain http to another machine would send the master-password hash in clear: refused
    /// before any connection, unless allowed explicitly. Loopback stays allowed.
    @Test func plainHTTPToAnotherHost_isRefusedBeforeConnecting() async throws {
        let client = BitwardenClient(configuration: .selfHosted(URL(string: "http://vault.example.com")!))
        do {
            _ = try await client.login(email: "a@example.com", password: "pw")
            Issue.record("login over plain http to another host was attempted")
        } catch let error as BitwardenAPIError {
            #expect(error.message.contains("refusing plain http to vault.example.com"), "\(error)")
            #expect(error.requestMayHaveArrived == false)
        }
        var configuration = BitwardenClientConfiguration.selfHosted(URL(string: "http://vault.example.com")!)
        #expect(!configuration.permits(URL(string: "http://10.0.0.1/api")!))
        #expect(configuration.permits(URL(string: "https://vault.example.com/api")!))
        #expect(configuration.permits(URL(string: "http://127.0.0.1:8087/api")!))
        #expect(configuration.permits(URL(string: "http://localhost:8087/api")!))
        #expect(configuration.permits(URL(string: "http://[::1]:8087/api")!))
        #expect(!configuration.permits(URL(string: "http://127.0.0.1.evil.example/api")!))
        configuration.allowInsecureHTTP = true
        #expect(configuration.permits(URL(string: "http://10.0.0.1/api")!))
    }
}
