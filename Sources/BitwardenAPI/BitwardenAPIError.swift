import Foundation
@_spi(Tools) import OfflineSync

/// A failed Bitwarden API call, classified for the repository's denylist and the resolver
/// (`ServerErrorKind`):
///
/// | Reply | Kind |
/// |---|---|
/// | 400 whose message contains "out of date" | `ServerErrorKind/staleRevision` |
/// | 404 with an error body; Vaultwarden's 400 "Cipher doesn't exist" / "not owned" / "not write accessible" / "Attachment doesn't exist" | `ServerErrorKind/notFound` |
/// | 401 after one refresh, or a refused refresh | `ServerErrorKind/loginRequired` |
/// | other 4xx, with or without an error body (validation, permissions, an HTML 403 or 413 from a proxy) | `ServerErrorKind/rejected` |
/// | 5xx, 408, 429, a 404 without an error body (a wrong route), transport errors, timeouts, malformed replies | `ServerErrorKind/unavailable` |
public struct BitwardenAPIError: ClassifiedServerError, CustomStringConvertible, Sendable, Equatable {
    /// How the failure is treated (offline, rejected, conflict, ...).
    public let serverErrorKind: ServerErrorKind
    /// The HTTP status, or nil if no response arrived.
    public let status: Int?
    /// The server's message, or what went wrong on the way.
    public let message: String
    /// The request, for example `PUT /api/ciphers/1b2c...`.
    public let route: String
    /// Field errors from the server's `validationErrors` (keys such as `Name`, `Login.Password`).
    public let validationErrors: [String: [String]]
    /// False when the request certainly never reached the server (connection refused, host
    /// not found): a create that failed so was never applied.
    public let requestMayHaveArrived: Bool

    /// Creates an error.
    public init(kind: ServerErrorKind, status: Int?, message: String, route: String, validationErrors: [String: [String]] = [:],
                requestMayHaveArrived: Bool = true) {
        self.serverErrorKind = kind
        self.status = status
        self.message = message
        self.route = route
        self.validationErrors = validationErrors
        self.requestMayHaveArrived = requestMayHaveArrived
    }

    /// The server answered with an HTTP status (counts towards an item's dead-letter limit).
    public var serverAnswered: Bool { status != nil }

    /// True if the server refused an update because its copy changed since `lastKnownRevisionDate`.
    public var isStaleRevision: Bool { serverErrorKind == .staleRevision }

    /// The route, the HTTP status when there is one, the message and any validation errors by
    /// field, followed by what the classification means for the change, e.g.
    /// `[log in again; pending offline changes are kept]`.
    public var description: String {
        var text = "\(route): "
        if let status { text += "HTTP \(status): " }
        text += message
        if !validationErrors.isEmpty {
            let fields = validationErrors.keys.sorted().map { "\($0): \(validationErrors[$0]!.joined(separator: " "))" }
            text += " (" + fields.joined(separator: "; ") + ")"
        }
        switch serverErrorKind {
        case .unavailable where carriesAChange: text += " [server unavailable; the change is kept offline]"
        case .unavailable: text += " [server unavailable; try again when it can be reached]"
        case .loginRequired: text += " [log in again; pending offline changes are kept]"
        case .staleRevision: text += " [the server copy changed; sync, then merge]"
        case .notFound where message.lowercased().contains("invalid folder"):
            text += " [the folder no longer exists on the server]"
        case .notFound: text += " [the item no longer exists on the server]"
        case .rejected: text += " [the server rejected the request]"
        }
        return text
    }

    /// Whether the request would have changed an item (a create, edit, trash move, delete or
    /// restore): only then is "the change is kept offline" true of a failure to reach the server.
    var carriesAChange: Bool {
        let parts = route.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0] != "GET" else { return false }
        return parts[1].hasPrefix("/api/ciphers")
    }

    /// Vaultwarden's 400 messages that mean "no such item for this user".
    static let vaultwardenMissingMessages = [
        "cipher doesn't exist", "cipher is not owned by user", "cipher is not write accessible",
        "cipher can't be deleted by user", "cipher can't be restored by user", "invalid folder",
        "attachment doesn't exist",
    ]

    /// Classifies an HTTP error reply (any status outside 2xx except a 401 still to be retried).
    static func fromResponse(status: Int, body: Data, route: String) -> BitwardenAPIError {
        let parsed = ErrorBody(data: body)
        let message = parsed?.message ?? "HTTP \(status) without an error body"
        let validation = parsed?.validationErrors ?? [:]
        let lowered = message.lowercased()
        let kind: ServerErrorKind
        switch status {
        case 400 where lowered.contains("out of date"):
            kind = .staleRevision
        case 400 where vaultwardenMissingMessages.contains(where: lowered.contains):
            kind = .notFound
        case 404:
            // Only an error body proves the server looked the item up; a bare 404 is a wrong
            // route or a proxy, and must not make the resolver believe the item was deleted.
            kind = parsed == nil ? .unavailable : .notFound
        case 401:
            kind = .loginRequired
        case 408, 429:
            kind = .unavailable
        case 400..<500:
            // The denylist: the server (or a proxy in front of it) received the request and
            // refused it; retrying offline would not change the answer.
            kind = .rejected
        default:
            kind = .unavailable
        }
        let text = parsed == nil && status == 404 ? "no such route (check the server URL)" : message
        return BitwardenAPIError(kind: kind, status: status, message: text, route: route, validationErrors: validation)
    }
}

/// The parts of Bitwarden's `ErrorResponseModel`, Vaultwarden's error body and the OAuth error
/// a client needs. Nil if the body is none of these (HTML from a proxy, empty).
struct ErrorBody {
    var message: String
    var validationErrors: [String: [String]]

    init?(data: Data) {
        guard !data.isEmpty, let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else { return nil }
        func string(_ keys: String...) -> String? {
            for key in keys { if let s = object[key] as? String, !s.isEmpty { return s } }
            return nil
        }
        let nested = (object["errorModel"] ?? object["ErrorModel"]) as? [String: Any]
        let nestedMessage = (nested?["message"] ?? nested?["Message"]) as? String
        var validation: [String: [String]] = [:]
        if let errors = (object["validationErrors"] ?? object["ValidationErrors"]) as? [String: Any] {
            for (key, value) in errors { validation[key] = (value as? [Any])?.compactMap { $0 as? String } ?? [] }
        }
        let isErrorModel = (object["object"] as? String) == "error" || object["message"] != nil || object["Message"] != nil
            || nested != nil || object["error"] is String
        guard isErrorModel else { return nil }
        var message = string("message", "Message") ?? nestedMessage ?? string("error_description", "error") ?? "error"
        if message == "The model state is invalid.", let first = validation.sorted(by: { $0.key < $1.key }).first,
           let detail = first.value.first {
            message += " \(first.key.isEmpty ? "" : first.key + ": ")\(detail)"
        }
        self.message = message
        self.validationErrors = validation
    }
}
