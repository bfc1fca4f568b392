import Foundation
import VaultJSON
import VaultModel

/// One HTTP request, decoupled from Hummingbird so the routing logic is plain code; also what
/// ``BitwardenEmulator/respond(to:)`` answers in process.
///
/// ```swift
/// let response = emulator.respond(to: EmulatorRequest(method: "POST", path: "/identity/accounts/prelogin",
///                                                     body: Array(#"{"email":"a@example.com"}"#.utf8)))
/// response.status   // 200
/// ```
public struct EmulatorRequest: Sendable {
    /// The HTTP method (`GET`, `POST`...).
    public var method: String
    /// The path without the query (`/api/ciphers/ID`).
    public var path: String
    /// Query parameters.
    public var query: [String: String]
    /// Header names lowercased.
    public var headers: [String: String]
    /// The request body.
    public var body: [UInt8]

    /// A request; header names are lowercased here.
    public init(method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:], body: [UInt8] = []) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { _, last in last })
        self.body = body
    }

    func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// One HTTP response (an `Error` too, so lookups can return it as their failure).
public struct EmulatorResponse: Sendable, Error {
    /// The HTTP status code.
    public var status: Int
    /// Header fields in order.
    public var headers: [(String, String)] = []
    /// The body (JSON for every route that has one).
    public var body: [UInt8] = []

    static func json(_ status: Int, _ value: JSONValue) -> EmulatorResponse {
        let data = (try? value.serializedJSON()) ?? Data("null".utf8)
        return EmulatorResponse(status: status, headers: [("Content-Type", "application/json; charset=utf-8")], body: Array(data))
    }

    static func json(_ status: Int, _ object: JSONObject) -> EmulatorResponse { json(status, .object(object)) }

    static func empty(_ status: Int = 200) -> EmulatorResponse { EmulatorResponse(status: status) }
}

/// Error bodies in each server's shape (`Docs/Emulator.md`).
enum ErrorBodies {
    /// Bitwarden's `ErrorResponseModel`, or Vaultwarden's `err!` body.
    static func error(_ flavor: EmulatorFlavor, status: Int, message: String, validation: ValidationErrors? = nil) -> EmulatorResponse {
        switch flavor {
        case .bitwarden:
            let body: JSONObject = [
                "object": .string("error"),
                "message": .string(message),
                "validationErrors": validation?.json ?? .null,
                "exceptionMessage": .null,
                "exceptionStackTrace": .null,
                "innerExceptionMessage": .null,
            ]
            return .json(status, body)
        case .vaultwarden:
            let body: JSONObject = [
                "message": .string(message),
                "validationErrors": validation?.json ?? .object(["": .array([.string(message)])]),
                "errorModel": .object(["message": .string(message), "object": .string("error")]),
                "error": .string(""),
                "error_description": .string(""),
                "exceptionMessage": .null,
                "exceptionStackTrace": .null,
                "innerExceptionMessage": .null,
                "object": .string("error"),
            ]
            return .json(status, body)
        }
    }

    /// 400 "The model state is invalid." with field errors (Bitwarden) or the first error (Vaultwarden).
    static func invalidModel(_ flavor: EmulatorFlavor, _ errors: ValidationErrors) -> EmulatorResponse {
        switch flavor {
        case .bitwarden: error(flavor, status: 400, message: "The model state is invalid.", validation: errors)
        case .vaultwarden: error(flavor, status: 400, message: errors.firstMessage ?? "Invalid data", validation: errors)
        }
    }

    /// 404 for an unknown or foreign resource (Bitwarden's `NotFoundException`).
    static func notFound(_ flavor: EmulatorFlavor) -> EmulatorResponse {
        error(flavor, status: 404, message: "Resource not found.")
    }

    /// A route that does not exist: Bitwarden answers 404 with no body, Vaultwarden Rocket's catcher.
    static func noRoute(_ flavor: EmulatorFlavor, path: String) -> EmulatorResponse {
        switch flavor {
        case .bitwarden: return .empty(404)
        case .vaultwarden:
            return .json(404, ["error": .object([
                "code": .integer(404), "reason": .string("Not Found"),
                "description": .string("The requested resource could not be found: \(path)"),
            ])])
        }
    }

    /// 401: Bitwarden's JwtBearer middleware sends no body; Vaultwarden's guard a short message.
    static func unauthorized(_ flavor: EmulatorFlavor, reason: String) -> EmulatorResponse {
        switch flavor {
        case .bitwarden:
            return EmulatorResponse(status: 401, headers: [("WWW-Authenticate", "Bearer error=\"invalid_token\", error_description=\"\(reason)\"")])
        case .vaultwarden:
            var response = error(flavor, status: 401, message: reason)
            response.headers.append(("WWW-Authenticate", "Bearer"))
            return response
        }
    }

    /// OAuth-style 400 from `/identity/connect/token`.
    static func oauth(_ error: String, description: String, message: String?) -> EmulatorResponse {
        var body: JSONObject = ["error": .string(error), "error_description": .string(description)]
        if let message {
            body["ErrorModel"] = .object(["Message": .string(message), "Object": .string("error")])
        }
        return .json(400, body)
    }
}

/// `application/x-www-form-urlencoded` parsing for the token endpoint.
enum FormEncoding {
    static func parse(_ bytes: [UInt8]) -> [String: String] {
        var out: [String: String] = [:]
        for pair in String(decoding: bytes, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = decode(parts[0])
            let value = parts.count > 1 ? decode(parts[1]) : ""
            out[key] = value
        }
        return out
    }

    private static func decode(_ s: Substring) -> String {
        let plus = s.replacingOccurrences(of: "+", with: " ")
        return plus.removingPercentEncoding ?? plus
    }
}

/// Matches a method and path segments against the emulator's own admin patterns such as
/// `ciphers/*/edit`, where `*` captures one segment (the syntax of ``BitwardenEndpoint`` and of
/// fault rules).
struct RoutePath {
    let method: String
    let segments: [String]

    func match(_ method: String, _ pattern: String) -> [String]? {
        guard method == self.method else { return nil }
        let parts = pattern.split(separator: "/")
        guard parts.count == segments.count else { return nil }
        var captured: [String] = []
        for (part, segment) in zip(parts, segments) {
            if part == "*" {
                captured.append(segment)
            } else if part.lowercased() != segment.lowercased() {
                return nil
            }
        }
        return captured
    }

    func matches(_ method: String, _ pattern: String) -> Bool { match(method, pattern) != nil }
}
