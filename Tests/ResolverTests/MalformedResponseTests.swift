import BitwardenAPI
import BitwardenEmulator
import Foundation
@_spi(Tools) import OfflineSync
import Testing
import VaultModel

/// Replies a broken server or a mangling proxy sends, over real loopback HTTP: the server
/// applies the request, then answers with these bytes. The resolver must report a failure that
/// names the route, keep the edit pending and unchanged, and finish once the server answers
/// properly, with no duplicate on the server.
@Suite(.serialized) struct MalformedResponseTests {
    typealias H = ResolverHarness

    static let replies: [(String, Int, String)] = [
        ("not JSON", 200, "<html><body>502 Bad Gateway</body></html>"),
        ("truncated JSON", 200, #"{"id":"abc","revisionDate":"2026-01-0"#),
        ("empty body", 200, ""),
        ("wrong shape", 200, #"[1, 2, 3]"#),
        ("wrong field types", 200, #"{"id": 42, "type": "login", "revisionDate": false}"#),
        ("a bad date", 200, #"{"object":"cipherDetails","id":"x","type":1,"revisionDate":"yesterday"}"#),
        ("deeply nested", 200, String(repeating: "[", count: 100_000)),
        ("error status with HTML", 500, "<h1>Internal Server Error</h1>"),
        ("4xx without an error body", 400, "nope"),
    ]

    @Test(arguments: replies.indices)
    func malformedReplyToTheUpdate_keepsTheEditPending_thenResolves(index: Int) async throws {
        let (name, status, body) = Self.replies[index]
        let h = try await H.make()
        defer { Task { await h.stop() } }
        let view = try await h.seedSynced("Bank")
        try await h.editOffline(view, password: "mine")
        let localBefore = try h.local(view.id!)
        h.emulator.faults.failNext(1, matching: RouteMatcher(method: "PUT", path: "/api/ciphers/*"),
                                   with: .applyThenReply(status: status, body: body))

        let first = try await h.resolver().processPendingChanges(userId: h.userId)
        #expect(first.items.map(\.outcome) == [.failed], "\(name): \(first.items)")
        let error = first.items.first?.error ?? ""
        #expect(error.contains("api/ciphers"), "\(name): the error names the route: \(error)")
        #expect(try h.pending(view.id!) != nil, "\(name): still pending")
        #expect(try h.local(view.id!) == localBefore, "\(name): local copy unchanged")

        h.clock.advance(by: 3600)
        let second = try await h.resolver().processPendingChanges(userId: h.userId)
        #expect(second.remainingCount == 0, "\(name): \(second.items)")
        #expect(try h.pendingCount() == 0)
        // The server applied the first PUT; the retry must not make a second copy of it.
        let items = try h.serverItems(named: "Bank")
        #expect(items.filter { $0.login?.password == "mine" }.count == 1, "\(name): \(items.map { $0.login?.password ?? "-" })")
    }

    @Test func malformedSyncReply_abortsTheSync_andChangesNothingLocal() async throws {
        let h = try await H.make()
        defer { Task { await h.stop() } }
        let view = try await h.seedSynced("Bank")
        let before = try h.store.localCiphers(userId: h.userId)
        h.emulator.faults.failNext(1, matching: RouteMatcher(method: "GET", path: "/api/sync"),
                                   with: .applyThenReply(status: 200, body: #"{"ciphers": "#))
        await #expect(throws: (any Error).self) { try await h.syncService().fetchSync(userId: h.userId) }
        #expect(try h.store.localCiphers(userId: h.userId) == before)
        #expect(try h.local(view.id!) != nil)
    }

    /// The denylist over real HTTP: a 4xx other than 404/408/429 is the server (or a proxy in
    /// front of it) refusing the request, with or without an error body, so an online edit is
    /// rethrown and never saved offline; 408 and 429 mean "try later" and save it offline.
    @Test(arguments: [(403, "<html><body>403 Forbidden</body></html>", true), (413, "", true),
                      (408, "", false), (429, "<html>slow down</html>", false)])
    func bodylessClientError_isARejection_exceptTimeoutAndTooMany(status: Int, body: String, rejected: Bool) async throws {
        let h = try await H.make()
        defer { Task { await h.stop() } }
        var view = try await h.seedSynced("Bank")
        view.login?.password = "mine"
        // The fault answers without applying the PUT: a proxy in front of the server.
        h.emulator.faults.failNext(1, matching: RouteMatcher(method: "PUT", path: "/api/ciphers/*"),
                                   with: .reply(status: status, body: body))
        let outcome: Result<SaveResult, any Error>
        do { outcome = .success(try await h.repository().updateCipher(view)) } catch { outcome = .failure(error) }
        switch outcome {
        case .failure(let error):
            #expect(rejected, "HTTP \(status) should save offline, threw \(error)")
            #expect(error.serverErrorKind == ServerErrorKind.rejected)
            #expect(try h.pending(view.id!) == nil, "a rejected edit is not saved offline")
        case .success(let result):
            #expect(!rejected, "HTTP \(status) should be rethrown, got \(result)")
            #expect(result.isOffline)
            #expect(try h.pending(view.id!) != nil)
        }
    }
}
