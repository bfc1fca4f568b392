// Fuzzes the emulator's request decoding in process (no socket): prelogin JSON, the token
// endpoint's form encoding, cipher create/update bodies and their validation, folder bodies,
// and the router itself, in both flavours. The first byte picks flavour and route; the rest
// is the body (for the router: a "METHOD /path" line, then the body). Any request must get a
// response, never a trap.
import BitwardenEmulator
import CFuzzerDriver
import Foundation
import VaultCrypto
import VaultJSON
import VaultModel
import VaultLogTesting

/// One emulator with a signed-in account, a cipher and a folder to update.
final class Fixture {
    let emulator: BitwardenEmulator
    let bearer: String
    let cipherId: String
    let folderId: String
    let userId: String
    var requests = 0

    static let email = "fuzz@example.com"
    static let passwordHash = "fuzz-master-password-hash"

    init(flavor: EmulatorFlavor) {
        let clock = Date(timeIntervalSince1970: 1_767_225_600)   // 2026-01-01, frozen: tokens never expire
        let emulator = BitwardenEmulator(configuration: EmulatorConfiguration(
            flavor: flavor, now: { clock }, random: SeededRandomSource(seed: 1)))
        let userKey = try! SymmetricCryptoKey(bytes: Array(0..<64))
        let account = try! emulator.createAccount(
            email: Self.email, kdf: .pbkdf2(iterations: 5000), masterPasswordHash: Self.passwordHash,
            protectedUserKey: EncString.encrypt(Array("protected".utf8), key: userKey, iv: Array(repeating: 1, count: 16)), userKey: userKey)
        let form = "grant_type=password&username=\(Self.email)&password=\(Self.passwordHash)&scope=api%20offline_access"
            + "&client_id=cli&deviceType=8&deviceIdentifier=fuzz-device&deviceName=fuzz"
        let token = emulator.respond(to: EmulatorRequest(method: "POST", path: "/identity/connect/token", body: Array(form.utf8)))
        guard token.status == 200, case .string(let access)? = (try? JSONValue(parsing: token.body))?.objectValue?["access_token"] else {
            fatalError("fuzz fixture: no access token (\(token.status) \(String(decoding: token.body, as: UTF8.self)))")
        }
        let bearer = "Bearer " + access
        let name = EncString.encrypt(Array("Bank".utf8), key: userKey, iv: Array(repeating: 2, count: 16)).serialized
        func create(_ path: String, _ body: String) -> String {
            let response = emulator.respond(to: EmulatorRequest(method: "POST", path: path,
                                                               headers: ["Authorization": bearer], body: Array(body.utf8)))
            guard response.status == 200, case .string(let id)? = (try? JSONValue(parsing: response.body))?.objectValue?["id"] else {
                fatalError("fuzz fixture: \(path) answered \(response.status) \(String(decoding: response.body, as: UTF8.self))")
            }
            return id
        }
        cipherId = create("/api/ciphers", #"{"type":1,"name":"\#(name)","login":{"password":"\#(name)"}}"#)
        folderId = create("/api/folders", #"{"name":"\#(name)"}"#)
        self.emulator = emulator
        self.bearer = bearer
        userId = account.userId
    }

    /// Whether fuzzed requests have grown the state (new items, refresh tokens) enough to start over.
    var isStale: Bool {
        requests >= 1000 || emulator.rawCiphers(userId: userId).count > 1 || emulator.folders(userId: userId).count > 1
    }
}

nonisolated(unsafe) var fixtures: [EmulatorFlavor: Fixture] = [:]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let selector = data[0]
    var body = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let flavor: EmulatorFlavor = selector & 0x80 == 0 ? .bitwarden : .vaultwarden
    if fixtures[flavor]?.isStale ?? true { fixtures[flavor] = Fixture(flavor: flavor) }
    let fixture = fixtures[flavor]!
    fixture.requests += 1
    let auth = ["Authorization": fixture.bearer]
    let request: EmulatorRequest
    switch (selector & 0x7F) % 8 {
    case 0: request = EmulatorRequest(method: "POST", path: "/identity/accounts/prelogin", body: body)
    case 1: request = EmulatorRequest(method: "POST", path: "/identity/connect/token",
                                      headers: ["Content-Type": "application/x-www-form-urlencoded"], body: body)
    case 2: request = EmulatorRequest(method: "POST", path: "/api/ciphers", headers: auth, body: body)
    case 3: request = EmulatorRequest(method: "POST", path: "/api/ciphers/create", headers: auth, body: body)
    case 4: request = EmulatorRequest(method: "PUT", path: "/api/ciphers/\(fixture.cipherId)", headers: auth, body: body)
    case 5: request = EmulatorRequest(method: "POST", path: "/api/folders", headers: auth, body: body)
    case 6: request = EmulatorRequest(method: "PUT", path: "/api/folders/\(fixture.folderId)", headers: auth, body: body)
    default:
        // The router: "METHOD /path" on the first line, the body after it.
        let newline = body.firstIndex(of: UInt8(ascii: "\n")) ?? body.endIndex
        let line = String(decoding: body[..<newline], as: UTF8.self).split(separator: " ", maxSplits: 1).map(String.init)
        body = newline < body.endIndex ? Array(body[(newline + 1)...]) : []
        let path = (line.count > 1 ? line[1] : "/").replacingOccurrences(of: "{cipher}", with: fixture.cipherId)
            .replacingOccurrences(of: "{folder}", with: fixture.folderId)
        request = EmulatorRequest(method: line.first ?? "GET", path: path, headers: auth, body: body)
    }
    let response = fixture.emulator.respond(to: request)
    guard (100...599).contains(response.status) else { fatalError("status \(response.status)") }
    if !response.body.isEmpty, (try? JSONValue(parsing: response.body)) == nil {
        fatalError("the emulator answered a body that is not JSON: \(String(decoding: response.body, as: UTF8.self))")
    }
    return 0
}

exit(vaultlog_fuzz_main(CommandLine.argc, CommandLine.unsafeArgv))
