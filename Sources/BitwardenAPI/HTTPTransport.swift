import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// One HTTP request as ``BitwardenClient`` hands it to its transport.
public struct HTTPTransportRequest: Sendable {
    /// `GET`, `POST`, `PUT` or `DELETE`.
    public var method: String
    /// The full URL, query included.
    public var url: URL
    /// Header fields in the order they are sent.
    public var headers: [(name: String, value: String)]
    /// The body, if any.
    public var body: Data?
    /// Seconds without progress before the request fails (``HTTPTransportFailure`` with
    /// `requestMayHaveArrived` true).
    public var timeout: TimeInterval

    /// Creates a request.
    public init(method: String, url: URL, headers: [(name: String, value: String)] = [], body: Data? = nil,
                timeout: TimeInterval) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// Any HTTP reply, whatever its status.
public struct HTTPTransportResponse: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// The whole body.
    public var body: Data

    /// Creates a reply.
    public init(status: Int, body: Data) {
        self.status = status
        self.body = body
    }
}

/// No HTTP reply arrived. A transport throws this (and nothing else) for every failure below
/// HTTP; ``BitwardenClient`` turns it into an `ServerErrorKind/unavailable` error.
public struct HTTPTransportFailure: Error, Sendable, CustomStringConvertible {
    /// What went wrong, for people (for example "connection refused").
    public var message: String
    /// False only when the request certainly never left this process: the connection was
    /// refused or the host is unknown. A timeout or a dropped connection may have been applied
    /// by the server, so the resolver must treat the write as uncertain.
    public var requestMayHaveArrived: Bool

    /// Creates a failure.
    public init(message: String, requestMayHaveArrived: Bool) {
        self.message = message
        self.requestMayHaveArrived = requestMayHaveArrived
    }

    /// The ``message``.
    public var description: String { message }
}

/// How ``BitwardenClient`` moves bytes. The client builds the requests, refreshes tokens and
/// classifies replies; a transport only sends one request and returns the reply.
///
/// Two transports exist: ``URLSessionTransport`` (the default; Foundation's URL loading, the
/// natural choice on Apple platforms) and `AsyncHTTPClientTransport` in the `BitwardenAPINIO`
/// library (SwiftNIO; what the `vaultlog` tool and the simulation use on Linux, where
/// FoundationNetworking has a crash in libdispatch under heavy use).
///
/// A transport must:
/// - return every HTTP reply, 4xx and 5xx included, as an ``HTTPTransportResponse``;
/// - throw ``HTTPTransportFailure`` when no reply arrived, with `requestMayHaveArrived`
///   false only when the request certainly never reached the server;
/// - stop the request (and throw) when the calling task is cancelled;
/// - not follow redirects, store cookies or cache replies.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the server's reply.
    func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportResponse
}

/// The settings a transport's connection machinery is built from. Transports share that
/// machinery per setting for the whole process (``TransportPool``).
public struct HTTPTransportSettings: Hashable, Sendable {
    /// Seconds without progress before a request fails.
    public var timeout: TimeInterval
    /// Concurrent connections to one host.
    public var maximumConnectionsPerHost: Int

    /// Creates settings.
    public init(timeout: TimeInterval, maximumConnectionsPerHost: Int) {
        self.timeout = timeout
        self.maximumConnectionsPerHost = maximumConnectionsPerHost
    }
}

/// One long-lived connection machine (a URL session, an HTTP client) per
/// ``HTTPTransportSettings``, made on first use and never torn down: tearing them down is where
/// FoundationNetworking crashed, and a process needs only a handful.
public final class TransportPool<Machine: Sendable>: Sendable {
    private let machines = Mutex<[HTTPTransportSettings: Machine]>([:])
    private let make: @Sendable (HTTPTransportSettings) -> Machine

    /// A pool that makes a machine with `make` when a setting is first asked for.
    public init(make: @escaping @Sendable (HTTPTransportSettings) -> Machine) {
        self.make = make
    }

    /// The machine for `settings`.
    public func machine(for settings: HTTPTransportSettings) -> Machine {
        machines.withLock { machines in
            if let machine = machines[settings] { return machine }
            let machine = make(settings)
            machines[settings] = machine
            return machine
        }
    }
}

/// The default transport: Foundation's `URLSession` (FoundationNetworking on Linux).
///
/// Sessions are shared by every transport of the process with the same settings and never
/// invalidated: FoundationNetworking on Linux tears a session down (its libcurl multi handle and
/// the dispatch sources watching its sockets) with races that can crash the process in
/// libdispatch. A session holds no state of a client: each request carries its own token and
/// timeout, and cookies and caches are off.
public struct URLSessionTransport: HTTPTransport {
    private let session: URLSession

    /// A transport that gives up after `timeout` seconds without progress, with at most
    /// `maximumConnectionsPerHost` connections to one host. (FoundationNetworking times requests
    /// by the session's setting, so the timeout is fixed per transport, not per request.)
    public init(timeout: TimeInterval = 30, maximumConnectionsPerHost: Int = 16) {
        session = Self.sessions.machine(for: HTTPTransportSettings(timeout: timeout, maximumConnectionsPerHost: maximumConnectionsPerHost))
    }

    private static let sessions = TransportPool<URLSession> { settings in
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = settings.timeout
        configuration.httpMaximumConnectionsPerHost = settings.maximumConnectionsPerHost
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        return URLSession(configuration: configuration)
    }

    /// Sends `request` with a `URLSession` data task and returns the reply, whatever its status.
    /// Throws only ``HTTPTransportFailure``; cancelling the calling task cancels the data task.
    public func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportResponse {
        var urlRequest = URLRequest(url: request.url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: request.timeout)
        urlRequest.httpMethod = request.method
        for header in request.headers { urlRequest.setValue(header.value, forHTTPHeaderField: header.name) }
        urlRequest.httpBody = request.body
        let box = TaskBox()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPTransportResponse, any Error>) in
                let task = session.dataTask(with: urlRequest) { data, response, error in
                    if let error {
                        continuation.resume(throwing: Self.failure(error, timeout: request.timeout))
                    } else if let http = response as? HTTPURLResponse {
                        continuation.resume(returning: HTTPTransportResponse(status: http.statusCode, body: data ?? Data()))
                    } else {
                        continuation.resume(throwing: HTTPTransportFailure(message: "no HTTP response", requestMayHaveArrived: true))
                    }
                }
                box.set(task)
                task.resume()
            }
        } onCancel: {
            box.cancel()
        }
    }

    private static func failure(_ error: any Error, timeout: TimeInterval) -> HTTPTransportFailure {
        let nsError = error as NSError
        let reason = nsError.code == URLError.timedOut.rawValue ? "timed out after \(timeout) s" : error.localizedDescription
        // Refused or unresolvable: the request never left; anything else (a timeout, a dropped
        // connection, a cancellation) may have been applied.
        let neverSent = [URLError.cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet]
            .map(\.rawValue).contains(nsError.code)
        return HTTPTransportFailure(message: "\(reason) (\(nsError.domain) \(nsError.code))", requestMayHaveArrived: !neverSent)
    }
}

/// Holds a URLSession task so cancellation can reach it.
private final class TaskBox: Sendable {
    private let task = Mutex<(task: URLSessionDataTask?, cancelled: Bool)>((nil, false))

    func set(_ newTask: URLSessionDataTask) {
        let cancelled = task.withLock { s in
            s.task = newTask
            return s.cancelled
        }
        if cancelled { newTask.cancel() }
    }

    func cancel() {
        let current = task.withLock { s in
            s.cancelled = true
            return s.task
        }
        current?.cancel()
    }
}
