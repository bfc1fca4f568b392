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

extension BitwardenEmulator {
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

    func respond(to request: Request, context: EmulatorContext) async throws -> Response {
        let path = request.uri.path
        let method = request.method.rawValue
        if path == "/admin" || path.hasPrefix("/admin/") {
            return Self.hbResponse(await admin(try await Self.collect(request, context, limit: configuration.maximumBodyBytes)))
        }
        let limit = bodyLimit(method: method, path: path)
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
            _ = try? await Self.collect(request, context, limit: limit)
            record(request, status: nil, fault: decision.failure, offline: nil)
            return Self.truncatedResponse(EmulatorResponse.empty(200), channel: context.channel,
                                          reset: decision.failure == .resetConnection)
        case .applyThenDropResponse?:
            let emulatorRequest = try await Self.collect(request, context, limit: limit)
            let response = core.handle(emulatorRequest)
            record(request, status: response.status, fault: decision.failure, offline: nil)
            configuration.logger.debug("emulator: applied, dropping response",
                                       metadata: ["route": "\(method) \(path)", "status": "\(response.status)"])
            return Self.truncatedResponse(response, channel: context.channel, reset: false)
        case .applyThenReply(let status, let body)?:
            let emulatorRequest = try await Self.collect(request, context, limit: limit)
            _ = core.handle(emulatorRequest)
            record(request, status: status, fault: decision.failure, offline: nil)
            return Self.hbResponse(EmulatorResponse(status: status, headers: [("Content-Type", "application/json; charset=utf-8")], body: Array(body.utf8)))
        case .reply(let status, let body)?:
            _ = try? await Self.collect(request, context, limit: limit)
            record(request, status: status, fault: decision.failure, offline: nil)
            return Self.hbResponse(EmulatorResponse(status: status, headers: [("Content-Type", "text/html; charset=utf-8")], body: Array(body.utf8)))
        case .redirect(let status, let location)?:
            _ = try? await Self.collect(request, context, limit: limit)
            record(request, status: status, fault: decision.failure, offline: nil)
            return Self.hbResponse(EmulatorResponse(status: status, headers: [("Location", location)], body: []))
        case nil:
            let emulatorRequest: EmulatorRequest
            do {
                emulatorRequest = try await Self.collect(request, context, limit: limit)
            } catch {
                return Self.hbResponse(ErrorBodies.error(configuration.flavor, status: 413,
                    message: "The request body exceeds \(limit) bytes."))
            }
            let response = core.handle(emulatorRequest)
            record(request, status: response.status, fault: nil, offline: nil)
            return Self.hbResponse(response)
        }
    }

    struct DroppedConnection: Error {}

    /// The most body a request may carry: ``EmulatorConfiguration/maximumBodyBytes``, or for the
    /// two attachment uploads enough for the largest attachment file and its multipart framing
    /// (the handler then refuses a file over ``EmulatorConfiguration/maximumAttachmentBytes``
    /// with a 413 that says so).
    func bodyLimit(method: String, path: String) -> Int {
        let segments = path.split(separator: "/").map(String.init)
        guard segments.first == "api",
              let (endpoint, _) = BitwardenEndpoint.match(method: method, service: .api, segments: Array(segments.dropFirst())) else {
            return configuration.maximumBodyBytes
        }
        switch endpoint {
        case .uploadAttachment, .createAttachmentLegacy:
            return max(configuration.maximumBodyBytes, configuration.maximumAttachmentBytes + 64 * 1024)
        case .prelogin, .preloginPassword, .token, .apiPrelogin, .alive, .now, .sync, .revisionDate, .profile, .listFolders,
             .createFolder, .getFolder, .updateFolder, .updateFolderByPost, .deleteFolder, .listCiphers, .createCipher,
             .createCipherWrapped, .getCipher, .getCipherDetails, .getCipherFullDetails, .updateCipher, .updateCipherByPost,
             .softDeleteCipher, .deleteCipher, .deleteCipherByPost, .restoreCipher, .createAttachment, .getAttachment,
             .deleteAttachment, .deleteAttachmentByPost:
            return configuration.maximumBodyBytes
        }
    }

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
        // HTTP/1's Host arrives as the request's authority, not as a header field.
        if headers["host"] == nil, let authority = request.head.authority { headers["host"] = authority }
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

    /// One log line: method, path, status (or "no reply") and the fault in brackets, if any.
    public var description: String {
        "\(method) \(path) → \(status.map(String.init) ?? "no reply")" + (fault.map { " [\($0)]" } ?? "")
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
