import BitwardenEmulator
import Foundation
import Testing
import VaultCrypto
import VaultJSON
import VaultModel
import VaultLogTesting

/// `BitwardenEmulator.respond(to:)`: the routes answered in process, without a socket.
@Suite("In-process requests")
struct InProcessTests {
    @Test(arguments: EmulatorFlavor.allCases)
    func prelogin_inProcess_reportsTheAccountKdf(flavor: EmulatorFlavor) throws {
        let emulator = BitwardenEmulator(configuration: EmulatorConfiguration(flavor: flavor))
        try emulator.createAccount(email: "a@example.com", password: "pw", iterations: 5000)
        let response = emulator.respond(to: EmulatorRequest(method: "POST", path: "/identity/accounts/prelogin",
                                                            headers: ["Content-Type": "application/json"],
                                                            body: Array(#"{"email":"a@example.com"}"#.utf8)))
        #expect(response.status == 200)
        #expect(try JSONValue(parsing: response.body).objectValue?["kdfIterations"] == .integer(5000))
    }

    @Test func cipherCreate_withoutAToken_is401() {
        let emulator = BitwardenEmulator()
        let response = emulator.respond(to: EmulatorRequest(method: "POST", path: "/api/ciphers", body: Array("{}".utf8)))
        #expect(response.status == 401)
    }

    /// Every route of the shared list reaches a handler in both flavours: with a valid token
    /// and ids the server has, none answers the server's "no such route" reply.
    @Test(arguments: EmulatorFlavor.allCases)
    func everyEndpoint_isRouted(flavor: EmulatorFlavor) throws {
        let clock = Date(timeIntervalSince1970: 1_767_225_600)
        let emulator = BitwardenEmulator(configuration: EmulatorConfiguration(flavor: flavor, now: { clock }, random: SeededRandomSource(seed: 3)))
        let userKey = try SymmetricCryptoKey(bytes: Array(0..<64))
        try emulator.createAccount(email: "r@example.com", kdf: .pbkdf2(iterations: 5000), masterPasswordHash: "hash",
                                   protectedUserKey: EncString.encrypt(Array("k".utf8), key: userKey, iv: Array(repeating: 1, count: 16)),
                                   userKey: userKey)
        let form = "grant_type=password&username=r@example.com&password=hash&scope=api%20offline_access"
            + "&client_id=cli&deviceType=8&deviceIdentifier=d&deviceName=n"
        let token = emulator.respond(to: EmulatorRequest(method: "POST", path: "/identity/connect/token", body: Array(form.utf8)))
        guard case .string(let access)? = try JSONValue(parsing: token.body).objectValue?["access_token"] else {
            Issue.record("no token: \(token.status)")
            return
        }
        let name = EncString.encrypt(Array("Bank".utf8), key: userKey, iv: Array(repeating: 2, count: 16)).serialized
        func call(_ endpoint: BitwardenEndpoint, _ ids: [String] = [], body: String = "{}") -> EmulatorResponse {
            emulator.respond(to: EmulatorRequest(method: endpoint.method, path: "/\(endpoint.service.rawValue)" + endpoint.path(ids: ids),
                                                 headers: ["Authorization": "Bearer " + access, "Content-Type": "application/json"],
                                                 body: Array(body.utf8)))
        }
        func id(_ response: EmulatorResponse) throws -> String {
            guard case .string(let id)? = try JSONValue(parsing: response.body).objectValue?["id"] else { throw CancellationError() }
            return id
        }
        let noRoute = emulator.respond(to: EmulatorRequest(method: "GET", path: "/api/no-such-route",
                                                           headers: ["Authorization": "Bearer " + access]))
        #expect(noRoute.status == 404)
        for endpoint in BitwardenEndpoint.allCases {
            // Fresh items for each call: an earlier delete must not turn this one into a 404.
            var ids = try endpoint.pattern.contains("folders/*") ? [id(call(.createFolder, body: #"{"name":"\#(name)"}"#))]
                : endpoint.pattern.contains("*") ? [id(call(.createCipher, body: #"{"type":1,"name":"\#(name)","login":{}}"#))] : []
            if endpoint.pattern.hasPrefix("ciphers/*/attachment/*") {
                // An attachment the cipher has, announced first.
                let announced = call(.createAttachment, ids, body: #"{"key":"\#(name)","fileName":"\#(name)","fileSize":3}"#)
                guard case .string(let attachmentId)? = try JSONValue(parsing: announced.body).objectValue?["attachmentId"] else {
                    Issue.record("no attachment for \(endpoint): \(announced.status)")
                    continue
                }
                ids.append(attachmentId)
            }
            let response = call(endpoint, ids)
            #expect(response.status != 404, "\(endpoint) was not routed")
        }
    }
}
