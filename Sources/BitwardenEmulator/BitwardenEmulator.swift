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
    let server = Mutex<RunningServer?>(nil)
    let log = Mutex<[RecordedRequest]>([])

    /// How many requests ``recentRequests`` keeps (oldest dropped first).
    public static let requestLogCapacity = 2000

    /// The latest requests (admin routes excluded), oldest first: what clients sent and what
    /// they got. Bounded by ``requestLogCapacity``.
    public var recentRequests: [RecordedRequest] { log.withLock { $0 } }

    /// Empties ``recentRequests``.
    public func clearRequestLog() { log.withLock { $0.removeAll() } }

    func record(_ request: Request, status: Int?, fault: InjectedFailure?, offline: OfflineMode?) {
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

    struct RunningServer {
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

}
