import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultModel

/// The server's logic without HTTP: routes a request against the in-memory state. The
/// Hummingbird layer (``BitwardenEmulator``) adds sockets, faults and admin routes.
final class EmulatorCore: Sendable {
    let configuration: EmulatorConfiguration
    let state: Mutex<EmulatorState>

    var flavor: EmulatorFlavor { configuration.flavor }
    var logger: Logger { configuration.logger }

    init(configuration: EmulatorConfiguration, state: EmulatorState? = nil) {
        self.configuration = configuration
        self.state = Mutex(state ?? EmulatorState(signingKey: Base64.encode(configuration.random.bytes(32))))
    }

    // MARK: Ids and time

    func newID() -> String { configuration.makeID?() ?? configuration.random.uuidString() }

    func nowTicks() -> Int64 { flavor.ticks(configuration.now()) }

    /// A new revision date: now, but strictly after `previous` even if the injected clock is frozen.
    func bumped(after previous: Int64?) -> Int64 {
        let now = nowTicks()
        guard let previous, now <= previous else { return now }
        return previous + flavor.tickUnit
    }

    // MARK: Routing

    /// Strips the self-hosted prefixes and dispatches.
    func handle(_ request: EmulatorRequest) -> EmulatorResponse {
        let segments = request.path.split(separator: "/").map(String.init)
        guard let area = segments.first else { return alive() }
        let rest = Array(segments.dropFirst())
        let method = request.method.uppercased()
        switch area {
        case "identity":
            let route = RoutePath(method: method, segments: rest)
            if route.matches("POST", "accounts/prelogin") || route.matches("POST", "accounts/prelogin/password") {
                return prelogin(request)
            }
            if route.matches("POST", "connect/token") { return token(request) }
            return ErrorBodies.noRoute(flavor, path: request.path)
        case "api":
            if method == "POST", rest == ["accounts", "prelogin"] { return prelogin(request) }
            if rest == ["alive"] || rest == ["now"] { return alive() }
            let userId: String
            switch authenticate(request) {
            case .success(let id): userId = id
            case .failure(let response): return response
            }
            return api(method: method, rest, request: request, userId: userId)
        case "alive":
            return alive()
        default:
            return ErrorBodies.noRoute(flavor, path: request.path)
        }
    }

    func api(method: String, _ rest: [String], request: EmulatorRequest, userId: String) -> EmulatorResponse {
        let r = RoutePath(method: method, segments: rest)
        if r.matches("GET", "sync") { return sync(userId: userId, excludeDomains: request.query["excludeDomains"] == "true") }
        if r.matches("GET", "accounts/revision-date") { return revisionDate(userId: userId) }
        if r.matches("GET", "accounts/profile") { return .json(200, withLock { profile($0.accounts[userId]!) }) }
        if r.matches("GET", "folders") { return listFolders(userId: userId) }
        if r.matches("POST", "folders") { return createFolder(request, userId: userId) }
        if let p = r.match("GET", "folders/:") { return getFolder(p[0], userId: userId) }
        if let p = r.match("PUT", "folders/:") ?? r.match("POST", "folders/:") { return updateFolder(p[0], request, userId: userId) }
        if let p = r.match("DELETE", "folders/:") { return deleteFolder(p[0], userId: userId) }
        if r.matches("GET", "ciphers") { return listCiphers(userId: userId) }
        if r.matches("POST", "ciphers") { return createCipher(request, userId: userId, wrapped: false) }
        if r.matches("POST", "ciphers/create") { return createCipher(request, userId: userId, wrapped: true) }
        if let p = r.match("GET", "ciphers/:") { return getCipher(p[0], userId: userId, details: false) }
        if let p = r.match("GET", "ciphers/:/details") ?? r.match("GET", "ciphers/:/full-details") {
            return getCipher(p[0], userId: userId, details: true)
        }
        if let p = r.match("PUT", "ciphers/:") ?? r.match("POST", "ciphers/:") { return updateCipher(p[0], request, userId: userId) }
        if let p = r.match("PUT", "ciphers/:/delete") { return softDelete(p[0], userId: userId) }
        // `POST ciphers/{id}/delete` is an obsolete alias of the permanent delete on both servers.
        if let p = r.match("DELETE", "ciphers/:") ?? r.match("POST", "ciphers/:/delete") { return permanentDelete(p[0], userId: userId) }
        if let p = r.match("PUT", "ciphers/:/restore") { return restore(p[0], userId: userId) }
        return ErrorBodies.noRoute(flavor, path: request.path)
    }

    func alive() -> EmulatorResponse {
        .json(200, .string(flavor.dateText(nowTicks())))
    }

    func withLock<T>(_ body: (inout EmulatorState) -> T) -> T {
        state.withLock { body(&$0) }
    }

}
