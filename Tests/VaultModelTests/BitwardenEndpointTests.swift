import Testing
import VaultModel

/// The route list the client, the emulator and fault rules share.
@Suite struct BitwardenEndpointTests {
    /// Every route's path, with ids in place, matches back to that route and those ids: no
    /// route hides another, and an id is never taken for a fixed segment.
    @Test(arguments: BitwardenEndpoint.allCases)
    func path_matchesBackToTheSameRoute(endpoint: BitwardenEndpoint) throws {
        let ids = endpoint.pattern.split(separator: "/").filter { $0 == "*" }.map { _ in "4f1c2d3e-0000-4000-8000-00000000000a" }
        let path = endpoint.path(ids: ids)
        let segments = path.split(separator: "/").map(String.init)
        let found = try #require(BitwardenEndpoint.match(method: endpoint.method.lowercased(), service: endpoint.service, segments: segments))
        #expect(found.0 == endpoint)
        #expect(found.ids == ids)
    }

    @Test func anIdWithSlashesOrAQuery_staysOneSegment() {
        let path = BitwardenEndpoint.softDeleteCipher.path("../a/b?c=1 é")
        #expect(path == "/ciphers/..%2Fa%2Fb%3Fc%3D1%20%C3%A9/delete")
        #expect(path.split(separator: "/").count == 3)
    }

    @Test func descriptionAndRoute_nameTheServiceAndTheIds() {
        #expect(BitwardenEndpoint.softDeleteCipher.description == "PUT /api/ciphers/*/delete")
        #expect(BitwardenEndpoint.token.description == "POST /identity/connect/token")
        #expect(BitwardenEndpoint.getCipher.route("abc") == "GET /api/ciphers/abc")
        #expect(BitwardenEndpoint.sync.route() == "GET /api/sync")
    }

    @Test func unknownRoutes_andTheWrongMethod_matchNothing() {
        #expect(BitwardenEndpoint.match(method: "PATCH", service: .api, segments: ["ciphers", "x"]) == nil)
        #expect(BitwardenEndpoint.match(method: "GET", service: .api, segments: ["ciphers", "x", "attachments"]) == nil)
        #expect(BitwardenEndpoint.match(method: "POST", service: .identity, segments: ["ciphers"]) == nil)
        #expect(BitwardenEndpoint.match(method: "GET", service: .api, segments: ["CIPHERS"])?.0 == .listCiphers)
    }
}
