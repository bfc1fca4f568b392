import BitwardenAPI
import BitwardenAPINIO
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

/// One emulator on loopback with a manual clock and a seeded generator, one account, and a
/// logged-in client. Tests use 5,000 PBKDF2 iterations (the minimum) to stay fast.
struct Harness {
    static let start = Date(timeIntervalSince1970: 1_767_225_600)   // 2026-01-01T00:00:00Z
    static let email = "alice@example.com"
    static let password = "correct horse battery staple"

    let clock: ManualClock
    let emulator: BitwardenEmulator
    let baseURL: URL
    let account: EmulatorAccount
    let client: BitwardenClient
    let login: LoginResult
    let random: SeededRandomSource

    var flavor: EmulatorFlavor { emulator.configuration.flavor }

    /// Runs `body` against a fresh harness and always stops the emulator.
    static func with<T>(
        _ flavor: EmulatorFlavor = .bitwarden, seed: UInt64 = 7, adminToken: String? = nil, timeout: TimeInterval = 10,
        transport: TransportKind = .urlSession, configure: (inout EmulatorConfiguration) -> Void = { _ in },
        _ body: (Harness) async throws -> T
    ) async throws -> T {
        let clock = ManualClock(start)
        var configuration = EmulatorConfiguration(
            flavor: flavor, now: { clock.now }, random: SeededRandomSource(seed: seed), adminToken: adminToken)
        configure(&configuration)
        let emulator = BitwardenEmulator(configuration: configuration)
        let account = try emulator.createAccount(email: email, password: password, iterations: 5000)
        let baseURL = try await emulator.start()
        do {
            let client = BitwardenClient(configuration: clientConfiguration(baseURL, timeout: timeout, transport: transport))
            let login = try await client.login(email: email, password: password)
            let harness = Harness(clock: clock, emulator: emulator, baseURL: baseURL, account: account, client: client,
                                  login: login, random: SeededRandomSource(seed: seed &+ 1000))
            let result = try await body(harness)
            await emulator.stop()
            return result
        } catch {
            await emulator.stop()
            throw error
        }
    }

    static func clientConfiguration(_ base: URL, timeout: TimeInterval = 10,
                                    transport: TransportKind = .urlSession) -> BitwardenClientConfiguration {
        var configuration = BitwardenClientConfiguration.selfHosted(base)
        configuration.timeout = timeout
        configuration.transport = transport.make(timeout: timeout)
        configuration.deviceIdentifier = "6f1c1e7e-1b8a-4d8e-9a55-0d7a2f1f0c11"
        configuration.logger.logLevel = .error   // refused refreshes are expected here
        return configuration
    }

    /// A login item encrypted with the account's user key.
    func loginCipher(name: String = "Example", username: String = "alice", password: String = "hunter2") -> Cipher {
        let key = account.userKey
        return Cipher(
            type: .login, name: EncString.encrypt(name, key: key, random: random),
            login: CipherLogin(username: EncString.encrypt(username, key: key, random: random),
                               password: EncString.encrypt(password, key: key, random: random)))
    }

    func decryptName(_ cipher: Cipher) throws -> String {
        try #require(cipher.name).decryptString(key: account.userKey)
    }

    /// A raw HTTP request to the emulator (for shapes the typed client does not expose).
    func raw(_ method: String, _ path: String, body: Data? = nil, token: String? = nil, contentType: String = "application/json",
             headers: [String: String] = [:]) async throws -> (status: Int, body: Data) {
        try await RawHTTP.send(method, URL(string: baseURL.absoluteString + path)!, body: body,
                               token: token ?? client.tokens?.accessToken, contentType: contentType, headers: headers)
    }
}

/// The client's two transports; tests that concern the wire run with both.
enum TransportKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case urlSession, asyncHTTPClient

    func make(timeout: TimeInterval) -> any HTTPTransport {
        switch self {
        case .urlSession: URLSessionTransport(timeout: timeout)
        case .asyncHTTPClient: AsyncHTTPClientTransport(timeout: timeout)
        }
    }

    var testDescription: String { rawValue }
}

enum RawHTTP {
    static func send(_ method: String, _ url: URL, body: Data? = nil, token: String? = nil,
                     contentType: String = "application/json", headers: [String: String] = [:]) async throws -> (status: Int, body: Data) {
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.httpBody = body
        if body != nil { request.setValue(contentType, forHTTPHeaderField: "Content-Type") }
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as! HTTPURLResponse).statusCode, data)
    }

    static func json(_ data: Data) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }
}

/// Runs `body` and returns the `BitwardenAPIError` it throws (failing the test if it does not).
func apiError(_ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) async -> BitwardenAPIError? {
    do {
        try await body()
        Issue.record("expected a BitwardenAPIError, the call succeeded", sourceLocation: sourceLocation)
        return nil
    } catch let error as BitwardenAPIError {
        return error
    } catch {
        Issue.record("expected a BitwardenAPIError, got \(type(of: error)): \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
