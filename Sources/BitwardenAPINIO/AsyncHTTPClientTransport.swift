import AsyncHTTPClient
import BitwardenAPI
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A ``BitwardenAPI/HTTPTransport`` on SwiftNIO's AsyncHTTPClient.
///
/// Use it on Linux for anything that sends many requests (a server, a tool, a long
/// simulation): FoundationNetworking's `URLSession` can crash the process in libdispatch under
/// that load, and this transport does not use FoundationNetworking at all.
///
/// ```swift
/// var configuration = BitwardenClientConfiguration.selfHosted(URL(string: "http://127.0.0.1:8080")!)
/// configuration.transport = AsyncHTTPClientTransport(timeout: configuration.timeout)
/// let client = BitwardenClient(configuration: configuration)
/// ```
///
/// HTTP clients are shared by every transport of the process with the same settings and live
/// until the process ends, so a transport costs nothing to create and needs no shutdown.
/// A refused connection fails at once (no reconnect with back-off), so "offline" is noticed
/// immediately; the resolver has its own retry schedule.
public struct AsyncHTTPClientTransport: HTTPTransport {
    private let client: HTTPClient
    private let timeout: TimeInterval

    /// The largest reply body accepted (a full sync of a very large vault stays far below it).
    public static let maximumBodyBytes = 256 << 20

    /// A transport that fails a request after `timeout` seconds without a byte from the server
    /// (and after four times that in all), with at most `maximumConnectionsPerHost` connections
    /// to one host.
    public init(timeout: TimeInterval = 30, maximumConnectionsPerHost: Int = 16) {
        self.timeout = timeout
        client = Self.clients.machine(for: HTTPTransportSettings(timeout: timeout, maximumConnectionsPerHost: maximumConnectionsPerHost))
    }

    private static let clients = TransportPool<HTTPClient> { settings in
        let timeout = TimeAmount.nanoseconds(Int64((max(settings.timeout, 0.001) * 1e9).rounded()))
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: min(timeout, .seconds(10)), read: timeout, write: timeout),
            decompression: .disabled)
        configuration.httpVersion = .http1Only
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = max(1, settings.maximumConnectionsPerHost)
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
    }

    /// Sends one request over HTTP/1.1 (no redirects followed, no decompression) and returns its
    /// status and whole body, whatever the status. Throws `HTTPTransportFailure`, saying whether
    /// the request may have reached the server, or on a body over ``maximumBodyBytes``.
    public func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportResponse {
        var outgoing = HTTPClientRequest(url: request.url.absoluteString)
        outgoing.method = HTTPMethod(rawValue: request.method)
        for header in request.headers { outgoing.headers.add(name: header.name, value: header.value) }
        if let body = request.body { outgoing.body = .bytes(ByteBuffer(bytes: body)) }
        let deadline = TimeAmount.nanoseconds(Int64((max(request.timeout, 0.001) * 4e9).rounded()))
        var requestLeft = false
        do {
            let response = try await client.execute(outgoing, timeout: deadline)
            requestLeft = true
            var buffer = try await response.body.collect(upTo: Self.maximumBodyBytes)
            let bytes = buffer.readBytes(length: buffer.readableBytes) ?? []
            return HTTPTransportResponse(status: Int(response.status.code), body: Data(bytes))
        } catch {
            throw Self.failure(error, timeout: request.timeout, afterHead: requestLeft)
        }
    }

    /// Classifies a failure: only errors that happen before a connection exists prove that the
    /// request never reached the server.
    static func failure(_ error: any Error, timeout: TimeInterval, afterHead: Bool) -> HTTPTransportFailure {
        if afterHead {
            return HTTPTransportFailure(message: "the reply broke off: \(error)", requestMayHaveArrived: true)
        }
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout:
                return HTTPTransportFailure(message: "could not connect within \(min(timeout, 10)) s", requestMayHaveArrived: false)
            case .readTimeout, .deadlineExceeded:
                return HTTPTransportFailure(message: "timed out after \(timeout) s", requestMayHaveArrived: true)
            case .invalidURL, .emptyHost, .emptyScheme:
                return HTTPTransportFailure(message: "invalid URL: \(error)", requestMayHaveArrived: false)
            default:
                return HTTPTransportFailure(message: "\(error)", requestMayHaveArrived: true)
            }
        }
        if let error = error as? NIOConnectionError {
            return HTTPTransportFailure(message: "cannot connect to \(error.host):\(error.port): \(Self.describe(error))",
                                        requestMayHaveArrived: false)
        }
        if let error = error as? IOError, Self.connectErrnos.contains(error.errnoCode) {
            return HTTPTransportFailure(message: "cannot connect: \(error)", requestMayHaveArrived: false)
        }
        if error is CancellationError {
            return HTTPTransportFailure(message: "cancelled", requestMayHaveArrived: true)
        }
        return HTTPTransportFailure(message: "\(error)", requestMayHaveArrived: true)
    }

    /// `connect(2)` failures: nothing was written to a socket.
    private static let connectErrnos: Set<CInt> = [ECONNREFUSED, ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL]

    private static func describe(_ error: NIOConnectionError) -> String {
        if let dns = error.dnsAError ?? error.dnsAAAAError { return "host not found (\(dns))" }
        if let first = error.connectionErrors.first { return "\(first.error)" }
        return "no address to connect to"
    }
}
