import BitwardenAPI
import BitwardenEmulator
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@_spi(Tools) import OfflineSync
import Testing
import VaultCrypto
import VaultModel
import VaultLogTesting

@Suite("Auth: prelogin, token grants, expiry and refresh")
struct AuthTests {
    @Test(arguments: EmulatorFlavor.allCases)
    func prelogin_reportsTheAccountKdf_onBothRoutes(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            for path in ["/identity/accounts/prelogin", "/identity/accounts/prelogin/password", "/api/accounts/prelogin"] {
                let reply = try await h.raw("POST", path, body: Data(#"{"email":"ALICE@example.com"}"#.utf8), token: "")
                #expect(reply.status == 200)
                let json = try RawHTTP.json(reply.body)
                #expect(json["kdf"] as? Int == 0)
                #expect(json["kdfIterations"] as? Int == 5000)
            }
            let unknown = try RawHTTP.json(try await h.raw("POST", "/identity/accounts/prelogin",
                                                            body: Data(#"{"email":"nobody@example.com"}"#.utf8)).body)
            #expect(unknown["kdfIterations"] as? Int == 600_000)   // does not reveal whether the account exists
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func login_unlocksTheUserKey_andTheRSAPrivateKey(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            #expect(h.login.userId == h.account.userId)
            #expect(h.login.userKey == h.account.userKey)
            #expect(h.login.kdf == .pbkdf2(iterations: 5000))
            #expect(h.login.protectedUserKey == h.account.protectedUserKey)
            let der = try #require(h.login.privateKey).decrypt(key: h.login.userKey)
            #expect(Array(der.prefix(2)) == [0x30, 0x82])   // PKCS#8 DER SEQUENCE
            #expect(der.count > 1100)
        }
    }

    /// Bitwarden's public test account (vector T8): the published account logs in and unlocks exactly its user key.
    /// 600,000 PBKDF2 iterations run twice (client login, and the expected hash once here).
    @Test func login_t8FullAccountVector_unlocksThePublishedUserKey() async throws {
        let protectedKey = try EncString(
            "2.Q/2PhzcC7GdeiMHhWguYAQ==|GpqzVdr0go0ug5cZh1n+uixeBC3oC90CIe0hd/HWA/pTRDZ8ane4fmsEIcuc8eMKUt55Y2q/fbNzsYu41YTZzzsJUSeqVjT8/iTQtgnNdpo=|dwI+uyvZ1h/iZ03VQ+/wrGEFYVewBUUl/syYgjsNMbE=")
        let userKey = try SymmetricCryptoKey(base64: "bYCsk857hl8QJJtxyRK65tjUrbxKC4aDifJpsml+NIv4W9cVgFvi3qVD+yJTUU2T4UwNKWYtt9pqWf7Q+2WCCg==")
        let emulator = BitwardenEmulator(configuration: EmulatorConfiguration(random: SeededRandomSource(seed: 8)))
        try emulator.createAccount(
            email: "test@bitwarden.com", kdf: .pbkdf2(iterations: 600_000),
            masterPasswordHash: "8HT+qrqqhBaGEIHp9mwuv1ivoW9r6yaauAkOCYbe+SM=", protectedUserKey: protectedKey, userKey: userKey)
        let base = try await emulator.start()
        let client = BitwardenClient(configuration: Harness.clientConfiguration(base))
        let login = try await client.login(email: "test@bitwarden.com", password: "asdfasdfasdf")
        #expect(login.userKey.exportBase64() == userKey.exportBase64())
        #expect(login.kdf == .pbkdf2(iterations: 600_000))
        #expect(login.kdfWarning == nil, "600,000 iterations is what Bitwarden recommends")
        _ = try await client.sync()
        await emulator.stop()
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func login_withTheWrongPassword_isRejectedWithTheServerMessage(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let client = BitwardenClient(configuration: Harness.clientConfiguration(h.baseURL))
            let error = await apiError { _ = try await client.login(email: Harness.email, password: "wrong") }
            #expect(error?.serverErrorKind == .rejected)
            #expect(error?.status == 400)
            #expect(error?.message.contains("Username or password is incorrect") == true)
        }
    }

    /// An account Bitwarden accepts but calls weak gets a warning the app can show at login.
    @Test func login_belowTheRecommendedIterations_carriesAWeakKdfWarning() async throws {
        try await Harness.with { h in
            #expect(h.login.kdf == .pbkdf2(iterations: 5000))
            let warning = try #require(h.login.kdfWarning)
            #expect(warning.contains("5000") && warning.contains("600000"), "\(warning)")
        }
    }

    @Test func tokenResponse_hasBitwardensShape() async throws {
        try await Harness.with(.bitwarden) { h in
            let master = try MasterKey.derive(password: Harness.password, email: Harness.email, kdf: .pbkdf2(iterations: 5000))
            let hash = master.passwordHash(password: Harness.password)
                .addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let form = "grant_type=password&username=alice%40example.com&password=\(hash)&scope=api%20offline_access"
                + "&client_id=web&deviceType=9&deviceIdentifier=x&deviceName=firefox"
            let reply = try await h.raw("POST", "/identity/connect/token", body: Data(form.utf8), token: "",
                                        contentType: "application/x-www-form-urlencoded")
            #expect(reply.status == 200)
            let json = try RawHTTP.json(reply.body)
            for key in ["access_token", "expires_in", "refresh_token", "token_type", "Key", "PrivateKey", "Kdf", "KdfIterations",
                        "KdfMemory", "KdfParallelism", "ResetMasterPassword", "ForcePasswordReset", "UserDecryptionOptions", "scope"] {
                #expect(json[key] != nil, "token response lacks \(key)")
            }
            #expect(json["token_type"] as? String == "Bearer")
            #expect(json["expires_in"] as? Int == 3600)
            #expect(json["Key"] as? String == h.account.protectedUserKey.serialized)
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func apiWithoutAValidToken_is401(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            #expect(try await h.raw("GET", "/api/sync", token: "").status == 401)
            #expect(try await h.raw("GET", "/api/ciphers", token: "not-a-jwt").status == 401)
            let forged = h.login.tokens.accessToken.dropLast(3) + "AAA"
            #expect(try await h.raw("GET", "/api/sync", token: String(forged)).status == 401)
            let bitwardenBodyIsEmpty = try await h.raw("GET", "/api/sync", token: "").body.isEmpty
            #expect(bitwardenBodyIsEmpty == (flavor == .bitwarden))
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func expiredAccessToken_isRefreshedOnce_andTheRequestSucceeds(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let created = try await h.client.createCipher(h.loginCipher())
            let before = try #require(h.client.tokens)
            h.clock.advance(by: 3601)   // the server now considers the token expired; the client's clock does not
            #expect(try await h.raw("GET", "/api/sync", token: before.accessToken).status == 401)
            let fetched = try await h.client.getCipher(id: try #require(created.id))
            #expect(fetched.id == created.id)
            let after = try #require(h.client.tokens)
            #expect(after.accessToken != before.accessToken)
            #expect(after.refreshToken == before.refreshToken)   // Bitwarden refresh tokens are reusable
        }
    }

    @Test func manyConcurrentRequestsAfterExpiry_shareTheRefresh() async throws {
        try await Harness.with(.bitwarden) { h in
            let created = try await h.client.createCipher(h.loginCipher())
            h.clock.advance(by: 7200)
            let id = try #require(created.id)
            try await withThrowingTaskGroup(of: Cipher.self) { group in
                for _ in 0..<16 { group.addTask { try await h.client.getCipher(id: id) } }
                for try await cipher in group { #expect(cipher.id == id) }
            }
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func refusedRefresh_isLoginRequired_withALogInAgainMessage(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            h.emulator.revokeSessions(userId: h.account.userId)
            let error = await apiError { _ = try await h.client.sync() }
            #expect(error?.serverErrorKind == .loginRequired)
            #expect(error?.description.contains("log in again") == true)
            #expect(h.client.tokens == nil)
            // Logging in again works.
            _ = try await h.client.login(email: Harness.email, password: Harness.password)
            _ = try await h.client.sync()
        }
    }

    @Test func expiredRefreshToken_isLoginRequired() async throws {
        try await Harness.with(.bitwarden) { h in
            h.clock.advance(by: 31 * 86_400)   // past the 30-day sliding window
            let error = await apiError { _ = try await h.client.folders() }
            #expect(error?.serverErrorKind == .loginRequired)
        }
    }

    @Test func callsBeforeLogin_areLoginRequired() async throws {
        try await Harness.with(.bitwarden) { h in
            let client = BitwardenClient(configuration: Harness.clientConfiguration(h.baseURL))
            let error = await apiError { _ = try await client.sync() }
            #expect(error?.serverErrorKind == .loginRequired)
            #expect(error?.message.contains("login(email:password:)") == true)
        }
    }
}
