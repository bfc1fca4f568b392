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
///
/// Redirects are not followed: a 3xx reply is returned as the reply (the client reports it as
/// an unexpected status), so the bearer token never goes to the host a `Location` names.
public struct URLSessionTransport: HTTPTransport {
    private let session: URLSession
    private let bodyLimit: Int

    /// The largest reply body accepted, the same as `AsyncHTTPClientTransport.maximumBodyBytes`
    /// (a full sync of a very large vault stays far below it). A longer body fails the request.
    public static let maximumBodyBytes = 256 << 20

    /// A transport that gives up after `timeout` seconds without progress, with at most
    /// `maximumConnectionsPerHost` connections to one host. (FoundationNetworking times requests
    /// by the session's setting, so the timeout is fixed per transport, not per request.)
    public init(timeout: TimeInterval = 30, maximumConnectionsPerHost: Int = 16) {
        self.init(timeout: timeout, maximumConnectionsPerHost: maximumConnectionsPerHost, maximumBodyBytes: Self.maximumBodyBytes)
    }

    /// A transport with another body limit than ``maximumBodyBytes`` (tests of the limit).
    init(timeout: TimeInterval, maximumConnectionsPerHost: Int, maximumBodyBytes: Int) {
        precondition(maximumBodyBytes >= 0, "the body limit must not be negative")
        session = Self.sessions.machine(for: HTTPTransportSettings(timeout: timeout, maximumConnectionsPerHost: maximumConnectionsPerHost))
        bodyLimit = maximumBodyBytes
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

    /// Sends `request` with a `URLSession` data task and returns the reply, whatever its status
    /// (a redirect too: it is not followed). Throws only ``HTTPTransportFailure``, also for a
    /// body over ``maximumBodyBytes``; cancelling the calling task cancels the data task.
    public func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportResponse {
        var urlRequest = URLRequest(url: request.url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: request.timeout)
        urlRequest.httpMethod = request.method
        for header in request.headers { urlRequest.setValue(header.value, forHTTPHeaderField: header.name) }
        urlRequest.httpBody = request.body
        let box = TaskBox()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPTransportResponse, any Error>) in
                let limit = bodyLimit
                let task = session.dataTask(with: urlRequest) { data, response, error in
                    if let error {
                        continuation.resume(throwing: Self.failure(error, timeout: request.timeout))
                    } else if let http = response as? HTTPURLResponse {
                        let body = data ?? Data()
                        if body.count > limit || http.expectedContentLength > Int64(limit) {
                            continuation.resume(throwing: Self.tooLarge(limit: limit))
                        } else {
                            continuation.resume(returning: HTTPTransportResponse(status: http.statusCode, body: body))
                        }
                    } else {
                        continuation.resume(throwing: HTTPTransportFailure(message: "no HTTP response", requestMayHaveArrived: true))
                    }
                }
                task.delegate = RedirectRefusal.shared
                box.set(task)
                task.resume()
            }
        } onCancel: {
            box.cancel()
        }
    }

    /// A reply whose body is over `limit`: the server answered (the request may have been applied).
    private static func tooLarge(limit: Int) -> HTTPTransportFailure {
        let size = limit % (1 << 20) == 0 && limit > 0 ? "\(limit >> 20) MiB" : "\(limit) bytes"
        return HTTPTransportFailure(
            message: "the reply's body is larger than \(size), the most this client accepts "
                + "(URLSessionTransport.maximumBodyBytes); check that the server URL points at a Bitwarden server",
            requestMayHaveArrived: true)
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

/// Every data task's delegate: refuses each redirect, so the 3xx reply itself completes the
/// task and no request (with its bearer token) goes to the `Location`. A per-task delegate
/// because the sessions are shared and made without one; it holds no state.
private final class RedirectRefusal: NSObject, URLSessionTaskDelegate, Sendable {
    static let shared = RedirectRefusal()

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(nil)
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
