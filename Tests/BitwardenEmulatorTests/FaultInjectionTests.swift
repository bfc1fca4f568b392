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

@Suite("Fault injection and error classification")
struct FaultInjectionTests {
    @Test(arguments: EmulatorFlavor.allCases)
    func fiftyPercent5xx_everyFailureIsUnavailable(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let created = try await h.client.createCipher(h.loginCipher())
            h.emulator.faults.setErrorRate(0.5, status: 503)
            var failures: [BitwardenAPIError] = []
            var successes = 0
            for _ in 0..<30 {
                do {
                    _ = try await h.client.getCipher(id: created.id!)
                    successes += 1
                } catch let error as BitwardenAPIError {
                    failures.append(error)
                }
            }
            #expect(successes > 0 && failures.count > 0)
            #expect(failures.allSatisfy { $0.serverErrorKind == .unavailable && $0.status == 503 })
            #expect(h.emulator.faults.current.injectedCount == failures.count)
        }
    }

    @Test(arguments: [InjectedFailure.status(500), .status(502), .resetConnection, .closeConnection])
    func serverErrorsAndDroppedConnections_areUnavailable(failure: InjectedFailure) async throws {
        try await Harness.with(.bitwarden) { h in
            h.emulator.faults.failNext(3, matching: RouteMatcher("/api/**"), with: failure)
            let created = await apiError { _ = try await h.client.createCipher(h.loginCipher()) }
            #expect(created?.serverErrorKind == .unavailable, "\(failure)")
            // Anything the failed request might have done stays undone.
            #expect(h.emulator.ciphers(userId: h.account.userId).isEmpty)
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func offlineModes_makeEveryCallUnavailable_untilCleared(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            for mode in OfflineMode.allCases {
                h.emulator.faults.offline = mode
                let error = await apiError { _ = try await h.client.sync() }
                #expect(error?.serverErrorKind == .unavailable, "\(mode)")
                #expect(error?.status == nil)
            }
            h.emulator.faults.clear()
            _ = try await h.client.sync()
        }
    }

    @Test(arguments: [400, 403, 409, 422])
    func injected4xxWithAnErrorBody_isARejection(status: Int) async throws {
        try await Harness.with(.bitwarden) { h in
            let created = try await h.client.createCipher(h.loginCipher())
            h.emulator.faults.failNext(matching: RouteMatcher("PUT /api/ciphers/*"), with: .status(status))
            let error = await apiError { _ = try await h.client.updateCipher(created, lastKnownRevisionDate: created.revisionDate) }
            #expect(error?.serverErrorKind == .rejected)
            #expect(error?.status == status)
            // The scripted failure is used up.
            _ = try await h.client.updateCipher(created, lastKnownRevisionDate: created.revisionDate)
        }
    }

    @Test(arguments: [408, 429])
    func throttlingAndRequestTimeout_areUnavailable(status: Int) async throws {
        try await Harness.with(.bitwarden) { h in
            h.emulator.faults.failNext(matching: RouteMatcher("GET /api/sync"), with: .status(status))
            #expect(await apiError { _ = try await h.client.sync() }?.serverErrorKind == .unavailable)
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func applyThenDropResponse_theItemExistsAlthoughTheClientSawAFailure(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            h.emulator.faults.dropResponseAfterApplying(matching: RouteMatcher("POST /api/ciphers"))
            let error = await apiError { _ = try await h.client.createCipher(h.loginCipher(name: "Lost reply")) }
            #expect(error?.serverErrorKind == .unavailable)
            let stored = h.emulator.ciphers(userId: h.account.userId)
            #expect(stored.count == 1)   // applied exactly once, no silent retry
            #expect(try h.decryptName(try #require(stored.first)) == "Lost reply")
            // The same holds for an update: committed, bumped, unacknowledged.
            let created = try #require(stored.first)
            h.clock.advance(by: 5)
            h.emulator.faults.dropResponseAfterApplying(matching: RouteMatcher("PUT /api/ciphers/*"))
            var edited = created
            edited.favorite = true
            let update = await apiError { _ = try await h.client.updateCipher(edited, lastKnownRevisionDate: created.revisionDate) }
            #expect(update?.serverErrorKind == .unavailable)
            let after = try #require(h.emulator.cipher(id: created.id!))
            #expect(after.favorite == true)
            #expect(after.revisionDate == BitwardenDate(Harness.start.addingTimeInterval(5)))
        }
    }

    /// Body-less routes too: a client must not silently retry them (which would hide the
    /// failure, or soft-delete twice on Vaultwarden).
    @Test(arguments: EmulatorFlavor.allCases)
    func applyThenDropResponse_onDeleteRoutes_isObservable(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let a = try await h.client.createCipher(h.loginCipher(name: "A"))
            let b = try await h.client.createCipher(h.loginCipher(name: "B"))
            _ = try await h.client.sync()   // warm a keep-alive connection, where retries would happen
            h.clock.advance(by: 1)
            h.emulator.faults.dropResponseAfterApplying(matching: RouteMatcher("PUT /api/ciphers/*/delete"))
            #expect(await apiError { try await h.client.softDeleteCipher(id: a.id!) }?.serverErrorKind == .unavailable)
            #expect(h.emulator.cipher(id: a.id!)?.deletedDate == BitwardenDate(Harness.start.addingTimeInterval(1)))
            h.emulator.faults.dropResponseAfterApplying(matching: RouteMatcher("DELETE /api/ciphers/*"))
            #expect(await apiError { try await h.client.deleteCipher(id: b.id!) }?.serverErrorKind == .unavailable)
            #expect(h.emulator.cipher(id: b.id!) == nil)
            h.emulator.faults.failNext(matching: RouteMatcher("GET /api/sync"), with: .closeConnection)
            #expect(await apiError { _ = try await h.client.sync() }?.serverErrorKind == .unavailable)
        }
    }

    @Test func latency_delaysResponses() async throws {
        try await Harness.with(.bitwarden) { h in
            h.emulator.faults.setLatency(0.15, jitter: 0.05)
            let started = ContinuousClock.now
            _ = try await h.client.folders()
            #expect(ContinuousClock.now - started >= .milliseconds(150))
        }
    }

    @Test func slowerThanTheClientTimeout_isUnavailable() async throws {
        try await Harness.with(.bitwarden) { h in
            let impatient = BitwardenClient(configuration: Harness.clientConfiguration(h.baseURL, timeout: 0.3))
            impatient.setTokens(h.client.tokens)
            h.emulator.faults.setLatency(1.2)
            let error = await apiError { _ = try await impatient.folders() }
            #expect(error?.serverErrorKind == .unavailable)
            h.emulator.faults.clear()
        }
    }

    @Test func changingTheBaseURLAtRuntime_goesOfflineAndBack() async throws {
        try await Harness.with(.bitwarden) { h in
            h.client.setBaseURL(URL(string: "http://127.0.0.1:9")!)   // discard port: nothing listens
            let error = await apiError { _ = try await h.client.sync() }
            #expect(error?.serverErrorKind == .unavailable)
            h.client.setEndpoints(.cloud(api: h.baseURL.appendingPathComponent("api"),
                                         identity: h.baseURL.appendingPathComponent("identity")))
            _ = try await h.client.sync()
        }
    }

    @Test func stoppedServer_refusesConnections_andRestartsWithItsState() async throws {
        try await Harness.with(.bitwarden) { h in
            let created = try await h.client.createCipher(h.loginCipher())
            let port = try #require(h.baseURL.port)
            await h.emulator.stop()
            #expect(await apiError { _ = try await h.client.getCipher(id: created.id!) }?.serverErrorKind == .unavailable)
            _ = try await h.emulator.start(port: port)
            #expect(try await h.client.getCipher(id: created.id!).id == created.id)
        }
    }

    @Test func bare404WithoutAnErrorBody_isUnavailable_notNotFound() async throws {
        try await Harness.with(.bitwarden) { h in
            // A wrong base path: the route does not exist, which must not look like a deleted item.
            h.client.setBaseURL(h.baseURL.appendingPathComponent("wrong"))
            let error = await apiError { _ = try await h.client.getCipher(id: "00000000-0000-4000-8000-000000000000") }
            #expect(error?.serverErrorKind == .unavailable)
        }
    }

    @Test func adminRoutes_requireTheToken_andDriveTheSameFaults() async throws {
        try await Harness.with(.bitwarden, adminToken: "s3cret") { h in
            let admin = ["X-Admin-Token": "s3cret"]
            #expect(try await h.raw("GET", "/admin/faults", token: "").status == 401)
            #expect(try await h.raw("GET", "/admin/faults", token: "", headers: ["X-Admin-Token": "nope"]).status == 401)

            let rate = try await h.raw("POST", "/admin/faults/error-rate", body: Data(#"{"rate":1,"status":500}"#.utf8),
                                       token: "", headers: admin)
            #expect(rate.status == 200)
            #expect(await apiError { _ = try await h.client.sync() }?.serverErrorKind == .unavailable)
            #expect(try await h.raw("DELETE", "/admin/faults", token: "", headers: admin).status == 200)
            _ = try await h.client.sync()

            _ = try await h.raw("POST", "/admin/faults/fail-next",
                                body: Data(#"{"count":1,"route":"GET /api/folders","failure":"reset"}"#.utf8), token: "", headers: admin)
            #expect(await apiError { _ = try await h.client.folders() }?.serverErrorKind == .unavailable)
            _ = try await h.client.folders()

            let bad = try await h.raw("POST", "/admin/faults/fail-next", body: Data(#"{"route":"/api/**","failure":"explode"}"#.utf8),
                                      token: "", headers: admin)
            #expect(bad.status == 400)
            #expect((try RawHTTP.json(bad.body)["message"] as? String)?.hasPrefix("failure:") == true)

            // "Another device" over HTTP: the client's next update is stale.
            let created = try await h.client.createCipher(h.loginCipher())
            h.clock.advance(by: 10)
            let edit = try await h.raw("POST", "/admin/ciphers/\(created.id!)/edit", body: Data(#"{"set":{"favorite":true}}"#.utf8),
                                       token: "", headers: admin)
            #expect(edit.status == 200)
            let stale = await apiError { _ = try await h.client.updateCipher(created, lastKnownRevisionDate: created.revisionDate) }
            #expect(stale?.serverErrorKind == .staleRevision)

            let offline = try await h.raw("POST", "/admin/faults/offline", body: Data(#"{"mode":"close"}"#.utf8), token: "", headers: admin)
            #expect(offline.status == 200)
            #expect(await apiError { _ = try await h.client.sync() }?.serverErrorKind == .unavailable)
            #expect(try await h.raw("GET", "/admin/faults", token: "", headers: admin).status == 200)   // admin is never faulted
            _ = try await h.raw("POST", "/admin/faults/offline", body: Data(#"{"mode":null}"#.utf8), token: "", headers: admin)
            _ = try await h.client.sync()

            let account = try await h.raw("POST", "/admin/accounts",
                                          body: Data(#"{"email":"carol@example.com","password":"pw","iterations":5000}"#.utf8),
                                          token: "", headers: admin)
            #expect(account.status == 200)
            _ = try await BitwardenClient(configuration: Harness.clientConfiguration(h.baseURL)).login(email: "carol@example.com", password: "pw")
        }
    }

    @Test func adminRoutes_scriptARedirect_andReportIt() async throws {
        try await Harness.with(.bitwarden, adminToken: "s3cret") { h in
            let location = "http://127.0.0.1:9/api/sync"
            let body = Data(#"{"route":"GET /api/sync","failure":{"status":307,"location":"\#(location)"}}"#.utf8)
            let scripted = try await h.raw("POST", "/admin/faults/fail-next", body: body, token: "", headers: ["X-Admin-Token": "s3cret"])
            #expect(scripted.status == 200, "\(String(decoding: scripted.body, as: UTF8.self))")
            let failNext = try RawHTTP.json(scripted.body)["failNext"] as? [[String: Any]]
            #expect((failNext?.first?["failure"] as? [String: Any])?["location"] as? String == location)
            #expect(await apiError { _ = try await h.client.sync() }?.status == 307)
        }
    }

    @Test func adminRoutes_areAbsentWithoutAToken() async throws {
        try await Harness.with(.bitwarden) { h in
            let reply = try await h.raw("GET", "/admin/faults", token: "", headers: ["X-Admin-Token": ""])
            #expect(reply.status == 404)
        }
    }

    @Test func routeMatcher_patterns() {
        #expect(RouteMatcher("PUT /api/ciphers/*").matches(method: "PUT", path: "/api/ciphers/abc"))
        #expect(!RouteMatcher("PUT /api/ciphers/*").matches(method: "PUT", path: "/api/ciphers/abc/delete"))
        #expect(!RouteMatcher("PUT /api/ciphers/*").matches(method: "GET", path: "/api/ciphers/abc"))
        #expect(RouteMatcher("/api/**").matches(method: "DELETE", path: "/api/ciphers/abc"))
        #expect(!RouteMatcher("POST /api/ciphers").matches(method: "POST", path: "/api/ciphers/create"))
    }
}
