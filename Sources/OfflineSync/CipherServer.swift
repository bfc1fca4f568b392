import Foundation
import VaultCrypto
import VaultModel

/// How a server-side failure is classified. The repository's denylist and the resolver decide
/// on this alone.
public enum ServerErrorKind: Sendable, Equatable {
    /// The server received the request and rejected it (error model, HTTP 4xx, client-side
    /// validation). Never a reason to save offline.
    case rejected
    /// The item does not exist on the server (404, Vaultwarden's 400 "Cipher doesn't exist").
    case notFound
    /// The server copy changed since `lastKnownRevisionDate` (400 "out of date").
    case staleRevision
    /// The session is gone; the user must log in again.
    case loginRequired
    /// The server could not be reached or failed (5xx, transport, timeout, malformed reply).
    case unavailable
}

/// An error that knows its ``ServerErrorKind``. Errors that do not conform are treated as
/// ``ServerErrorKind/unavailable`` (the denylist: everything unknown means offline).
public protocol ClassifiedServerError: Error {
    /// How the failure is classified; the repository and the resolver decide on this.
    var serverErrorKind: ServerErrorKind { get }
    /// Whether the request may have reached the server, so it may have been applied although
    /// no answer says so (a lost response, a timeout). False only when it certainly did not
    /// leave the device (connection refused, no route, offline mode). Default: true.
    var requestMayHaveArrived: Bool { get }
    /// Whether the server itself answered (an HTTP status) rather than being out of reach.
    /// Only such answers count towards an item's dead-letter limit. Default: true unless
    /// ``ServerErrorKind/unavailable``.
    var serverAnswered: Bool { get }
}

extension ClassifiedServerError {
    /// True: unless an error says otherwise, the request may have reached the server.
    public var requestMayHaveArrived: Bool { true }
    /// True unless the kind is ``ServerErrorKind/unavailable``.
    public var serverAnswered: Bool { serverErrorKind != .unavailable }
}

extension Error {
    /// The classification of any error (unknown errors count as unavailable).
    public var serverErrorKind: ServerErrorKind {
        (self as? any ClassifiedServerError)?.serverErrorKind ?? .unavailable
    }

    /// Whether the request may have reached the server (unknown errors: yes).
    public var requestMayHaveArrived: Bool {
        (self as? any ClassifiedServerError)?.requestMayHaveArrived ?? true
    }

    /// Whether this failure is an answer about the item, counted towards its dead-letter
    /// limit: a server's reply, or an error of the item itself (it cannot be decrypted or
    /// encoded). A server out of reach is not: a device offline for a day must not
    /// dead-letter its edits.
    /// A cancelled request (`CancellationError`) is not either: the caller gave up, the server
    /// said nothing.
    public var countsAsAttempt: Bool {
        if self is CancellationError { return false }
        return (self as? any ClassifiedServerError)?.serverAnswered ?? true
    }
}

/// A simple classified error, for servers and fakes that have nothing richer.
public struct ServerFailure: ClassifiedServerError, Equatable, CustomStringConvertible {
    /// How the resolver and the repository treat the failure.
    public let serverErrorKind: ServerErrorKind
    /// What happened, for logs and the item's `lastError`.
    public let message: String
    /// Whether the request may have been applied although no answer says so.
    public let requestMayHaveArrived: Bool

    /// `mayHaveArrived: false` says the request certainly never left the device.
    public init(_ kind: ServerErrorKind, _ message: String, mayHaveArrived: Bool = true) {
        self.serverErrorKind = kind
        self.message = message
        self.requestMayHaveArrived = mayHaveArrived
    }

    /// The kind and the message, e.g. `"server unavailable: the server is not reachable (offline mode)"`.
    public var description: String { "server \(serverErrorKind): \(message)" }
}

/// The result of a full sync (`GET /api/sync`), what the local store needs.
public struct SyncSnapshot: Sendable {
    /// Every item of the user, encrypted.
    public var ciphers: [Cipher]
    /// Folder ids (backups keep their folder).
    public var folderIds: [String]
    /// The user's folders with their encrypted names, when the server port returns them: the
    /// sync keeps them on the device, so the app lists folders offline
    /// (`VaultLogStore.localFolders(userId:)`). Nil leaves the folders kept on the device as they are.
    public var folders: [ServerFolder]?

    /// A sync result of `ciphers`, with the ids of the user's folders.
    public init(ciphers: [Cipher], folderIds: [String] = []) {
        self.ciphers = ciphers
        self.folderIds = folderIds
    }

    /// A sync result of `ciphers` and the user's `folders`.
    public init(ciphers: [Cipher], folders: [ServerFolder]) {
        self.ciphers = ciphers
        self.folderIds = folders.map(\.id)
        self.folders = folders
    }
}

/// The server port: the cipher API the repository, the resolver and sync need. The HTTP
/// implementation is `BitwardenClient` (module BitwardenAPI); tests may script their own.
public protocol CipherServer: Sendable {
    /// `GET /api/ciphers/{id}`.
    func getCipher(id: String) async throws -> Cipher
    /// `POST /api/ciphers`; the server assigns the id.
    func createCipher(_ cipher: Cipher) async throws -> Cipher
    /// `PUT /api/ciphers/{id}` with `lastKnownRevisionDate`.
    func updateCipher(_ cipher: Cipher, lastKnownRevisionDate: BitwardenDate?) async throws -> Cipher
    /// `PUT /api/ciphers/{id}/delete` (to the trash).
    func softDeleteCipher(id: String) async throws
    /// `DELETE /api/ciphers/{id}` (permanent).
    func deleteCipher(id: String) async throws
    /// `PUT /api/ciphers/{id}/restore` (out of the trash); returns the item with its new
    /// revision (unchanged when it was not in the trash).
    func restoreCipher(id: String) async throws -> Cipher
    /// `GET /api/sync`.
    func sync() async throws -> SyncSnapshot
    /// `GET /api/accounts/revision-date`: when anything in the account last changed, or nil
    /// when the server cannot say (then every sync fetches).
    func accountRevisionDate() async throws -> Date?
    /// The attachment's file as the server stores it, still encrypted (a binary
    /// `EncArrayBuffer` under the attachment's own key): metadata, then the download.
    func downloadAttachment(cipherId: String, attachmentId: String) async throws -> [UInt8]
    /// Adds an attachment to an item (announcement, then upload); the arguments are already
    /// encrypted. Returns the item with the new attachment and its new `revisionDate`.
    func createAttachment(cipherId: String, fileName: EncString, key: EncString, encryptedData: [UInt8]) async throws -> Cipher
    /// `DELETE /api/ciphers/{id}/attachment/{attachmentId}`.
    func deleteAttachment(cipherId: String, attachmentId: String) async throws
}

extension CipherServer {
    /// Unknown: a non-forced sync fetches anyway.
    public func accountRevisionDate() async throws -> Date? { nil }
}

/// A server port that is never reachable: every call fails as ``ServerErrorKind/unavailable``,
/// so every edit is saved offline. For an app in airplane mode, for tools, and for tests.
public struct UnreachableServer: CipherServer {
    /// A server port that fails every call as unreachable.
    public init() {}

    private func fail() -> ServerFailure { ServerFailure(.unavailable, "the server is not reachable (offline mode)", mayHaveArrived: false) }

    /// Always throws a ``ServerFailure`` of kind ``ServerErrorKind/unavailable`` that was never sent.
    public func getCipher(id: String) async throws -> Cipher { throw fail() }
    /// Always throws a ``ServerFailure`` of kind ``ServerErrorKind/unavailable`` that was never sent.
    public func createCipher(_ cipher: Cipher) async throws -> Cipher { throw fail() }
    /// Always throws a ``ServerFailure`` of kind ``ServerErrorKind/unavailable`` that was never sent.
    public func updateCipher(_ cipher: Cipher, lastKnownRevisionDate: BitwardenDate?) async throws -> Cipher { throw fail() }
    /// Always throws a ``ServerFailure`` of kind ``ServerErrorKind/unavailable`` that was never sent.
    public func softDeleteCipher(id: String) async throws { throw fail() }
    /// Always throws a ``ServerFailure`` of kind ``ServerErrorKind/unavailable`` that was never sent.
    public func deleteCipher(id: String) async throws { throw fail() }
    /// Always throws a ``ServerFailure`` of kind ``ServerErrorKind/unavailable`` that was never sent.
    public func restoreCipher(id: String) async throws -> Cipher { throw fail() }
    /// Always throws a ``ServerFailure`` of kind ``ServerErrorKind/unavailable`` that was never sent.
    public func sync() async throws -> SyncSnapshot { throw fail() }
}
