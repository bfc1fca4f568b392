@testable import BitwardenAPI
import BitwardenAPINIO
import BitwardenEmulator
import Foundation
@_spi(Tools) import OfflineSync
import Testing
import VaultModel

/// The client's contract with its transport, held by both transports over real loopback HTTP:
/// the same replies, the same classification, and the same answer to "may the request have
/// reached the server?", which decides whether a failed create is retried or looked up.
@Suite("HTTP transports")
struct TransportTests {
    @Test(arguments: TransportKind.allCases)
    func everyRoute_roundTrips_andErrorRepliesAreClassified(transport: TransportKind) async throws {
        try await Harness.with(.bitwarden, transport: transport) { h in
            let created = try await h.client.createCipher(h.loginCipher(name: "Round trip"))
            let id = try #require(created.id)
            #expect(try h.decryptName(try await h.client.getCipher(id: id)) == "Round trip")
            h.clock.advance(by: 5)   // beyond the server's one-second tolerance for revision dates
            var edited = created
            edited.favorite = true
            let updated = try await h.client.updateCipher(edited, lastKnownRevisionDate: created.revisionDate)
            #expect(updated.favorite == true)
            // A stale revision date is a 400 "out of date": a conflict, not an outage.
            let stale = await apiError { _ = try await h.client.updateCipher(edited, lastKnownRevisionDate: created.revisionDate) }
            #expect(stale?.serverErrorKind == .staleRevision)
            #expect(stale?.status == 400)
            try await h.client.softDeleteCipher(id: id)
            #expect(try await h.client.restoreCipher(id: id).deletedDate == nil)
            try await h.client.deleteCipher(id: id)
            let gone = await apiError { _ = try await h.client.getCipher(id: id) }
            #expect(gone?.serverErrorKind == .notFound)
            #expect(try await h.client.sync().ciphers.isEmpty)
            _ = try await h.client.revisionDate()
        }
    }

    @Test(arguments: TransportKind.allCases)
    func anExpiredToken_isRefreshedOnce_andTheRequestRetried(transport: TransportKind) async throws {
        try await Harness.with(.bitwarden, transport: transport) { h in
            let before = try #require(h.client.tokens)
            h.clock.advance(by: 3601)   // the server now refuses the access token; the client's clock does not know
            _ = try await h.client.sync()
            let after = try #require(h.client.tokens)
            #expect(after.accessToken != before.accessToken)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aRefusedConnection_certainlyNeverArrived(transport: TransportKind) async throws {
        try await Harness.with(.bitwarden, transport: transport) { h in
            h.client.setBaseURL(URL(string: "http://127.0.0.1:9")!)   // discard port: nothing listens
            let started = ContinuousClock.now
            let error = await apiError { _ = try await h.client.createCipher(h.loginCipher()) }
            #expect(error?.serverErrorKind == .unavailable)
            #expect(error?.status == nil)
            #expect(error?.requestMayHaveArrived == false, "\(String(describing: error))")
            // Offline is noticed at once, not after a connect timeout.
            #expect(ContinuousClock.now - started < .seconds(5))
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aLostReply_mayHaveArrived_andIsNotRetried(transport: TransportKind) async throws {
        try await Harness.with(.bitwarden, transport: transport) { h in
            _ = try await h.client.sync()   // a keep-alive connection, where a silent retry would happen
            h.emulator.faults.dropResponseAfterApplying(matching: RouteMatcher("POST /api/ciphers"))
            let error = await apiError { _ = try await h.client.createCipher(h.loginCipher(name: "Lost reply")) }
            #expect(error?.serverErrorKind == .unavailable)
            #expect(error?.requestMayHaveArrived == true)
            #expect(h.emulator.ciphers(userId: h.account.userId).count == 1)   // applied once
            for failure in [InjectedFailure.resetConnection, .closeConnection] {
                h.emulator.faults.failNext(matching: RouteMatcher("GET /api/sync"), with: failure)
                let dropped = await apiError { _ = try await h.client.sync() }
                #expect(dropped?.serverErrorKind == .unavailable, "\(failure)")
                #expect(dropped?.requestMayHaveArrived == true, "\(failure)")
            }
            _ = try await h.client.sync()
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aReplySlowerThanTheTimeout_mayHaveArrived(transport: TransportKind) async throws {
        try await Harness.with(.bitwarden, timeout: 1, transport: transport) { h in
            h.emulator.faults.setLatency(2.5)
            let started = ContinuousClock.now
            let error = await apiError { _ = try await h.client.folders() }
            #expect(error?.serverErrorKind == .unavailable)
            #expect(error?.requestMayHaveArrived == true)
            #expect(ContinuousClock.now - started < .milliseconds(2400))
            h.emulator.faults.clear()
        }
    }

    @Test(arguments: TransportKind.allCases)
    func cancellingTheTask_stopsTheRequest(transport: TransportKind) async throws {
        try await Harness.with(.bitwarden, transport: transport) { h in
            h.emulator.faults.setLatency(3)
            let started = ContinuousClock.now
            let request = Task { try await h.client.folders() }
            try await Task.sleep(for: .milliseconds(200))
            request.cancel()
            await #expect(throws: (any Error).self) { _ = try await request.value }
            #expect(ContinuousClock.now - started < .milliseconds(2500))
            h.emulator.faults.clear()
        }
    }

    /// A redirect is a reply, not an instruction: following it would carry the request and its
    /// bearer token to whatever host the `Location` names (here another server, which would
    /// answer 200).
    @Test(arguments: TransportKind.allCases, [302, 307])
    func aRedirect_isNotFollowed_andFailsWithItsStatus(transport: TransportKind, status: Int) async throws {
        let elsewhere = BitwardenEmulator()
        let target = try await elsewhere.start()
        do {
            try await Harness.with(.bitwarden, transport: transport) { h in
                h.emulator.faults.failNext(matching: RouteMatcher("GET /api/sync"),
                                           with: .redirect(status: status, location: target.absoluteString + "/alive"))
                let error = await apiError { _ = try await h.client.sync() }
                #expect(error?.status == status, "\(String(describing: error))")
                #expect(error?.serverErrorKind == .unavailable)
                #expect(elsewhere.recentRequests.isEmpty, "the redirect was followed: \(elsewhere.recentRequests)")
            }
        } catch {
            await elsewhere.stop()
            throw error
        }
        await elsewhere.stop()
    }

    /// A reply body over the limit fails the request, naming the limit, instead of reaching the
    /// client (the real limit is 256 MiB; this transport is given 1 KiB).
    @Test func aReplyBodyOverTheLimit_failsNamingTheLimit() async throws {
        try await Harness.with(.bitwarden) { h in
            var configuration = Harness.clientConfiguration(h.baseURL)
            configuration.transport = URLSessionTransport(timeout: 10, maximumConnectionsPerHost: 16, maximumBodyBytes: 1024)
            let limited = BitwardenClient(configuration: configuration)
            limited.setTokens(h.client.tokens)
            h.emulator.faults.failNext(matching: RouteMatcher("GET /api/folders"),
                                       with: .reply(status: 200, body: String(repeating: "x", count: 4096)))
            let error = await apiError { _ = try await limited.folders() }
            #expect(error?.message.contains("larger than 1024 bytes") == true, "\(String(describing: error))")
            #expect(error?.requestMayHaveArrived == true)
            _ = try await limited.folders()   // a reply under the limit still arrives
        }
    }

    @Test func serverErrorReplies_reachTheClientWithTheirBodies() async throws {
        try await Harness.with(.vaultwarden, transport: .asyncHTTPClient) { h in
            h.emulator.faults.failNext(matching: RouteMatcher("GET /api/ciphers/*"),
                                       with: .reply(status: 400, body: #"{"message":"Cipher doesn't exist"}"#))
            let error = await apiError { _ = try await h.client.getCipher(id: UUID().uuidString.lowercased()) }
            #expect(error?.serverErrorKind == .notFound)
            #expect(error?.status == 400)
        }
    }
}
