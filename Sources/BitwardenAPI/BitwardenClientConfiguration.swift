import Foundation
import Logging

/// Where the Bitwarden API and identity services live.
public enum BitwardenEndpoints: Sendable, Equatable, CustomStringConvertible {
    /// A self-hosted server or Vaultwarden (or the emulator): `BASE/api` and `BASE/identity`.
    case selfHosted(URL)
    /// Bitwarden's cloud layout: separate hosts and no `/api` prefix.
    case cloud(api: URL, identity: URL)

    /// Bitwarden's US cloud.
    public static let bitwardenUS = BitwardenEndpoints.cloud(
        api: URL(string: "https://api.bitwarden.com")!, identity: URL(string: "https://identity.bitwarden.com")!)
    /// Bitwarden's EU cloud.
    public static let bitwardenEU = BitwardenEndpoints.cloud(
        api: URL(string: "https://api.bitwarden.eu")!, identity: URL(string: "https://identity.bitwarden.eu")!)

    /// The base of the API routes (`.../ciphers`, `.../sync`).
    public var api: URL {
        switch self {
        case .selfHosted(let base): base.appendingPathComponent("api")
        case .cloud(let api, _): api
        }
    }

    /// The base of the identity routes (`.../connect/token`, `.../accounts/prelogin`).
    public var identity: URL {
        switch self {
        case .selfHosted(let base): base.appendingPathComponent("identity")
        case .cloud(_, let identity): identity
        }
    }

    /// The layout and its URLs, e.g. `"self-hosted http://127.0.0.1:8080"`.
    public var description: String {
        switch self {
        case .selfHosted(let base): "self-hosted \(base.absoluteString)"
        case .cloud(let api, let identity): "cloud api \(api.absoluteString), identity \(identity.absoluteString)"
        }
    }
}

/// How a ``BitwardenClient`` talks to the server.
///
/// ```swift
/// var configuration = BitwardenClientConfiguration.selfHosted(URL(string: "http://127.0.0.1:8080")!)
/// configuration.timeout = 10
/// let client = BitwardenClient(configuration: configuration)
/// ```
public struct BitwardenClientConfiguration: Sendable {
    /// The server's URLs; ``BitwardenClient/setEndpoints(_:)`` changes them at runtime.
    public var endpoints: BitwardenEndpoints
    /// Sent as `Bitwarden-Client-Version`. Servers hide item types from clients older than the
    /// version that introduced them (SSH keys: 2024.12.0), so keep it current.
    public var clientVersion: String
    /// Sent as `Device-Type` and `deviceType` (25 = Linux CLI, 8 = Linux desktop, 1 = iOS).
    public var deviceType: Int
    /// The OAuth `client_id`: `web`, `browser`, `desktop`, `mobile` or `cli`.
    public var clientId: String
    /// A stable id of this device (`deviceIdentifier`); Vaultwarden requires one.
    public var deviceIdentifier: String
    /// A human-readable device name (`deviceName`).
    public var deviceName: String
    /// Seconds without progress before a request fails as unavailable.
    public var timeout: TimeInterval
    /// Concurrent connections per host (the resolver runs up to ~16 requests at once).
    public var maximumConnectionsPerHost: Int
    /// The client's clock, for proactive token refresh.
    public var now: @Sendable () -> Date
    /// Where requests and failures are logged (never tokens or keys).
    public var logger: Logger
    /// Whether plain `http://` to a host other than loopback is allowed. Off by default: the
    /// master-password hash and the tokens would cross the network in clear.
    public var allowInsecureHTTP = false
    /// How requests travel; nil means a ``URLSessionTransport`` with ``timeout`` and
    /// ``maximumConnectionsPerHost``. Set `AsyncHTTPClientTransport` (library `BitwardenAPINIO`)
    /// on Linux servers and tools that send many requests.
    public var transport: (any HTTPTransport)?

    /// Creates a configuration.
    public init(
        endpoints: BitwardenEndpoints,
        clientVersion: String = "2026.2.0",
        deviceType: Int = 25,
        clientId: String = "cli",
        deviceIdentifier: String = UUID().uuidString.lowercased(),
        deviceName: String = "vaultlog",
        timeout: TimeInterval = 30,
        maximumConnectionsPerHost: Int = 16,
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "vaultlog.bitwarden-api")
    ) {
        self.endpoints = endpoints
        self.clientVersion = clientVersion
        self.deviceType = deviceType
        self.clientId = clientId
        self.deviceIdentifier = deviceIdentifier
        self.deviceName = deviceName
        self.timeout = timeout
        self.maximumConnectionsPerHost = maximumConnectionsPerHost
        self.now = now
        self.logger = logger
    }

    /// Whether `url` may be used: `https`, or `http` to a loopback host (127.0.0.0/8, ::1,
    /// localhost), or any `http` when ``allowInsecureHTTP`` is set.
    public func permits(_ url: URL) -> Bool {
        guard url.scheme?.lowercased() == "http" else { return true }
        return allowInsecureHTTP || Self.isLoopback(host: url.host ?? "")
    }

    /// Whether `host` names this machine's loopback interface.
    public static func isLoopback(host: String) -> Bool {
        let host = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        if host == "localhost" || host.hasSuffix(".localhost") || host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// A self-hosted (or Vaultwarden, or emulator) server at `base`.
    public static func selfHosted(_ base: URL) -> BitwardenClientConfiguration {
        BitwardenClientConfiguration(endpoints: .selfHosted(base))
    }

    /// Separate API and identity hosts, as Bitwarden's cloud.
    public static func cloud(api: URL, identity: URL) -> BitwardenClientConfiguration {
        BitwardenClientConfiguration(endpoints: .cloud(api: api, identity: identity))
    }
}
