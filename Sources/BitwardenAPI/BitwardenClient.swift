import Foundation
import Logging
@_spi(Tools) import OfflineSync
import Synchronization
import VaultCrypto
import VaultModel

/// The Bitwarden API over HTTP: login, sync, ciphers and folders. It implements the
/// `CipherServer` port, and classifies every failure as a
/// ``BitwardenAPIError`` (see its table) so the repository knows what is "offline".
///
/// Safe to share: any number of requests may run at once. A 401 triggers one token refresh
/// (shared by all requests that saw it) and one retry; a refused refresh is
/// `ServerErrorKind/loginRequired`.
///
/// ```swift
/// let client = BitwardenClient(configuration: .selfHosted(URL(string: "http://127.0.0.1:8080")!))
/// let login = try await client.login(email: "a@example.com", password: "correct horse")
/// let snapshot = try await client.sync()
/// let first = try snapshot.ciphers.first?.decrypt(userKey: login.userKey)
/// ```
public final class BitwardenClient: CipherServer, Sendable {
    struct State {
        var configuration: BitwardenClientConfiguration
        var tokens: TokenSet?
        var refresh: (generation: Int, task: Task<TokenSet, any Error>)?
        var generation = 0
        var tokenObserver: (@Sendable (TokenSet?) -> Void)?
    }

    let state: Mutex<State>
    let transport: any HTTPTransport
    let logger: Logger

    /// Creates a client; nothing is sent until the first call. Requests go through
    /// `configuration.transport`, or a ``URLSessionTransport`` with the configuration's timeout
    /// and connection limit when it is nil.
    public init(configuration: BitwardenClientConfiguration) {
        transport = configuration.transport ?? URLSessionTransport(
            timeout: configuration.timeout, maximumConnectionsPerHost: configuration.maximumConnectionsPerHost)
        logger = configuration.logger
        state = Mutex(State(configuration: configuration))
    }

    // MARK: Configuration and session

    /// The current endpoints.
    public var endpoints: BitwardenEndpoints { state.withLock { $0.configuration.endpoints } }

    /// Points the client at other URLs; requests already running finish against the old ones.
    /// (The demo points it at a closed port to go "offline".)
    public func setEndpoints(_ endpoints: BitwardenEndpoints) {
        state.withLock { $0.configuration.endpoints = endpoints }
        logger.debug("bitwarden-api: endpoints changed", metadata: ["endpoints": "\(endpoints)"])
    }

    /// Points the client at a self-hosted server at `base` (`BASE/api`, `BASE/identity`).
    public func setBaseURL(_ base: URL) { setEndpoints(.selfHosted(base)) }

    /// The session's tokens, to persist; nil before login.
    public var tokens: TokenSet? { state.withLock { $0.tokens } }

    /// Restores a saved session (or forgets it, with nil). The token observer is not called:
    /// the tokens came from where it saves them.
    public func setTokens(_ tokens: TokenSet?) { state.withLock { $0.tokens = tokens } }

    /// Calls `observer` whenever the session's tokens change by the client's own doing: after
    /// a login, after every refresh, with nil when a refresh is refused or at ``logout()``. An
    /// app saves them (in the keychain) so that a relaunch restores the session with
    /// ``setTokens(_:)`` instead of asking for the master password online. The observer runs on
    /// the task that changed the tokens: keep it short (hand the work to a task of its own).
    /// One observer; a new one replaces the previous.
    public func observeTokens(_ observer: (@Sendable (TokenSet?) -> Void)?) {
        state.withLock { $0.tokenObserver = observer }
    }

    /// Sets the session's tokens and tells the observer.
    func changeTokens(_ tokens: TokenSet?) {
        let observer = state.withLock { state -> (@Sendable (TokenSet?) -> Void)? in
            state.tokens = tokens
            return state.tokenObserver
        }
        observer?(tokens)
    }

    // MARK: Login

    /// Logs in with the master password: prelogin (KDF settings) → master key → master-password
    /// hash → `POST identity/connect/token` → decrypts the returned protected user key.
    ///
    /// - Throws: ``BitwardenAPIError``: `.rejected` for a wrong password (the server's message),
    ///   `.unavailable` if the server cannot be reached.
    public func login(email: String, password: String) async throws -> LoginResult {
        let configuration = state.withLock { $0.configuration }
        let preloginBody = try JSONSerialization.data(withJSONObject: ["email": email])
        let preloginData = try await send(.prelogin, body: preloginBody)
        let preloginRoute = BitwardenEndpoint.prelogin.route()
        guard let prelogin = LooseJSON(preloginData) else { throw malformed(preloginRoute, "the prelogin reply is not a JSON object") }
        func field(_ name: String) throws -> Int? {
            guard prelogin.has(name) else { return nil }
            guard let value = prelogin.int(name) else {
                throw malformed(preloginRoute, "'\(name)' in the prelogin reply is not a whole number that fits in 64 bits")
            }
            return value
        }
        guard let kdfType = try field("kdf"), let iterations = try field("kdfIterations") else {
            throw malformed(preloginRoute, "the prelogin reply has no kdf/kdfIterations")
        }
        let kdf: KdfConfig
        do {
            kdf = try KdfConfig(kdfType: kdfType, iterations: iterations, memoryMiB: try field("kdfMemory"),
                                parallelism: try field("kdfParallelism"))
        } catch let error as VaultCryptoError {
            throw malformed(preloginRoute, "the server asks for KDF settings VaultLog refuses: \(error)")
        }
        // Newer servers may name the master-password salt; it is the email for every account today.
        let salt = prelogin.string("salt").flatMap { $0.isEmpty ? nil : $0 }
        let masterKey: MasterKey
        do {
            masterKey = try MasterKey.derive(password: password, salt: MasterKey.salt(email: email, preloginSalt: salt), kdf: kdf)
        } catch {
            throw BitwardenAPIError(kind: .rejected, status: nil, message: "cannot derive the master key: \(error)",
                                    route: "login")
        }
        let form = [
            ("grant_type", "password"), ("username", email), ("password", masterKey.passwordHash(password: password)),
            ("scope", "api offline_access"), ("client_id", configuration.clientId),
            ("deviceType", String(configuration.deviceType)), ("deviceIdentifier", configuration.deviceIdentifier),
            ("deviceName", configuration.deviceName),
        ]
        let route = BitwardenEndpoint.token.route()
        let data = try await send(.token, body: Self.formEncode(form),
                                  contentType: "application/x-www-form-urlencoded; charset=utf-8")
        guard let reply = LooseJSON(data), let tokens = tokenSet(reply), let keyText = reply.string("Key"),
              let protectedKey = try? EncString(keyText) else {
            throw malformed(route, "the token reply lacks access_token, refresh_token or Key")
        }
        let userKey: SymmetricCryptoKey
        do {
            userKey = try masterKey.decryptUserKey(protectedKey)
        } catch {
            throw BitwardenAPIError(kind: .rejected, status: 200, message:
                "the server's protected user key does not decrypt with this password (\(error)); the account data may be corrupt",
                route: route)
        }
        guard let userId = Self.subject(ofJWT: tokens.accessToken) else {
            throw malformed(route, "the access token is not a JWT with a 'sub' claim")
        }
        changeTokens(tokens)
        logger.debug("bitwarden-api: logged in", metadata: ["user": "\(userId)"])
        if let warning = kdf.weaknessWarning {
            logger.notice("bitwarden-api: weak key derivation: \(warning)", metadata: ["user": "\(userId)"])
        }
        return LoginResult(userId: userId, email: email, userKey: userKey, kdf: kdf, salt: salt, protectedUserKey: protectedKey,
                           privateKey: reply.string("PrivateKey").flatMap { try? EncString($0) }, tokens: tokens)
    }

    /// Drops the session's tokens (local only).
    public func logout() {
        changeTokens(nil)
    }

    // MARK: CipherServer

    /// `GET /api/ciphers/{id}`.
    public func getCipher(id: String) async throws -> Cipher {
        try decode(Cipher.self, try await send(.getCipher, id), route: BitwardenEndpoint.getCipher.route(id))
    }

    /// `POST /api/ciphers`. The server ignores any client id and returns the item with its own.
    public func createCipher(_ cipher: Cipher) async throws -> Cipher {
        let route = BitwardenEndpoint.createCipher.route()
        let body = try requestBody(cipher, lastKnownRevisionDate: nil, route: route)
        return try decode(Cipher.self, try await send(.createCipher, body: body), route: route)
    }

    /// `PUT /api/ciphers/{id}` with `lastKnownRevisionDate`; a stale date fails with
    /// `ServerErrorKind/staleRevision`. Returns the item with its new `revisionDate`.
    public func updateCipher(_ cipher: Cipher, lastKnownRevisionDate: BitwardenDate?) async throws -> Cipher {
        guard let id = cipher.id else {
            throw BitwardenAPIError(kind: .rejected, status: nil, message: "the cipher has no server id; create it first",
                                    route: BitwardenEndpoint.updateCipher.description)
        }
        let route = BitwardenEndpoint.updateCipher.route(id)
        let body = try requestBody(cipher, lastKnownRevisionDate: lastKnownRevisionDate, route: route)
        return try decode(Cipher.self, try await send(.updateCipher, id, body: body), route: route)
    }

    /// `PUT /api/ciphers/{id}/delete`: moves the item to the trash.
    public func softDeleteCipher(id: String) async throws {
        _ = try await send(.softDeleteCipher, id)
    }

    /// `DELETE /api/ciphers/{id}`: deletes the item for good.
    public func deleteCipher(id: String) async throws {
        _ = try await send(.deleteCipher, id)
    }

    /// `PUT /api/ciphers/{id}/restore`: takes the item out of the trash and returns it with its
    /// new `revisionDate` (an item not in the trash comes back unchanged).
    public func restoreCipher(id: String) async throws -> Cipher {
        try decode(Cipher.self, try await send(.restoreCipher, id), route: BitwardenEndpoint.restoreCipher.route(id))
    }

    /// `GET /api/sync?excludeDomains=true`, reduced to what the local store needs.
    public func sync() async throws -> SyncSnapshot {
        let full = try await fullSync()
        return SyncSnapshot(ciphers: full.ciphers, folders: full.folders.map { ServerFolder(id: $0.id, name: $0.name, revisionDate: $0.revisionDate) })
    }

    // MARK: Transport

    typealias Service = BitwardenEndpoint.Service

    /// Sends a request to `endpoint` with `ids` in its `*` segments (see ``send(_:_:_:body:contentType:authorized:)``).
    func send(_ endpoint: BitwardenEndpoint, _ ids: String..., query: String = "", body: Data? = nil,
              contentType: String = "application/json; charset=utf-8") async throws -> Data {
        try await send(endpoint.method, endpoint.service, endpoint.path(ids: ids) + query, body: body,
                       contentType: contentType, authorized: endpoint.isAuthorized)
    }

    /// Sends one request; on 401 refreshes the token once and retries. Returns the body of a 2xx.
    func send(_ method: String, _ service: Service, _ path: String, body: Data? = nil,
              contentType: String = "application/json; charset=utf-8", authorized: Bool = true) async throws -> Data {
        let (configuration, tokens) = state.withLock { ($0.configuration, $0.tokens) }
        let base = service == .api ? configuration.endpoints.api : configuration.endpoints.identity
        let route = "\(method) /\(service.rawValue)\(path.split(separator: "?").first.map(String.init) ?? path)"
        var accessToken: String?
        if authorized {
            guard let tokens else {
                throw BitwardenAPIError(kind: .loginRequired, status: nil, message: "not logged in; call login(email:password:) first",
                                        route: route, requestMayHaveArrived: false)
            }
            accessToken = tokens.expiresAt > configuration.now().addingTimeInterval(30)
                ? tokens.accessToken : try await refreshedToken(replacing: tokens.accessToken, route: route)
        }
        var url = base.absoluteString
        while url.hasSuffix("/") { url.removeLast() }
        guard let requestURL = URL(string: url + path) else {
            throw BitwardenAPIError(kind: .rejected, status: nil, message: "invalid URL \(url + path)", route: route)
        }
        guard configuration.permits(requestURL) else {
            throw BitwardenAPIError(kind: .rejected, status: nil, message:
                "refusing plain http to \(requestURL.host ?? url): the master-password hash and tokens would cross the network "
                + "unencrypted; use https, or allow it explicitly (allowInsecureHTTP, vaultlog's --insecure-http)",
                route: route, requestMayHaveArrived: false)
        }
        for attempt in 0..<2 {
            var headers: [(name: String, value: String)] = [
                ("Accept", "application/json"),
                ("Bitwarden-Client-Version", configuration.clientVersion),
                ("Device-Type", String(configuration.deviceType)),
                ("Bitwarden-Client-Name", configuration.clientId),
            ]
            if let accessToken { headers.append(("Authorization", "Bearer \(accessToken)")) }
            if body != nil { headers.append(("Content-Type", contentType)) }
            let request = HTTPTransportRequest(method: method, url: requestURL, headers: headers, body: body,
                                               timeout: configuration.timeout)
            let response = try await send(request, route: route)
            let status = response.status
            let data = response.body
            if (200..<300).contains(status) { return data }
            if status == 401, authorized, attempt == 0 {
                logger.debug("bitwarden-api: 401, refreshing the token once", metadata: ["route": "\(route)"])
                accessToken = try await refreshedToken(replacing: accessToken, route: route)
                continue
            }
            let error = status == 401 && authorized
                ? BitwardenAPIError(kind: .loginRequired, status: 401,
                                    message: "the server refused the refreshed access token; log in again", route: route,
                                    requestMayHaveArrived: false)
                : BitwardenAPIError.fromResponse(status: status, body: data, route: route)
            logger.debug("bitwarden-api: request failed", metadata: ["route": "\(route)", "error": "\(error)"])
            throw error
        }
        preconditionFailure("unreachable: the loop returns or throws")
    }

    /// A fresh access token: joins a refresh already under way, or starts one. If another
    /// request already replaced `stale`, returns the newer token without a refresh.
    func refreshedToken(replacing stale: String?, route: String) async throws -> String {
        enum Next { case current(String), wait(Task<TokenSet, any Error>) }
        let next: Next = try state.withLock { s in
            guard let tokens = s.tokens else {
                throw BitwardenAPIError(kind: .loginRequired, status: nil, message: "the session ended; log in again", route: route,
                                        requestMayHaveArrived: false)
            }
            if tokens.accessToken != stale, tokens.expiresAt > s.configuration.now() { return .current(tokens.accessToken) }
            if let running = s.refresh { return .wait(running.task) }
            s.generation += 1
            let generation = s.generation
            let refreshToken = tokens.refreshToken
            let task = Task { [self] in
                defer { state.withLock { if $0.refresh?.generation == generation { $0.refresh = nil } } }
                return try await performRefresh(refreshToken)
            }
            s.refresh = (generation, task)
            return .wait(task)
        }
        switch next {
        case .current(let token): return token
        case .wait(let task): return try await task.value.accessToken
        }
    }

    func performRefresh(_ refreshToken: String) async throws -> TokenSet {
        let clientId = state.withLock { $0.configuration.clientId }
        let route = BitwardenEndpoint.token.route()
        let data: Data
        do {
            data = try await send(.token,
                                  body: Self.formEncode([("grant_type", "refresh_token"), ("client_id", clientId),
                                                         ("refresh_token", refreshToken)]),
                                  contentType: "application/x-www-form-urlencoded; charset=utf-8")
        } catch let error as BitwardenAPIError where error.serverErrorKind != .unavailable {
            // The server answered and refused: the session is gone. Offline edits stay queued.
            changeTokens(nil)
            logger.warning("bitwarden-api: token refresh refused; the user must log in again", metadata: ["error": "\(error)"])
            throw BitwardenAPIError(kind: .loginRequired, status: error.status,
                                    message: "the session expired and could not be renewed (\(error.message)); log in again",
                                    route: route, requestMayHaveArrived: false)
        }
        guard let reply = LooseJSON(data), var tokens = tokenSet(reply) else {
            throw malformed(route, "the refresh reply lacks access_token")
        }
        if tokens.refreshToken.isEmpty { tokens.refreshToken = refreshToken }
        changeTokens(tokens)
        logger.debug("bitwarden-api: token refreshed")
        return tokens
    }

}

extension BitwardenClient {
    /// Sends `request` through the transport; a transport failure becomes
    /// ``BitwardenAPIError/Kind/unavailable`` (saying whether the request may have arrived), a
    /// cut by the caller's cancellation `CancellationError`.
    func send(_ request: HTTPTransportRequest, route: String) async throws -> HTTPTransportResponse {
        do {
            return try await transport.send(request)
        } catch let failure as HTTPTransportFailure {
            // Cut by the caller's cancellation: not an outage, and not worth a retry.
            if Task.isCancelled { throw CancellationError() }
            throw BitwardenAPIError(kind: .unavailable, status: nil, message: "cannot reach the server: \(failure.message)",
                                    route: route, requestMayHaveArrived: failure.requestMayHaveArrived)
        } catch {
            if error is CancellationError || Task.isCancelled { throw CancellationError() }
            // A transport that breaks its contract; whether the request left is unknown.
            throw BitwardenAPIError(kind: .unavailable, status: nil, message: "cannot reach the server: \(error)", route: route)
        }
    }
}
