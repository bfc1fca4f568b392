import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import VaultCrypto
import VaultModel
import _CryptoExtras
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A Bitwarden-compatible server on loopback with in-memory state, for tests and demos: real
/// HTTP that a real client (or ``BitwardenAPI/BitwardenClient``) can log in to, with fault
/// injection and "another device" edits.
///
/// The layout is self-hosted: `BASE/identity/...` and `BASE/api/...`.
///
/// ```swift
/// let emulator = BitwardenEmulator(configuration: EmulatorConfiguration(flavor: .bitwarden))
/// let account = try emulator.createAccount(email: "a@example.com", password: "pw", iterations: 5000)
/// let base = try await emulator.start()          // http://127.0.0.1:PORT
/// emulator.faults.setErrorRate(0.5, status: 503)
/// // ... point a client at `base` ...
/// await emulator.stop()
/// ```
public final class BitwardenEmulator: Sendable {
    /// The configuration it was created with.
    public let configuration: EmulatorConfiguration
    /// In-process control of every fault (the admin routes drive the same object).
    public let faults: FaultInjector

    let core: EmulatorCore
    private let server = Mutex<RunningServer?>(nil)
    private let log = Mutex<[RecordedRequest]>([])

    /// How many requests ``recentRequests`` keeps (oldest dropped first).
    public static let requestLogCapacity = 2000

    /// The latest requests (admin routes excluded), oldest first: what clients sent and what
    /// they got. Bounded by ``requestLogCapacity``.
    public var recentRequests: [RecordedRequest] { log.withLock { $0 } }

    /// Empties ``recentRequests``.
    public func clearRequestLog() { log.withLock { $0.removeAll() } }

    private func record(_ request: Request, status: Int?, fault: InjectedFailure?, offline: OfflineMode?) {
        let entry = RecordedRequest(
            method: request.method.rawValue, path: request.uri.path, status: status,
            fault: fault?.description ?? offline.map { "offline (\($0.rawValue))" },
            clientVersion: request.headers[HTTPField.Name("Bitwarden-Client-Version")!],
            deviceType: request.headers[HTTPField.Name("Device-Type")!])
        log.withLock { entries in
            if entries.count >= Self.requestLogCapacity { entries.removeFirst(entries.count - Self.requestLogCapacity + 1) }
            entries.append(entry)
        }
    }

    private struct RunningServer {
        let task: Task<Void, Never>
        let group: ServiceGroup
        let url: URL
        let port: Int
    }

    /// Creates an emulator with empty state. Nothing listens until ``start(host:port:)``.
    public init(configuration: EmulatorConfiguration = EmulatorConfiguration()) {
        self.configuration = configuration
        self.core = EmulatorCore(configuration: configuration)
        self.faults = FaultInjector(random: configuration.random)
    }

    /// Creates an emulator from a state file written by ``save(to:)``.
    ///
    /// - Throws: ``EmulatorError/stateFile(_:_:)`` if the file cannot be read or decoded.
    public static func load(from path: String, configuration: EmulatorConfiguration = EmulatorConfiguration()) throws -> BitwardenEmulator {
        let emulator = BitwardenEmulator(configuration: configuration)
        try emulator.load(from: path)
        return emulator
    }

    // MARK: Lifecycle

    /// The base URL while running (`http://HOST:PORT`), else nil.
    public var baseURL: URL? { server.withLock { $0?.url } }

    /// Starts listening on `host:port` (port 0 picks a free port) and returns the base URL.
    ///
    /// - Throws: ``EmulatorError/alreadyRunning`` or the bind error (port in use, bad host).
    public func start(host: String = "127.0.0.1", port: Int = 0) async throws -> URL {
        guard baseURL == nil else { throw EmulatorError.alreadyRunning }
        let ready = OneShot<Int>()
        let responder = CallbackResponder<EmulatorContext> { [self] request, context in
            try await self.respond(to: request, context: context)
        }
        // Hummingbird announces every start at info; keep that out of a library's normal output.
        var frameworkLogger = configuration.logger
        if frameworkLogger.logLevel == .info { frameworkLogger.logLevel = .notice }
        let app = Application(
            responder: responder,
            configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { channel in ready.resolve(.success(channel.localAddress?.port ?? port)) },
            logger: frameworkLogger)
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: [app], gracefulShutdownSignals: [], logger: frameworkLogger))
        let task = Task {
            do {
                try await group.run()
                ready.resolve(.failure(EmulatorError.stoppedBeforeListening))
            } catch {
                ready.resolve(.failure(error))
            }
        }
        let actualPort: Int
        do {
            actualPort = try await ready.value()
        } catch {
            task.cancel()
            _ = await task.value
            throw error
        }
        let hostPart = host.contains(":") ? "[\(host)]" : host
        let url = URL(string: "http://\(hostPart):\(actualPort)")!
        server.withLock { $0 = RunningServer(task: task, group: group, url: url, port: actualPort) }
        configuration.logger.debug("emulator: listening", metadata: ["url": "\(url)", "flavor": "\(configuration.flavor)"])
        return url
    }

    /// Stops listening and closes open connections. The state is kept: ``start(host:port:)``
    /// again (on the same port to simulate a server that comes back) serves the same vault.
    public func stop() async {
        guard let running = server.withLock({ state -> RunningServer? in
            defer { state = nil }
            return state
        }) else { return }
        // Graceful first (open requests finish, idle connections close); cancel if that hangs.
        await running.group.triggerGracefulShutdown()
        let finished = Mutex(false)
        let watchdog = Task {
            try? await Task.sleep(nanoseconds: 3_000_000_000)
            if !finished.withLock({ $0 }) { running.task.cancel() }
        }
        await running.task.value
        finished.withLock { $0 = true }
        watchdog.cancel()
        configuration.logger.debug("emulator: stopped", metadata: ["url": "\(running.url)"])
    }

    // MARK: Accounts

    /// Creates an account the way a client registers: a PBKDF2 master key from `password`, a new
    /// user key, its protected form, and an RSA-2048 key pair whose private key is a type-2
    /// EncString of its PKCS#8 DER under the user key.
    ///
    /// - Parameter iterations: PBKDF2 iterations (at least 5,000; tests use 5,000 for speed).
    /// - Throws: ``EmulatorError/accountExists(_:)`` or a KDF error.
    @discardableResult
    public func createAccount(email: String, password: String, iterations: Int = 600_000) throws -> EmulatorAccount {
        try createAccount(email: email, password: password, kdf: .pbkdf2(iterations: iterations))
    }

    /// Creates an account whose master key is derived with `kdf` (PBKDF2 or Argon2id; checked
    /// against Bitwarden's ranges first).
    @discardableResult
    public func createAccount(email: String, password: String, kdf: KdfConfig) throws -> EmulatorAccount {
        try kdf.validate()
        let masterKey = try MasterKey.derive(password: password, email: email, kdf: kdf)
        let userKey = SymmetricCryptoKey.generate(using: configuration.random)
        let protected = masterKey.encryptUserKey(userKey, random: configuration.random)
        let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let privateKey = EncString.encrypt(Array(rsa.pkcs8DERRepresentation), key: userKey, random: configuration.random)
        return try createAccount(
            email: email, kdf: kdf, masterPasswordHash: masterKey.passwordHash(password: password),
            protectedUserKey: protected, userKey: userKey, privateKey: privateKey,
            publicKey: Base64.encode(Array(rsa.publicKey.derRepresentation)))
    }

    /// Creates an account from existing material, for published vectors such as the reference's
    /// T8 account: the server only needs the master-password hash and the protected user key.
    ///
    /// - Parameters:
    ///   - masterPasswordHash: base64 server-authorization hash (PBKDF2 of the master key, 1 round).
    ///   - userKey: the key `protectedUserKey` wraps; kept for tests, never sent.
    ///   - privateKey: the wrapped RSA private key, if the account has one.
    @discardableResult
    public func createAccount(email: String, kdf: KdfConfig, masterPasswordHash: String, protectedUserKey: EncString,
                              userKey: SymmetricCryptoKey, privateKey: EncString? = nil, publicKey: String? = nil,
                              name: String? = nil) throws -> EmulatorAccount {
        let email = email.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !email.isEmpty else { throw EmulatorError.invalidArgument("email must not be empty") }
        try kdf.validate()
        var iterations = 0, memory: Int?, parallelism: Int?
        switch kdf {
        case .pbkdf2(let i): iterations = i
        case .argon2id(let i, let m, let p): iterations = i; memory = m; parallelism = p
        }
        let stored: StoredAccount = try core.state.withLock { state in
            guard state.account(email: email) == nil else { throw EmulatorError.accountExists(email) }
            let now = core.nowTicks()
            let account = StoredAccount(
                id: core.newID(), email: email, name: name, kdfType: kdf.kdfType, kdfIterations: iterations,
                kdfMemory: memory, kdfParallelism: parallelism, masterPasswordHash: masterPasswordHash,
                protectedUserKey: protectedUserKey.serialized, privateKey: privateKey?.serialized, publicKey: publicKey,
                userKey: userKey.exportBase64(), securityStamp: configuration.random.uuidString(),
                creationTicks: now, revisionTicks: now)
            state.accounts[account.id] = account
            return account
        }
        configuration.logger.debug("emulator: created account", metadata: ["email": "\(email)", "id": "\(stored.id)"])
        return try stored.publicAccount()
    }

    /// Every account.
    public var accounts: [EmulatorAccount] {
        core.state.withLock { state in
            state.accounts.values.sorted { $0.creationTicks == $1.creationTicks ? $0.email < $1.email : $0.creationTicks < $1.creationTicks }
        }.compactMap { try? $0.publicAccount() }
    }

    /// The account with this email (case-insensitive), if any.
    public func account(email: String) -> EmulatorAccount? {
        core.state.withLock { $0.account(email: email) }.flatMap { try? $0.publicAccount() }
    }

    /// Ends every session of the user, as "deauthorize sessions" does: the security stamp
    /// rotates (access tokens answer 401) and refresh tokens stop working (the client must log in).
    public func revokeSessions(userId: String) {
        core.state.withLock { state in
            state.accounts[userId]?.securityStamp = configuration.random.uuidString()
            state.refreshTokens = state.refreshTokens.filter { $0.value.userId != userId }
        }
    }

    /// The account revision date (what `GET /api/accounts/revision-date` reports).
    public func accountRevisionDate(userId: String) -> BitwardenDate? {
        core.state.withLock { $0.accounts[userId]?.revisionTicks }.map { BitwardenDate(ticksSince1970: $0) }
    }

    // MARK: Ciphers and folders

    /// The user's ciphers as the server stores them, trashed ones included, in creation order
    /// (`cipherDetails` shape). Items that are not valid `Cipher`s (Vaultwarden accepts
    /// plaintext) are left out; see ``rawCiphers(userId:)``.
    public func ciphers(userId: String) -> [Cipher] {
        rawCiphers(userId: userId).compactMap { Self.decode($0) }
    }

    /// The user's ciphers as the JSON the server would send, unknown fields included.
    public func rawCiphers(userId: String) -> [JSONObject] {
        core.state.withLock { state in state.ciphers(of: userId).map { core.cipherJSON($0, object: "cipherDetails") } }
    }

    /// One cipher by id, whoever owns it, or nil.
    public func cipher(id: String) -> Cipher? {
        core.state.withLock { state in state.ciphers[id.lowercased()].map { core.cipherJSON($0, object: "cipherDetails") } }
            .flatMap { Self.decode($0) }
    }

    /// Changes a cipher as another device's `PUT` would: `mutate` edits it, the server stores
    /// the data fields and bumps `revisionDate` (and the account revision). The id, type and
    /// dates are server-owned; changes to them are ignored.
    ///
    /// - Throws: ``EmulatorError/unknownCipher(_:)``.
    @discardableResult
    public func editAsAnotherDevice(cipherId: String, _ mutate: (inout Cipher) -> Void) throws -> Cipher {
        let json = try core.state.withLock { state throws -> JSONObject in
            guard var stored = state.ciphers[cipherId.lowercased()] else { throw EmulatorError.unknownCipher(cipherId) }
            guard var cipher = Self.decode(core.cipherJSON(stored, object: "cipherDetails")) else {
                throw EmulatorError.invalidArgument("cipher \(cipherId) is not a valid Cipher and cannot be edited as one")
            }
            mutate(&cipher)
            stored.data = try Self.dataFields(of: cipher)
            stored.revisionTicks = core.bumped(after: stored.revisionTicks)
            state.ciphers[stored.id] = stored
            core.touchAccount(stored.userId, in: &state)
            return core.cipherJSON(stored, object: "cipherDetails")
        }
        configuration.logger.debug("emulator: another device edited a cipher", metadata: ["id": "\(cipherId)"])
        return Self.decode(json)!
    }

    /// Adds a cipher as if another device created it: the server assigns the id and dates
    /// (any in `cipher` are ignored); unknown fields in ``Cipher/extra`` are stored.
    ///
    /// - Precondition: the user exists.
    @discardableResult
    public func insertCipher(userId: String, _ cipher: Cipher) -> Cipher {
        let json: JSONObject = core.state.withLock { state in
            precondition(state.accounts[userId] != nil, "insertCipher: no account with id \(userId)")
            let now = core.nowTicks()
            let data = (try? Self.dataFields(of: cipher)) ?? JSONObject()
            var attachments: JSONValue?
            if let list = cipher.attachments, let encoded = try? JSONEncoder().encode(list) {
                attachments = try? JSONValue(parsing: encoded)
            }
            let stored = StoredCipher(id: core.newID(), userId: userId, sequence: state.takeSequence(), type: cipher.type.rawValue,
                                      data: data, attachments: attachments, creationTicks: now, revisionTicks: now,
                                      deletedTicks: cipher.deletedDate == nil ? nil : now)
            state.ciphers[stored.id] = stored
            core.touchAccount(userId, in: &state)
            return core.cipherJSON(stored, object: "cipherDetails")
        }
        return Self.decode(json)!
    }

    /// The user's folders as `(id, encrypted name)`, in creation order.
    public func folders(userId: String) -> [(id: String, name: String)] {
        core.state.withLock { $0.folders(of: userId).map { ($0.id, $0.name) } }
    }

    static func decode(_ json: JSONObject) -> Cipher? {
        guard let data = try? JSONValue.object(json).serializedJSON() else { return nil }
        return try? JSONDecoder().decode(Cipher.self, from: data)
    }

    static func dataFields(of cipher: Cipher) throws -> JSONObject {
        let encoded = try JSONEncoder().encode(cipher)
        guard case .object(let all) = try JSONValue(parsing: encoded) else { return JSONObject() }
        var data = JSONObject()
        for (key, value) in all where !EmulatorCore.serverOwnedKeys.contains(key) && !EmulatorCore.requestOnlyKeys.contains(key) {
            data[key] = value
        }
        return data
    }

    // MARK: State file

    /// Writes the state (accounts with their keys, ciphers, folders, live refresh tokens) as
    /// JSON, in a file only its owner can read (0600). The file holds key material: it is for
    /// test and demo vaults only. Expired refresh tokens are not written.
    public func save(to path: String) throws {
        let now = core.nowTicks()
        var snapshot = core.state.withLock { $0 }
        snapshot.refreshTokens = snapshot.refreshTokens.filter { $0.value.expiresTicks > now }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        do {
            try SecretFile.write(Array(try encoder.encode(snapshot)), to: path)
        } catch {
            throw EmulatorError.stateFile(path, "cannot write: \(error)")
        }
    }

    /// Replaces the state with the one saved in `path`.
    public func load(from path: String) throws {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw EmulatorError.stateFile(path, "cannot read: \(error.localizedDescription)")
        }
        let loaded: EmulatorState
        do {
            loaded = try JSONDecoder().decode(EmulatorState.self, from: data)
        } catch {
            throw EmulatorError.stateFile(path, "not an emulator state file (\(error))")
        }
        guard loaded.formatVersion == 1 else {
            throw EmulatorError.stateFile(path, "format version \(loaded.formatVersion) is not supported (expected 1)")
        }
        guard let signingKey = Base64.decode(loaded.signingKey), signingKey.count >= 32 else {
            throw EmulatorError.stateFile(path, "signingKey must be the base64 of at least 32 random bytes (a shorter key makes access tokens forgeable)")
        }
        for account in loaded.accounts.values {
            do {
                try KdfConfig(kdfType: account.kdfType, iterations: account.kdfIterations,
                              memoryMiB: account.kdfMemory, parallelism: account.kdfParallelism).validate()
            } catch {
                throw EmulatorError.stateFile(path, "account \(account.email): \(error)")
            }
        }
        core.state.withLock { $0 = loaded }
    }

    // MARK: HTTP

    /// Answers one request in process, without a socket: the routes, validation and state of
    /// the running server, minus fault injection, the admin routes and the request log. For
    /// tests of request handling and the fuzz targets (`Tests/Fuzz`).
    ///
    /// ```swift
    /// let response = emulator.respond(to: EmulatorRequest(method: "GET", path: "/alive"))
    /// ```
    public func respond(to request: EmulatorRequest) -> EmulatorResponse {
        core.handle(request)
    }

    private func respond(to request: Request, context: EmulatorContext) async throws -> Response {
        let path = request.uri.path
        let method = request.method.rawValue
        if path == "/admin" || path.hasPrefix("/admin/") {
            return Self.hbResponse(await admin(try await Self.collect(request, context, limit: configuration.maximumBodyBytes)))
        }
        let decision = faults.decide(method: method, path: path)
        if decision.latency > 0 {
            try await Task.sleep(nanoseconds: UInt64(decision.latency * 1_000_000_000))
        }
        if let offline = decision.offline {
            record(request, status: nil, fault: nil, offline: offline)
            configuration.logger.debug("emulator: offline, dropping", metadata: ["route": "\(method) \(path)"])
            await Self.drop(context.channel, reset: offline == .resetConnections)
            throw DroppedConnection()
        }
        switch decision.failure {
        case .status(let code)?:
            configuration.logger.debug("emulator: injected status", metadata: ["route": "\(method) \(path)", "status": "\(code)"])
            record(request, status: code, fault: decision.failure, offline: nil)
            let message = code >= 500 ? "An unhandled server error has occurred." : "Injected fault: HTTP \(code)."
            return Self.hbResponse(ErrorBodies.error(configuration.flavor, status: code, message: message))
        case .resetConnection?, .closeConnection?:
            _ = try? await Self.collect(request, context, limit: configuration.maximumBodyBytes)
            record(request, status: nil, fault: decision.failure, offline: nil)
            return Self.truncatedResponse(EmulatorResponse.empty(200), channel: context.channel,
                                          reset: decision.failure == .resetConnection)
        case .applyThenDropResponse?:
            let emulatorRequest = try await Self.collect(request, context, limit: configuration.maximumBodyBytes)
            let response = core.handle(emulatorRequest)
            record(request, status: response.status, fault: decision.failure, offline: nil)
            configuration.logger.debug("emulator: applied, dropping response",
                                       metadata: ["route": "\(method) \(path)", "status": "\(response.status)"])
            return Self.truncatedResponse(response, channel: context.channel, reset: false)
        case .applyThenReply(let status, let body)?:
            let emulatorRequest = try await Self.collect(request, context, limit: configuration.maximumBodyBytes)
            _ = core.handle(emulatorRequest)
            record(request, status: status, fault: decision.failure, offline: nil)
            return Self.hbResponse(EmulatorResponse(status: status, headers: [("Content-Type", "application/json; charset=utf-8")], body: Array(body.utf8)))
        case .reply(let status, let body)?:
            _ = try? await Self.collect(request, context, limit: configuration.maximumBodyBytes)
            record(request, status: status, fault: decision.failure, offline: nil)
            return Self.hbResponse(EmulatorResponse(status: status, headers: [("Content-Type", "text/html; charset=utf-8")], body: Array(body.utf8)))
        case nil:
            let emulatorRequest: EmulatorRequest
            do {
                emulatorRequest = try await Self.collect(request, context, limit: configuration.maximumBodyBytes)
            } catch {
                return Self.hbResponse(ErrorBodies.error(configuration.flavor, status: 413,
                    message: "The request body exceeds \(configuration.maximumBodyBytes) bytes."))
            }
            let response = core.handle(emulatorRequest)
            record(request, status: response.status, fault: nil, offline: nil)
            return Self.hbResponse(response)
        }
    }

    struct DroppedConnection: Error {}

    /// A response cut short: the head (promising more body than will come) and part of the
    /// body are sent, then the connection is closed or reset. Clients see a failure.
    ///
    /// Closing before any byte is sent is not enough: libcurl (FoundationNetworking) and
    /// CFNetwork silently retry a request whose reused connection died before the first
    /// response byte, which would hide the fault or apply a request twice.
    static func truncatedResponse(_ response: EmulatorResponse, channel: any Channel, reset: Bool) -> Response {
        var fields = HTTPFields()
        fields[.contentType] = "application/json; charset=utf-8"
        fields[.contentLength] = String(response.body.count + 64)
        let partial = response.body.isEmpty ? [UInt8(ascii: " ")] : Array(response.body.prefix(max(1, response.body.count / 2)))
        return Response(status: HTTPResponse.Status(code: response.status), headers: fields, body: ResponseBody { writer in
            try await writer.write(ByteBuffer(bytes: partial))
            try? await Task.sleep(nanoseconds: 20_000_000)   // let the partial reply reach the socket
            await drop(channel, reset: reset)
            throw DroppedConnection()
        })
    }

    static func drop(_ channel: any Channel, reset: Bool) async {
        if reset, let provider = channel as? any SocketOptionProvider {
            _ = try? await provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).get()
        }
        try? await channel.close().get()
    }

    static func collect(_ request: Request, _ context: EmulatorContext, limit: Int) async throws -> EmulatorRequest {
        let buffer = try await request.body.collect(upTo: limit)
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName.lowercased()] = field.value }
        var query: [String: String] = [:]
        for (key, value) in request.uri.queryParameters { query[String(key)] = String(value) }
        return EmulatorRequest(method: request.method.rawValue, path: request.uri.path, query: query, headers: headers,
                               body: Array(buffer.readableBytesView))
    }

    static func hbResponse(_ response: EmulatorResponse) -> Response {
        var fields = HTTPFields()
        for (name, value) in response.headers {
            if let key = HTTPField.Name(name) { fields.append(HTTPField(name: key, value: value)) }
        }
        return Response(status: HTTPResponse.Status(code: response.status), headers: fields,
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: response.body)))
    }
}

/// One request the emulator received, for tests and demos that check what a client sent.
public struct RecordedRequest: Sendable, Equatable, CustomStringConvertible {
    /// The HTTP method.
    public let method: String
    /// The path, without the query.
    public let path: String
    /// The status the server produced (for a dropped reply, the status it would have sent), or
    /// nil when nothing was processed.
    public let status: Int?
    /// The injected fault, if any.
    public let fault: String?
    /// The `Bitwarden-Client-Version` header.
    public let clientVersion: String?
    /// The `Device-Type` header.
    public let deviceType: String?

    public var description: String {
        "\(method) \(path) → \(status.map(String.init) ?? "no reply")" + (fault.map { " [\($0)]" } ?? "")
    }
}

/// Errors from the emulator's Swift API.
public enum EmulatorError: Error, Equatable, CustomStringConvertible {
    /// ``BitwardenEmulator/start(host:port:)`` was called while running.
    case alreadyRunning
    /// The server stopped before it was listening.
    case stoppedBeforeListening
    /// An account with this email exists.
    case accountExists(String)
    /// No cipher has this id.
    case unknownCipher(String)
    /// An argument is invalid; the message says which and why.
    case invalidArgument(String)
    /// The state file at the path could not be used.
    case stateFile(String, String)

    public var description: String {
        switch self {
        case .alreadyRunning: "the emulator is already running; call stop() first"
        case .stoppedBeforeListening: "the emulator stopped before it started listening"
        case .accountExists(let email): "an account with email \(email) already exists; pick another email"
        case .unknownCipher(let id): "no cipher with id \(id) on the emulator"
        case .invalidArgument(let message): message
        case .stateFile(let path, let reason): "state file \(path): \(reason)"
        }
    }
}

/// The request context: Hummingbird's core storage plus the channel (faults close it).
struct EmulatorContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}

/// A value that arrives once, awaited once (the listening port).
final class OneShot<Value: Sendable>: Sendable {
    private let state = Mutex<(result: Result<Value, any Error>?, waiter: CheckedContinuation<Value, any Error>?)>((nil, nil))

    func resolve(_ result: Result<Value, any Error>) {
        let waiter: CheckedContinuation<Value, any Error>? = state.withLock { s in
            guard s.result == nil else { return nil }
            s.result = result
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(with: result)
    }

    func value() async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            let ready: Result<Value, any Error>? = state.withLock { s in
                if let result = s.result { return result }
                s.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }
}
