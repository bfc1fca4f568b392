import BitwardenEmulator
import Foundation
import Testing
import VaultModel

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
}
