import BitwardenAPI
import BitwardenEmulator
import Foundation
@_spi(Tools) import OfflineSync
import Testing
import VaultCrypto
import VaultModel

@Suite("Route aliases, folder routes, profile, unmatched routes")
struct RouteAliasTests {
    @Test(arguments: EmulatorFlavor.allCases)
    func cipherAliases_behaveLikeTheirPrimaryRoutes(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let created = try await h.client.createCipher(h.loginCipher())
            let id = try #require(created.id)
            let single = try RawHTTP.json(try await h.raw("GET", "/api/ciphers/\(id)").body)
            #expect(single["object"] as? String == (flavor == .bitwarden ? "cipher" : "cipherDetails"))
            let details = try RawHTTP.json(try await h.raw("GET", "/api/ciphers/\(id)/details").body)
            #expect(details["object"] as? String == "cipherDetails")
            #expect(details["collectionIds"] as? [String] == [])

            h.clock.advance(by: 2)
            let post = try await h.raw("POST", "/api/ciphers/\(id)", body: try created.requestBody())   // obsolete update alias
            #expect(post.status == 200)
            #expect(h.emulator.cipher(id: id)?.revisionDate == BitwardenDate(Harness.start.addingTimeInterval(2)))

            let hardDelete = try await h.raw("POST", "/api/ciphers/\(id)/delete")   // obsolete alias: permanent on both
            #expect(hardDelete.status == 200)
            #expect(h.emulator.cipher(id: id) == nil)
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func folderRoutes_readRenameDelete(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let key = h.account.userKey
            let folder = try await h.client.createFolder(name: EncString.encrypt("Work", key: key, random: h.random))
            var cipher = h.loginCipher()
            cipher.folderId = folder.id
            let filed = try await h.client.createCipher(cipher)
            #expect(filed.folderId == folder.id)

            #expect(try await h.raw("GET", "/api/folders/\(folder.id)").status == 200)
            let renamed = EncString.encrypt("Home", key: key, random: h.random)
            let put = try await h.raw("PUT", "/api/folders/\(folder.id)", body: Data(#"{"name":"\#(renamed.serialized)"}"#.utf8))
            #expect(put.status == 200)
            #expect(try await h.client.folders().first?.name == renamed)

            #expect(try await h.raw("DELETE", "/api/folders/\(folder.id)").status == 200)
            #expect(try await h.client.folders().isEmpty)
            #expect(try await h.client.getCipher(id: filed.id!).folderId == nil)
            let missing = try await h.raw("GET", "/api/folders/\(folder.id)")
            #expect(missing.status == (flavor == .bitwarden ? 404 : 400))
        }
    }

    @Test func profile_andUnmatchedRoutes() async throws {
        try await Harness.with(.bitwarden) { h in
            let profile = try RawHTTP.json(try await h.raw("GET", "/api/accounts/profile").body)
            #expect(profile["object"] as? String == "profile")
            #expect(profile["email"] as? String == Harness.email)
            let unmatched = try await h.raw("GET", "/api/nothing-here")
            #expect(unmatched.status == 404 && unmatched.body.isEmpty)
            let missingEmail = try await h.raw("POST", "/identity/accounts/prelogin", body: Data("{}".utf8))
            #expect(missingEmail.status == 400)
            #expect((try RawHTTP.json(missingEmail.body)["validationErrors"] as? [String: [String]])?["Email"] != nil)
        }
    }

    @Test func cloudLayout_worksAgainstSeparateBases() async throws {
        try await Harness.with(.vaultwarden) { h in
            let client = BitwardenClient(configuration: .cloud(api: h.baseURL.appendingPathComponent("api"),
                                                               identity: h.baseURL.appendingPathComponent("identity")))
            let login = try await client.login(email: Harness.email, password: Harness.password)
            #expect(login.userKey == h.account.userKey)
            #expect(try await client.sync().ciphers.isEmpty)
        }
    }
}

@Suite("Lifecycle and what the client sends")
struct LifecycleTests {
    @Test func client_sendsVersionAndDeviceHeaders_onEveryRequest() async throws {
        try await Harness.with(.bitwarden) { h in
            _ = try await h.client.sync()
            let requests = h.emulator.recentRequests
            #expect(requests.map(\.path).contains("/identity/connect/token"))
            #expect(requests.allSatisfy { $0.clientVersion == "2026.2.0" && $0.deviceType == "25" })
            #expect(requests.last?.status == 200)
        }
    }

    @Test func faultsAreRecorded() async throws {
        try await Harness.with(.bitwarden) { h in
            h.emulator.clearRequestLog()
            h.emulator.faults.failNext(matching: RouteMatcher("GET /api/sync"), with: .status(502))
            _ = await apiError { _ = try await h.client.sync() }
            #expect(h.emulator.recentRequests.map(\.description) == ["GET /api/sync → 502 [HTTP 502]"])
        }
    }

    @Test func startingTwice_orOnABusyPort_failsClearly() async throws {
        try await Harness.with(.bitwarden) { h in
            await #expect(throws: EmulatorError.alreadyRunning) { _ = try await h.emulator.start() }
            let other = BitwardenEmulator()
            await #expect(throws: (any Error).self) { _ = try await other.start(port: h.baseURL.port!) }
            #expect(other.baseURL == nil)
        }
    }

    @Test func idsWithPathCharacters_stayInOneSegment() async throws {
        try await Harness.with(.bitwarden) { h in
            let error = await apiError { _ = try await h.client.getCipher(id: "../accounts/profile") }
            #expect(error?.serverErrorKind == .notFound)   // looked up as one odd id, not routed elsewhere
            #expect(h.emulator.recentRequests.last?.path.contains("..%2Faccounts") == true)
        }
    }
}
