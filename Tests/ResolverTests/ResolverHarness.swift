import BitwardenAPI
import BitwardenEmulator
import Foundation
import Synchronization
import Testing
import VaultCrypto
import VaultModel
@_spi(Tools) @testable import OfflineSync
import VaultLogTesting
import VaultLogTestSupport

/// A simulated crash: thrown from an `EffectObservingServer`, it stops the run without recording.
struct SimulatedCrash: ResolutionInterruption {}

/// A device with a store in a temp dir, logged in to an emulator over loopback HTTP, with a
/// hand-moved clock shared by device and server, and seeded ids and IVs.
final class ResolverHarness: @unchecked Sendable {
    let dir: TemporaryDirectory
    let clock: VaultLogTesting.ManualClock
    let emulator: BitwardenEmulator
    let client: BitwardenClient
    let email = "alice@example.com"
    let password = "correct horse battery staple"
    let userId: String
    let userKey: SymmetricCryptoKey
    let seed: UInt64
    private(set) var store: VaultLogStore

    private init(dir: TemporaryDirectory, clock: VaultLogTesting.ManualClock, emulator: BitwardenEmulator, client: BitwardenClient,
                 userId: String, userKey: SymmetricCryptoKey, seed: UInt64, store: VaultLogStore) {
        self.dir = dir
        self.clock = clock
        self.emulator = emulator
        self.client = client
        self.userId = userId
        self.userKey = userKey
        self.seed = seed
        self.store = store
    }

    static func make(flavor: EmulatorFlavor = .bitwarden, seed: UInt64 = 1) async throws -> ResolverHarness {
        let clock = VaultLogTesting.ManualClock()
        var configuration = EmulatorConfiguration()
        configuration.flavor = flavor
        configuration.now = { clock.now }
        configuration.random = SeededRandomSource(seed: seed &+ 7)
        let emulator = BitwardenEmulator(configuration: configuration)
        let url = try await emulator.start()
        let harnessEmail = "alice@example.com"
        try emulator.createAccount(email: harnessEmail, password: "correct horse battery staple", iterations: 5000)
        let client = BitwardenClient(configuration: .selfHosted(url))
        let login = try await client.login(email: harnessEmail, password: "correct horse battery staple")
        let dir = TemporaryDirectory("resolver", create: true)
        let store = try openStore(dir.path, clock: clock, seed: seed)
        store.unlock(userId: login.userId, userKey: login.userKey)
        return ResolverHarness(dir: dir, clock: clock, emulator: emulator, client: client, userId: login.userId,
                               userKey: login.userKey, seed: seed, store: store)
    }

    static func openStore(_ path: String, clock: VaultLogTesting.ManualClock, seed: UInt64) throws -> VaultLogStore {
        var options = VaultLogStoreOptions()
        options.dependencies = .deterministic(seed: seed, clock: clock)
        return try VaultLogStore(path: path, options: options)
    }

    deinit {
        let emulator = self.emulator
        Task { await emulator.stop() }
    }

    func stop() async { await emulator.stop() }

    // MARK: Parts

    func repository(flags: OfflineSyncFlags = OfflineSyncFlags()) -> VaultRepository {
        VaultRepository(store: store, userId: userId, server: client, flags: flags)
    }

    /// The serial resolver unless configured otherwise; short backoff.
    func resolver(server: (any CipherServer)? = nil, _ configure: (inout ResolverOptions) -> Void = { _ in }) -> OfflineSyncResolver {
        var options = ResolverOptions()
        options.concurrency = 1
        options.jitter = 0
        options.backoffBase = 1
        configure(&options)
        return OfflineSyncResolver(store: store, server: server ?? client, options: options)
    }

    func syncService(flags: OfflineSyncFlags = OfflineSyncFlags(), server: (any CipherServer)? = nil,
                     _ configure: (inout ResolverOptions) -> Void = { _ in }) -> SyncService {
        SyncService(store: store, server: server ?? client, resolver: resolver(server: server, configure), flags: flags)
    }

    /// Drops every in-memory state of the device and opens the store again (a crash).
    func reopen() throws {
        store.close()
        store = try Self.openStore(dir.path, clock: clock, seed: seed &+ 100)
        store.unlock(userId: userId, userKey: userKey)
    }

    // MARK: Network

    /// The server resets every connection (the device's requests fail as "unavailable").
    func goOffline() { emulator.faults.offline = .resetConnections }
    func goOnline() { emulator.faults.offline = nil }

    // MARK: Items

    static func login(_ name: String, password: String, notes: String? = nil) -> CipherView {
        CipherView(type: .login, name: name, notes: notes ?? "notes of \(name)",
                   login: LoginView(username: "alice", password: password))
    }

    /// Creates an item online (as after a sync: on the server and in the local store).
    func seedSynced(_ name: String, password: String = "pw-0") async throws -> CipherView {
        clock.advance(by: 1)
        guard case .online(let created?) = try await repository().addCipher(Self.login(name, password: password)) else {
            throw HarnessError("seeding \(name) did not reach the server")
        }
        return try created.decrypt(userKey: userKey)
    }

    /// An offline edit of `view`'s password (the device is offline while it is saved).
    @discardableResult
    func editOffline(_ view: CipherView, password: String? = nil, name: String? = nil, advance: TimeInterval = 60) async throws -> CipherView {
        clock.advance(by: advance)
        var edited = view
        if let password { edited.login?.password = password }
        if let name { edited.name = name }
        goOffline()
        defer { goOnline() }
        let result = try await repository().updateCipher(edited)
        guard case .savedOffline(let saved?, _) = result else { throw HarnessError("expected an offline save, got \(result)") }
        return try saved.decrypt(userKey: userKey)
    }

    /// "Another device" edits the item on the server (a real PUT through the emulator's
    /// in-process API, bumping its revision date at the current clock time).
    @discardableResult
    func anotherDeviceEdits(_ id: String, advance: TimeInterval = 60, _ edit: (inout CipherView) -> Void) throws -> CipherView {
        clock.advance(by: advance)
        let key = userKey
        let random = SeededRandomSource(seed: seed &+ 99)
        var failure: (any Error)?
        let updated = try emulator.editAsAnotherDevice(cipherId: id) { cipher in
            do {
                var view = try cipher.decrypt(userKey: key)
                edit(&view)
                let encrypted = try view.encrypt(userKey: key, random: random)
                let revision = cipher.revisionDate
                cipher = encrypted
                cipher.revisionDate = revision
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        return try updated.decrypt(userKey: userKey)
    }

    // MARK: Inspection

    /// The server's items of this user, decrypted.
    func serverItems() throws -> [CipherView] {
        try emulator.ciphers(userId: userId).map { try $0.decrypt(userKey: userKey) }
    }

    func serverItems(named prefix: String) throws -> [CipherView] {
        try serverItems().filter { ($0.name ?? "").hasPrefix(prefix) }.sorted { ($0.name ?? "") < ($1.name ?? "") }
    }

    func pending(_ id: String) throws -> PendingChange? { try store.projection(userId: userId).pending[id] }
    func pendingCount() throws -> Int { try store.pendingCount(userId: userId) }
    func local(_ id: String) throws -> CipherView? { try store.localCipher(userId: userId, id: id)?.decrypt(userKey: userKey) }
    func events(_ id: String) throws -> [VaultEventType] { try store.events(userId: userId, cipherId: id).map(\.type) }
    func allEventTypes() throws -> [VaultEventType] { try store.events(userId: userId).map(\.type) }
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A server port that runs `hook` once before forwarding the first call named `trigger`
/// (e.g. another device editing between our read and our write).
final class InterceptingServer: CipherServer, Sendable {
    let inner: any CipherServer
    let trigger: String
    let hook: @Sendable () async throws -> Void
    private let fired = Mutex(false)

    init(_ inner: any CipherServer, on trigger: String, _ hook: @escaping @Sendable () async throws -> Void) {
        self.inner = inner
        self.trigger = trigger
        self.hook = hook
    }

    private func maybeFire(_ name: String) async throws {
        guard name == trigger, fired.withLock({ let was = $0; $0 = true; return !was }) else { return }
        try await hook()
    }

    func getCipher(id: String) async throws -> Cipher {
        let cipher = try await inner.getCipher(id: id)
        try await maybeFire("afterGet")
        return cipher
    }
    func createCipher(_ cipher: Cipher) async throws -> Cipher { try await inner.createCipher(cipher) }
    func updateCipher(_ cipher: Cipher, lastKnownRevisionDate: BitwardenDate?) async throws -> Cipher {
        try await inner.updateCipher(cipher, lastKnownRevisionDate: lastKnownRevisionDate)
    }
    func softDeleteCipher(id: String) async throws { try await inner.softDeleteCipher(id: id) }
    func deleteCipher(id: String) async throws { try await inner.deleteCipher(id: id) }
    func restoreCipher(id: String) async throws -> Cipher { try await inner.restoreCipher(id: id) }
    func sync() async throws -> SyncSnapshot {
        try await maybeFire("beforeSync")
        return try await inner.sync()
    }
    func downloadAttachment(cipherId: String, attachmentId: String) async throws -> [UInt8] {
        try await inner.downloadAttachment(cipherId: cipherId, attachmentId: attachmentId)
    }
    func createAttachment(cipherId: String, fileName: EncString, key: EncString, encryptedData: [UInt8]) async throws -> Cipher {
        try await inner.createAttachment(cipherId: cipherId, fileName: fileName, key: key, encryptedData: encryptedData)
    }
    func deleteAttachment(cipherId: String, attachmentId: String) async throws {
        try await inner.deleteAttachment(cipherId: cipherId, attachmentId: attachmentId)
    }
}

// MARK: Fault injection (one place that speaks the emulator's fault API)

extension ResolverHarness {
    /// The next `count` requests matching `method` and the route pattern `path` (`*` = one
    /// segment) fail with `status` (the server does nothing).
    func failNext(_ count: Int, _ method: String, _ path: String, status: Int = 500) {
        emulator.faults.failNext(count, matching: RouteMatcher(method: method, path: path), with: .status(status))
    }

    /// The next `count` matching requests are applied by the server, then the connection is
    /// closed without a response.
    func dropResponseAfterApply(_ count: Int, _ method: String, _ path: String) {
        emulator.faults.dropResponseAfterApplying(next: count, matching: RouteMatcher(method: method, path: path))
    }

    func clearFaults() { emulator.faults.clear() }
}
