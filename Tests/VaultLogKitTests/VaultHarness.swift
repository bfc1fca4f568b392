import BitwardenAPI
import BitwardenEmulator
import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultLogKit
import VaultLogTestSupport
import VaultLogTesting
import VaultModel

/// An emulator over loopback HTTP with one account, a temp directory for the device's store,
/// a hand-moved clock shared by device and server, and the app's token store.
final class VaultHarness: @unchecked Sendable {
    let dir = TemporaryDirectory("vaultkit", create: true)
    let clock: VaultLogTesting.ManualClock
    let emulator: BitwardenEmulator
    let url: URL
    let tokens = InMemoryTokenStore()
    let email = "app@example.com"
    let password = "correct horse battery staple"

    private init(emulator: BitwardenEmulator, url: URL, clock: VaultLogTesting.ManualClock) {
        self.clock = clock
        self.emulator = emulator
        self.url = url
    }

    static func make() async throws -> VaultHarness {
        let clock = VaultLogTesting.ManualClock()
        var configuration = EmulatorConfiguration()
        configuration.now = { clock.now }
        configuration.random = SeededRandomSource(seed: 11)
        let emulator = BitwardenEmulator(configuration: configuration)
        let url = try await emulator.start()
        let harness = VaultHarness(emulator: emulator, url: url, clock: clock)
        try emulator.createAccount(email: harness.email, password: harness.password, iterations: 5000)
        return harness
    }

    deinit {
        let emulator = self.emulator
        Task { await emulator.stop() }
    }

    /// A vault on the harness's store directory (a relaunch opens another one).
    func openVault(seed: UInt64 = 1, anchors: (any LogAnchorStore)? = nil,
                   _ configure: (inout ResolverOptions) -> Void = { _ in }) throws -> OfflineVault {
        var storeOptions = VaultLogStoreOptions()
        storeOptions.dependencies = .deterministic(seed: seed, clock: clock)
        var resolverOptions = ResolverOptions()
        resolverOptions.concurrency = 1
        resolverOptions.jitter = 0
        resolverOptions.backoffBase = 1
        configure(&resolverOptions)
        return try OfflineVault(directory: URL(fileURLWithPath: dir.path), server: .selfHosted(url), tokenStore: tokens,
                                anchorStore: anchors, storeOptions: storeOptions, resolverOptions: resolverOptions)
    }

    func goOffline() { emulator.faults.offline = .resetConnections }
    func goOnline() { emulator.faults.offline = nil }

    func failNext(_ count: Int, _ method: String, _ path: String, status: Int = 500) {
        emulator.faults.failNext(count, matching: RouteMatcher(method: method, path: path), with: .status(status))
    }

    /// "Another device" changes the item on the server (a real edit through the emulator).
    func anotherDeviceEdits(_ id: String, key: SymmetricCryptoKey, _ edit: (inout CipherView) -> Void) throws {
        clock.advance(by: 60)
        let random = SeededRandomSource(seed: 99)
        var failure: (any Error)?
        _ = try emulator.editAsAnotherDevice(cipherId: id) { cipher in
            do {
                var view = try cipher.decrypt(userKey: key)
                edit(&view)
                let revision = cipher.revisionDate
                cipher = try view.encrypt(userKey: key, random: random)
                cipher.revisionDate = revision
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }

    /// An item saved online with password "pw-0", edited offline to `password`, then refused
    /// by the server (HTTP 500 on its reads and writes) through `syncs` syncs an hour apart:
    /// a dead letter once `syncs` reaches the vault's `maxAttempts`. The faults stay on.
    func deadLetter(_ name: String, editedTo password: String, in vault: OfflineVault, syncs: Int) async throws -> CipherView {
        let key = try vault.store.userKey(userId: vault.userId!)
        guard var item = try await vault.save(Self.login(name, password: "pw-0")).cipher.map({ try $0.decrypt(userKey: key) }) else {
            throw CocoaError(.featureUnsupported)
        }
        let original = item
        goOffline()
        item.login?.password = password
        try await vault.save(item)
        goOnline()
        failNext(100, "GET", "/api/ciphers/\(item.id!)")
        failNext(100, "PUT", "/api/ciphers/\(item.id!)")
        for _ in 0..<syncs {
            _ = try await vault.sync(force: true)
            clock.advance(by: 3600)
        }
        return original
    }

    static func login(_ name: String, password: String) -> CipherView {
        CipherView(type: .login, name: name, notes: "notes of \(name)", login: LoginView(username: "alice", password: password))
    }
}

/// Collects a stream's values on a task of its own until cancelled.
final class Collected<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [Value] = []
    private var task: Task<Void, Never>?

    init(_ stream: AsyncStream<Value>) {
        task = Task { [weak self] in
            for await value in stream { self?.append(value) }
        }
    }

    private func append(_ value: Value) { lock.withLock { items.append(value) } }

    var values: [Value] { lock.withLock { items } }

    /// Waits (up to `seconds`) until `condition` holds for the values collected.
    func wait(seconds: Double = 10, until condition: ([Value]) -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition(values) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition(values)
    }

    func stop() { task?.cancel() }
}

