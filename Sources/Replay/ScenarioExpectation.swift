import Foundation

/// A server fault: `failNext` requests matching `method` and `path` answer `status` (the
/// server does nothing); `dropResponseAfterApply` requests are applied but answered by a
/// closed connection; `clear` removes every fault.
public struct ScenarioFault: Codable, Sendable, Equatable {
    /// How many matching requests (1 to 1,000,000) answer ``status`` without being applied.
    public var failNext: Int?
    /// How many matching requests (1 to 1,000,000) are applied, then answered by a closed
    /// connection. Ignored when ``failNext`` is given.
    public var dropResponseAfterApply: Int?
    /// The HTTP method to match; nil matches any.
    public var method: String?
    /// The path pattern to match (`*` matches one segment, a trailing `**` the rest); `{ref}` is
    /// replaced by the item's current id.
    public var path: String?
    /// With ``failNext``: the HTTP status to answer, 100 to 599 (default 500).
    public var status: Int?
    /// With `failNext`: answer `status` with these raw bytes instead of the server's error body
    /// (a proxy in front of the server, such as an HTML 403); the request is not applied.
    public var body: String?
    /// `true` removes every fault; the other fields are then ignored.
    public var clear: Bool?

    /// A fault from its fields; every field defaults to nil (not given).
    public init(failNext: Int? = nil, dropResponseAfterApply: Int? = nil, method: String? = nil, path: String? = nil,
                status: Int? = nil, body: String? = nil, clear: Bool? = nil) {
        self.failNext = failNext
        self.dropResponseAfterApply = dropResponseAfterApply
        self.method = method
        self.path = path
        self.status = status
        self.body = body
        self.clear = clear
    }
}

/// What must hold at the end. Every part is optional; what is given is compared exactly.
public struct ScenarioExpectation: Codable, Sendable, Equatable {
    /// Outcome event names per item ref, in log order (`createPlanned` excluded: it is a plan,
    /// not an outcome).
    public var outcomes: [String: [String]]?
    /// Pending item count per user ref.
    public var pending: [String: Int]?
    /// Dead-lettered item refs per user ref.
    public var deadLetters: [String: [String]]?
    /// The server's items of each user ref (decrypted), as a multiset: every server item
    /// matches exactly one expected item; fields not given are not compared.
    public var server: [String: [ScenarioItemExpectation]]?
    /// The results of the `sync` steps in order: `applied`, `partial` (applied with items still
    /// pending), `aborted` or `crashed`.
    public var syncResults: [String]?
    /// The decrypted names of each user ref's folders on the server, in any order.
    public var folders: [String: [String]]? = nil
    /// The decrypted names of the folders each user ref's device lists
    /// (`VaultLogStore.localFolders(userId:)`: the server's as kept on the device, with the
    /// device's pending folder changes), in any order.
    public var deviceFolders: [String: [String]]? = nil

    /// An expectation from its parts; a part left nil is not compared.
    public init(outcomes: [String: [String]]? = nil, pending: [String: Int]? = nil, deadLetters: [String: [String]]? = nil,
                server: [String: [ScenarioItemExpectation]]? = nil, syncResults: [String]? = nil) {
        self.outcomes = outcomes
        self.pending = pending
        self.deadLetters = deadLetters
        self.server = server
        self.syncResults = syncResults
    }
}

/// An expected server item; only the given fields are compared.
public struct ScenarioItemExpectation: Codable, Sendable, Equatable, CustomStringConvertible {
    /// The exact name.
    public var name: String?
    /// The name must start with this (backups carry a timestamp).
    public var namePrefix: String?
    /// The login's password.
    public var password: String?
    /// The notes.
    public var notes: String?
    /// The login's username.
    public var username: String?
    /// Passwords of the history, newest first.
    public var passwordHistory: [String]?
    /// In the trash.
    public var deleted: Bool?
    /// The folder's ref (a `createFolder` or `folderCreate` step's), when the item is in one;
    /// `""` expects the item in no folder.
    public var folder: String?
    /// A favourite (an absent favourite flag is false; observed items give it only when true).
    public var favorite: Bool?
    /// The item's attachments, each with its decrypted contents, in any order (observed items
    /// give them only when the item has any; `[]` expects none).
    public var attachments: [ScenarioAttachment]? = nil

    /// An expected item from the fields to compare; every field defaults to nil (not compared).
    public init(name: String? = nil, namePrefix: String? = nil, password: String? = nil, notes: String? = nil,
                passwordHistory: [String]? = nil, deleted: Bool? = nil, folder: String? = nil, username: String? = nil,
                favorite: Bool? = nil) {
        self.name = name
        self.namePrefix = namePrefix
        self.password = password
        self.notes = notes
        self.passwordHistory = passwordHistory
        self.deleted = deleted
        self.folder = folder
        self.username = username
        self.favorite = favorite
    }

    /// The given fields only, as `{name="…", name^="…", password="…", …}`, for mismatch reports.
    public var description: String {
        var parts: [String] = []
        if let name { parts.append("name=\(name.debugDescription)") }
        if let namePrefix { parts.append("name^=\(namePrefix.debugDescription)") }
        if let password { parts.append("password=\(password.debugDescription)") }
        if let notes { parts.append("notes=\(notes.debugDescription)") }
        if let username { parts.append("username=\(username.debugDescription)") }
        if let passwordHistory { parts.append("history=\(passwordHistory)") }
        if let deleted { parts.append("deleted=\(deleted)") }
        if let folder { parts.append("folder=\(folder.debugDescription)") }
        if let favorite { parts.append("favorite=\(favorite)") }
        if let attachments { parts.append("attachments=[\(attachments.sorted().map(\.description).joined(separator: ", "))]") }
        return "{" + parts.joined(separator: ", ") + "}"
    }
}
