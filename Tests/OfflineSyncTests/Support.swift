import Foundation
import Synchronization
import VaultCrypto
import VaultModel
@_spi(Tools) @testable import OfflineSync
import VaultLogTesting
import VaultLogTestSupport

/// The server rejected the request (Bitwarden's `ServerError`: an error model in the body).
struct TestServerError: ClassifiedServerError, Equatable {
    var serverErrorKind: ServerErrorKind { .rejected }
}

/// An HTTP status the client saw (Bitwarden's `ResponseValidationError`).
struct HTTPStatusError: ClassifiedServerError, Equatable {
    let status: Int
    var serverErrorKind: ServerErrorKind { status >= 500 ? .unavailable : (status == 404 ? .notFound : .rejected) }
    /// The server answered: counts towards an item's dead-letter limit.
    var serverAnswered: Bool { true }
}

/// A transport failure (`URLError(.notConnectedToInternet)`).
struct NotConnectedError: ClassifiedServerError, Equatable {
    var serverErrorKind: ServerErrorKind { .unavailable }
    /// No connection: the request never left (a create that failed so is certainly not on the server).
    var requestMayHaveArrived: Bool { false }
}

/// Something nobody classified.
struct UnknownError: Error, Equatable {}

/// A scripted in-memory cipher server for repository unit tests (HTTP is tested against the
/// emulator elsewhere). Each call consumes the next scripted failure, if any.
final class ScriptedServer: CipherServer, Sendable {
    struct State {
        var ciphers: [String: Cipher] = [:]
        var failures: [any Error] = []
        var calls: [String] = []
        var nextId = 1
        var clockTicks: Int64 = 0
    }
    let state = Mutex(State())

    func fail(with error: any Error, times: Int = 1) {
        state.withLock { $0.failures += Array(repeating: error, count: times) }
    }

    var calls: [String] { state.withLock { $0.calls } }
    func cipher(_ id: String) -> Cipher? { state.withLock { $0.ciphers[id] } }
    func put(_ cipher: Cipher) { state.withLock { $0.ciphers[cipher.id!] = cipher } }

    private func call(_ name: String) throws {
        let failure: (any Error)? = state.withLock { state in
            state.calls.append(name)
            return state.failures.isEmpty ? nil : state.failures.removeFirst()
        }
        if let failure { throw failure }
    }

    private func bump(_ cipher: inout Cipher) {
        let ticks = state.withLock { state -> Int64 in state.clockTicks += 10_000_000; return state.clockTicks }
        cipher.revisionDate = BitwardenDate(ticksSince1970: 17_672_256_000_000_000 + ticks)
    }

    func getCipher(id: String) async throws -> Cipher {
        try call("get")
        guard let cipher = cipher(id) else { throw HTTPStatusError(status: 404) }
        return cipher
    }

    func createCipher(_ cipher: Cipher) async throws -> Cipher {
        try call("create")
        var created = cipher
        created.id = state.withLock { state -> String in
            defer { state.nextId += 1 }
            return String(format: "5e7e7000-0000-4000-8000-%012d", state.nextId)
        }
        bump(&created)
        put(created)
        return created
    }

    func updateCipher(_ cipher: Cipher, lastKnownRevisionDate: BitwardenDate?) async throws -> Cipher {
        try call("update")
        guard let id = cipher.id, self.cipher(id) != nil else { throw HTTPStatusError(status: 404) }
        var updated = cipher
        bump(&updated)
        put(updated)
        return updated
    }

    func softDeleteCipher(id: String) async throws {
        try call("softDelete")
        guard var cipher = cipher(id) else { throw HTTPStatusError(status: 404) }
        cipher.deletedDate = cipher.revisionDate
        put(cipher)
    }

    func restoreCipher(id: String) async throws -> Cipher {
        try call("restore")
        guard var cipher = cipher(id) else { throw HTTPStatusError(status: 404) }
        guard cipher.deletedDate != nil else { return cipher }
        cipher.deletedDate = nil
        bump(&cipher)
        put(cipher)
        return cipher
    }

    func deleteCipher(id: String) async throws {
        try call("delete")
        guard cipher(id) != nil else { throw HTTPStatusError(status: 404) }
        _ = state.withLock { $0.ciphers.removeValue(forKey: id) }
    }

    func sync() async throws -> SyncSnapshot {
        try call("sync")
        return SyncSnapshot(ciphers: state.withLock { Array($0.ciphers.values) })
    }

    // Attachments are tested against the emulator (ResolverTests); this script has none.
    func downloadAttachment(cipherId: String, attachmentId: String) async throws -> [UInt8] {
        try call("downloadAttachment")
        throw HTTPStatusError(status: 404)
    }
    func createAttachment(cipherId: String, fileName: EncString, key: EncString, encryptedData: [UInt8]) async throws -> Cipher {
        try call("createAttachment")
        throw HTTPStatusError(status: 404)
    }
    func deleteAttachment(cipherId: String, attachmentId: String) async throws {
        try call("deleteAttachment")
        throw HTTPStatusError(status: 404)
    }
}

/// A store in a temp dir with one unlocked user and a deterministic clock, ids and IVs.
struct Harness {
    let dir = TemporaryDirectory("offlinesync")
    let clock = ManualClock()
    let store: VaultLogStore
    let server = ScriptedServer()
    let userId: String
    let userKey: SymmetricCryptoKey

    init(userId: String = "user-a", seed: UInt64 = 1, checkpointInterval: Int = 1000, pendingCheckpointInterval: Int = 10_000) throws {
        var options = VaultLogStoreOptions()
        options.dependencies = .deterministic(seed: seed, clock: clock)
        options.checkpointInterval = checkpointInterval
        options.pendingCheckpointInterval = pendingCheckpointInterval
        store = try VaultLogStore(path: dir.path, options: options)
        self.userId = userId
        userKey = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: seed &+ 1000))
        store.unlock(userId: userId, userKey: userKey)
    }

    func repository(flags: OfflineSyncFlags = OfflineSyncFlags(), userId: String? = nil) -> VaultRepository {
        VaultRepository(store: store, userId: userId ?? self.userId, server: server, flags: flags)
    }

    static func login(_ name: String, password: String?, id: String? = nil, organizationId: String? = nil) -> CipherView {
        CipherView(type: .login, name: name, notes: "notes of \(name)", id: id, organizationId: organizationId,
                   login: LoginView(username: "user@example.com", password: password))
    }

    /// An item that exists on the server and in the local store (as after a sync).
    func seedSynced(_ name: String, password: String = "pw-0", organizationId: String? = nil) async throws -> CipherView {
        let view = Self.login(name, password: password, organizationId: organizationId)
        var encrypted = try view.encrypt(userKey: userKey, random: SeededRandomSource(seed: 5))
        encrypted.id = "server-\(name)"
        encrypted.revisionDate = try BitwardenDate("2026-01-01T00:00:00.0000000Z")
        server.put(encrypted)
        try await store.applyLocal([.upsert(encrypted)], userId: userId)
        return try encrypted.decrypt(userKey: userKey)
    }

    func pending(_ id: String) throws -> PendingChange? { try store.projection(userId: userId).pending[id] }
    func local(_ id: String) throws -> Cipher? { try store.localCipher(userId: userId, id: id) }
    func eventCount() throws -> Int { try store.log.eventCount() }
}

/// Runs `body` and captures its result or error.
func capture<T>(_ body: () async throws -> T) async -> Result<T, any Error> {
    do { return .success(try await body()) } catch { return .failure(error) }
}
