/// The routes of the Bitwarden API that VaultLog speaks, as data: one list that the HTTP client
/// builds its requests from, the emulator routes by, and fault injection names requests with.
/// A new route is one case here, then the client call and the emulator handler that the
/// compiler asks for.
///
/// A pattern is relative to its service (`/identity` or `/api`); `*` stands for one path
/// segment (an id). Matching ignores case, as both servers do.
///
/// ```swift
/// BitwardenEndpoint.updateCipher.path(id)            // "/ciphers/<id>" (under the API base URL)
/// BitwardenEndpoint.updateCipher.description         // "PUT /api/ciphers/*"
/// BitwardenEndpoint.match(method: "PUT", service: .api, segments: ["ciphers", id])  // (.updateCipher, [id])
/// ```
public enum BitwardenEndpoint: String, CaseIterable, Sendable, CustomStringConvertible {
    /// `POST /identity/accounts/prelogin`: the account's KDF settings.
    case prelogin
    /// `POST /identity/accounts/prelogin/password`: the same on newer servers.
    case preloginPassword
    /// `POST /identity/connect/token`: log in (password grant) or refresh a session.
    case token
    /// `POST /api/accounts/prelogin`: the older prelogin route on the API service.
    case apiPrelogin
    /// `GET /api/alive`: the server's clock, no token needed.
    case alive
    /// `GET /api/now`: the same as ``alive``.
    case now
    /// `GET /api/sync`: every item, folder and the profile of the user.
    case sync
    /// `GET /api/accounts/revision-date`: when anything in the account last changed.
    case revisionDate
    /// `GET /api/accounts/profile`.
    case profile
    /// `GET /api/folders`.
    case listFolders
    /// `POST /api/folders`.
    case createFolder
    /// `GET /api/folders/{id}`.
    case getFolder
    /// `PUT /api/folders/{id}`.
    case updateFolder
    /// `POST /api/folders/{id}`: the older form of ``updateFolder``.
    case updateFolderByPost
    /// `DELETE /api/folders/{id}`.
    case deleteFolder
    /// `GET /api/ciphers`: every item of the user.
    case listCiphers
    /// `POST /api/ciphers`: create an item (the server assigns its id).
    case createCipher
    /// `POST /api/ciphers/create`: create an item wrapped with its collections.
    case createCipherWrapped
    /// `GET /api/ciphers/{id}`.
    case getCipher
    /// `GET /api/ciphers/{id}/details`.
    case getCipherDetails
    /// `GET /api/ciphers/{id}/full-details`.
    case getCipherFullDetails
    /// `PUT /api/ciphers/{id}` with `lastKnownRevisionDate`: edit an item.
    case updateCipher
    /// `POST /api/ciphers/{id}`: the older form of ``updateCipher``.
    case updateCipherByPost
    /// `PUT /api/ciphers/{id}/delete`: move an item to the trash.
    case softDeleteCipher
    /// `DELETE /api/ciphers/{id}`: delete an item for good.
    case deleteCipher
    /// `POST /api/ciphers/{id}/delete`: an obsolete alias of ``deleteCipher`` on both servers.
    case deleteCipherByPost
    /// `PUT /api/ciphers/{id}/restore`: take an item out of the trash.
    case restoreCipher
    /// `POST /api/ciphers/{id}/attachment/v2` with `{key, fileName, fileSize}`: announce an
    /// attachment; the reply names its id and where to upload the file. Listed before
    /// ``uploadAttachment`` so that `v2` is never taken for an attachment id.
    case createAttachment
    /// `POST /api/ciphers/{id}/attachment/{attachmentId}`: the file of an announced attachment
    /// (multipart/form-data, field `data`), for servers that take uploads directly.
    case uploadAttachment
    /// `POST /api/ciphers/{id}/attachment`: the older one-step upload (multipart, fields `key`
    /// and `data`, the encrypted file name as the part's file name).
    case createAttachmentLegacy
    /// `GET /api/ciphers/{id}/attachment/{attachmentId}`: the attachment's metadata with a
    /// download URL.
    case getAttachment
    /// `DELETE /api/ciphers/{id}/attachment/{attachmentId}`.
    case deleteAttachment
    /// `POST /api/ciphers/{id}/attachment/{attachmentId}/delete`: the older form of ``deleteAttachment``.
    case deleteAttachmentByPost

    /// The two services of a Bitwarden server (separate base URLs in the cloud, one host with
    /// `/identity` and `/api` prefixes when self-hosted).
    public enum Service: String, Sendable {
        /// Login and prelogin (`/identity`).
        case identity
        /// Everything else (`/api`), with the user's access token.
        case api
    }

    /// The method and the service-relative pattern.
    private var route: (method: String, service: Service, pattern: String) {
        switch self {
        case .prelogin: ("POST", .identity, "accounts/prelogin")
        case .preloginPassword: ("POST", .identity, "accounts/prelogin/password")
        case .token: ("POST", .identity, "connect/token")
        case .apiPrelogin: ("POST", .api, "accounts/prelogin")
        case .alive: ("GET", .api, "alive")
        case .now: ("GET", .api, "now")
        case .sync: ("GET", .api, "sync")
        case .revisionDate: ("GET", .api, "accounts/revision-date")
        case .profile: ("GET", .api, "accounts/profile")
        case .listFolders: ("GET", .api, "folders")
        case .createFolder: ("POST", .api, "folders")
        case .getFolder: ("GET", .api, "folders/*")
        case .updateFolder: ("PUT", .api, "folders/*")
        case .updateFolderByPost: ("POST", .api, "folders/*")
        case .deleteFolder: ("DELETE", .api, "folders/*")
        case .listCiphers: ("GET", .api, "ciphers")
        case .createCipher: ("POST", .api, "ciphers")
        case .createCipherWrapped: ("POST", .api, "ciphers/create")
        case .getCipher: ("GET", .api, "ciphers/*")
        case .getCipherDetails: ("GET", .api, "ciphers/*/details")
        case .getCipherFullDetails: ("GET", .api, "ciphers/*/full-details")
        case .updateCipher: ("PUT", .api, "ciphers/*")
        case .updateCipherByPost: ("POST", .api, "ciphers/*")
        case .softDeleteCipher: ("PUT", .api, "ciphers/*/delete")
        case .deleteCipher: ("DELETE", .api, "ciphers/*")
        // An obsolete alias of the permanent delete on both servers.
        case .deleteCipherByPost: ("POST", .api, "ciphers/*/delete")
        case .restoreCipher: ("PUT", .api, "ciphers/*/restore")
        case .createAttachment: ("POST", .api, "ciphers/*/attachment/v2")
        case .uploadAttachment: ("POST", .api, "ciphers/*/attachment/*")
        case .createAttachmentLegacy: ("POST", .api, "ciphers/*/attachment")
        case .getAttachment: ("GET", .api, "ciphers/*/attachment/*")
        case .deleteAttachment: ("DELETE", .api, "ciphers/*/attachment/*")
        case .deleteAttachmentByPost: ("POST", .api, "ciphers/*/attachment/*/delete")
        }
    }

    /// The HTTP method.
    public var method: String { route.method }
    /// The service the route belongs to.
    public var service: Service { route.service }
    /// The pattern relative to the service, for example `ciphers/*/delete`.
    public var pattern: String { route.pattern }
    /// Whether the request carries the user's access token.
    public var isAuthorized: Bool { service == .api && ![.apiPrelogin, .alive, .now].contains(self) }

    /// `METHOD /service/pattern`, for example `PUT /api/ciphers/*/delete`: the form a fault
    /// injection rule takes.
    public var description: String { "\(method) /\(service.rawValue)/\(pattern)" }

    /// `METHOD /service/path` of one request with its ids in place (unencoded, for messages),
    /// for example `PUT /api/ciphers/4f1c…/delete`.
    public func route(_ ids: String...) -> String {
        var remaining = ids[...]
        let path = pattern.split(separator: "/").map { $0 == "*" && !remaining.isEmpty ? remaining.removeFirst() : String($0) }
        return "\(method) /\(service.rawValue)/" + path.joined(separator: "/")
    }

    /// The path under the service's base URL with each `*` replaced by the next id
    /// (percent-encoded as one segment), for example `/ciphers/<id>/delete`.
    public func path(_ ids: String...) -> String { path(ids: ids) }

    /// ``path(_:)`` with the ids as an array.
    public func path(ids: [String]) -> String {
        var remaining = ids[...]
        let segments = pattern.split(separator: "/").map { part -> String in
            guard part == "*" else { return String(part) }
            precondition(!remaining.isEmpty, "\(self) needs an id for each '*'")
            return Self.encodeSegment(remaining.removeFirst())
        }
        precondition(remaining.isEmpty, "\(self) has fewer '*' than ids given")
        return "/" + segments.joined(separator: "/")
    }

    /// The endpoint a request names and the ids in its `*` segments, or nil for a route this
    /// list does not have. `segments` is the path after the service prefix.
    public static func match(method: String, service: Service, segments: [String]) -> (BitwardenEndpoint, ids: [String])? {
        let method = method.uppercased()
        for endpoint in allCases where endpoint.method == method && endpoint.service == service {
            let parts = endpoint.pattern.split(separator: "/")
            guard parts.count == segments.count else { continue }
            var ids: [String] = []
            var matched = true
            for (part, segment) in zip(parts, segments) {
                if part == "*" {
                    ids.append(segment)
                } else if part.lowercased() != segment.lowercased() {
                    matched = false
                    break
                }
            }
            if matched { return (endpoint, ids) }
        }
        return nil
    }

    /// An id as one path segment: everything but unreserved characters percent-encoded, so an id
    /// can never add a segment or a query.
    static func encodeSegment(_ id: String) -> String {
        var out = ""
        for byte in id.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(Character(Unicode.Scalar(byte)))
            default:
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
