import Foundation
import Synchronization
import VaultCrypto
import VaultModel

/// Which requests a fault applies to: an optional HTTP method and a path pattern in which
/// `*` matches one segment and a trailing `**` matches the rest.
///
/// ```swift
/// RouteMatcher(.updateCipher)            // PUT /api/ciphers/*: updates
/// RouteMatcher("PUT /api/ciphers/*")     // the same, as text (scenario files)
/// RouteMatcher("POST /api/ciphers")      // creates
/// RouteMatcher("/api/**")                // every API route, any method
/// ```
public struct RouteMatcher: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The method (uppercase), or nil for any.
    public var method: String?
    /// The path pattern, for example `/api/ciphers/*/delete`.
    public var path: String

    /// Parses `"METHOD /path"` or `"/path"`.
    public init(_ spec: String) {
        let parts = spec.split(separator: " ", maxSplits: 1).map(String.init)
        if parts.count == 2 {
            method = parts[0].uppercased()
            path = parts[1]
        } else {
            method = nil
            path = spec
        }
    }

    /// A matcher from its parts.
    public init(method: String?, path: String) {
        self.method = method?.uppercased()
        self.path = path
    }

    /// Requests to one route of the Bitwarden API, for example
    /// `RouteMatcher(.softDeleteCipher)` for `PUT /api/ciphers/*/delete`. Only requests that
    /// route list names as that route match: `RouteMatcher(.uploadAttachment)`
    /// (`POST /api/ciphers/*/attachment/*`) leaves `POST …/attachment/v2` alone, and
    /// `RouteMatcher(.updateCipherByPost)` leaves `POST /api/ciphers/create`.
    public init(_ endpoint: BitwardenEndpoint) {
        self.init(method: endpoint.method, path: "/\(endpoint.service.rawValue)/\(endpoint.pattern)")
        route = endpoint.rawValue
    }

    /// The ``BitwardenEndpoint`` (its raw value) a matcher made from one stands for.
    var route: String?

    /// Every request.
    public static let any = RouteMatcher(method: nil, path: "/**")

    /// Whether a request matches.
    public func matches(method: String, path requestPath: String) -> Bool {
        if let m = self.method, m != method.uppercased() { return false }
        if let route, let endpoint = BitwardenEndpoint(rawValue: route) {
            let segments = requestPath.split(separator: "/").map(String.init)
            guard let service = segments.first.flatMap(BitwardenEndpoint.Service.init(rawValue:)),
                  BitwardenEndpoint.match(method: method, service: service, segments: Array(segments.dropFirst()))?.0 == endpoint else {
                return false
            }
        }
        let pattern = path.split(separator: "/")
        let actual = requestPath.split(separator: "/")
        for (i, piece) in pattern.enumerated() {
            if piece == "**" { return true }
            guard i < actual.count else { return false }
            if piece != "*" && piece.lowercased() != actual[i].lowercased() { return false }
        }
        return pattern.count == actual.count
    }

    /// The matcher as written: "METHOD /path", or just the path when any method matches.
    public var description: String { (method.map { $0 + " " } ?? "") + path }
}

/// What an injected fault does to a request.
public enum InjectedFailure: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Answer with this HTTP status and an error body in the flavour's shape; the request is not applied.
    case status(Int)
    /// Reset the connection (TCP RST) without applying the request.
    case resetConnection
    /// Close the connection without a response and without applying the request.
    case closeConnection
    /// Apply the request (the server commits it), then close the connection without a response:
    /// the client sees a failure although the change happened.
    case applyThenDropResponse
    /// Apply the request, then answer with this status and these raw bytes as
    /// `application/json` (a reply mangled by a proxy or a broken server).
    case applyThenReply(status: Int, body: String)
    /// Answer with this status and these raw bytes **without** applying the request (a proxy
    /// in front of the server: an HTML 403, a bare 413).
    case reply(status: Int, body: String)
    /// Answer with this 3xx status and a `Location` header naming `location`, without applying
    /// the request (a server or proxy that moved): a client must not follow it, or it would
    /// send the request and its bearer token wherever `location` points.
    case redirect(status: Int, location: String)

    /// A short phrase for logs and recorded requests, e.g. "HTTP 503" or "reset connection";
    /// reply bodies are cut to their first 40 characters.
    public var description: String {
        switch self {
        case .status(let code): "HTTP \(code)"
        case .resetConnection: "reset connection"
        case .closeConnection: "close connection"
        case .applyThenDropResponse: "apply, then drop the response"
        case .applyThenReply(let status, let body): "apply, then reply HTTP \(status) \(body.prefix(40).debugDescription)"
        case .reply(let status, let body): "reply HTTP \(status) \(body.prefix(40).debugDescription) without applying"
        case .redirect(let status, let location): "redirect HTTP \(status) to \(location) without applying"
        }
    }
}

/// How the emulator behaves while "offline". (To refuse connections outright, stop the
/// emulator and start it again on the same port, or point the client at a closed port.)
public enum OfflineMode: String, Sendable, Codable, CaseIterable {
    /// Every request's connection is reset (TCP RST): clients see "connection reset".
    case resetConnections = "reset"
    /// Every request's connection is closed without a response.
    case closeConnections = "close"
}

/// Fault injection for one emulator, controlled in-process or through the admin HTTP routes.
/// Admin routes are never affected. Randomness (error rate, jitter) comes from the emulator's
/// injected ``EmulatorConfiguration/random``.
///
/// ```swift
/// emulator.faults.setErrorRate(0.5, status: 503)
/// emulator.faults.failNext(2, matching: RouteMatcher("PUT /api/ciphers/*"), with: .status(500))
/// emulator.faults.failNext(matching: RouteMatcher("POST /api/ciphers"), with: .applyThenDropResponse)
/// emulator.faults.offline = .resetConnections
/// emulator.faults.clear()
/// ```
public final class FaultInjector: Sendable {
    /// A scripted failure for the next matching requests.
    public struct ScriptedFailure: Sendable, Hashable, Codable {
        /// Which requests it applies to.
        public var route: RouteMatcher
        /// What happens to them.
        public var failure: InjectedFailure
        /// How many more matching requests it fails.
        public var remaining: Int
    }

    /// Everything configured, as the admin route reports it.
    public struct Settings: Sendable, Hashable, Codable {
        /// Offline mode, if offline.
        public var offline: OfflineMode?
        /// Fixed latency added to every request, in seconds.
        public var latency: TimeInterval = 0
        /// Extra latency drawn uniformly from [0, jitter], in seconds.
        public var jitter: TimeInterval = 0
        /// Probability in [0, 1] that a request fails with ``errorStatus``.
        public var errorRate: Double = 0
        /// The status of random failures.
        public var errorStatus: Int = 503
        /// Which requests random failures apply to.
        public var errorRoute: RouteMatcher = .any
        /// Scripted failures, first match wins.
        public var scripted: [ScriptedFailure] = []
        /// How many faults have been injected since the last ``clear()``.
        public var injectedCount: Int = 0
    }

    /// What the HTTP layer must do with one request.
    struct Decision {
        var latency: TimeInterval = 0
        var offline: OfflineMode?
        var failure: InjectedFailure?
    }

    private let settings = Mutex(Settings())
    private let random: any RandomSource

    init(random: any RandomSource) {
        self.random = random
    }

    /// A copy of the current settings.
    public var current: Settings { settings.withLock { $0 } }

    /// Offline mode; nil when online.
    public var offline: OfflineMode? {
        get { settings.withLock { $0.offline } }
        set { settings.withLock { $0.offline = newValue } }
    }

    /// Adds `fixed` seconds plus a uniform draw from [0, `jitter`] to every request.
    public func setLatency(_ fixed: TimeInterval, jitter: TimeInterval = 0) {
        precondition(fixed >= 0 && jitter >= 0, "latency and jitter must not be negative")
        settings.withLock {
            $0.latency = fixed
            $0.jitter = jitter
        }
    }

    /// Fails a fraction `rate` of the requests matching `route` with `status` (not applied).
    public func setErrorRate(_ rate: Double, status: Int = 503, matching route: RouteMatcher = .any) {
        precondition((0...1).contains(rate), "the error rate is a probability in [0, 1]")
        settings.withLock {
            $0.errorRate = rate
            $0.errorStatus = status
            $0.errorRoute = route
        }
    }

    /// Fails the next `count` requests matching `route` with `failure`.
    public func failNext(_ count: Int = 1, matching route: RouteMatcher, with failure: InjectedFailure) {
        precondition(count > 0, "count must be positive")
        settings.withLock { $0.scripted.append(ScriptedFailure(route: route, failure: failure, remaining: count)) }
    }

    /// Applies the next `count` requests matching `route`, then drops their responses.
    public func dropResponseAfterApplying(next count: Int = 1, matching route: RouteMatcher) {
        failNext(count, matching: route, with: .applyThenDropResponse)
    }

    /// Replaces every setting (the admin route's PUT).
    public func apply(_ new: Settings) {
        settings.withLock {
            let count = $0.injectedCount
            $0 = new
            $0.injectedCount = count
        }
    }

    /// Removes every fault: online, no latency, no errors, no scripted failures.
    public func clear() {
        settings.withLock { $0 = Settings() }
    }

    /// Decides the fate of one request (consuming scripted failures and randomness).
    func decide(method: String, path: String) -> Decision {
        settings.withLock { s in
            var decision = Decision()
            decision.latency = s.latency + (s.jitter > 0 ? random.unitInterval() * s.jitter : 0)
            if let offline = s.offline {
                decision.offline = offline
                s.injectedCount += 1
                return decision
            }
            if let index = s.scripted.firstIndex(where: { $0.route.matches(method: method, path: path) }) {
                decision.failure = s.scripted[index].failure
                s.scripted[index].remaining -= 1
                if s.scripted[index].remaining <= 0 { s.scripted.remove(at: index) }
                s.injectedCount += 1
                return decision
            }
            if s.errorRate > 0, s.errorRoute.matches(method: method, path: path), random.unitInterval() < s.errorRate {
                decision.failure = .status(s.errorStatus)
                s.injectedCount += 1
            }
            return decision
        }
    }
}
