import BitwardenAPI
import BitwardenAPINIO
import BitwardenEmulator
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
@_spi(Tools) import OfflineSync
import Synchronization
import VaultCrypto
import VaultModel
import VaultLogTesting

/// A thrown crash (the resolver stops without recording).
struct ReplayCrash: ResolutionInterruption {}

/// One scenario run: the emulator, the device's store, the users and the item refs.
final class Run: @unchecked Sendable {
    struct User {
        let ref: String
        let email: String
        let userId: String
        let userKey: SymmetricCryptoKey
        /// The device's client: pointed at a closed port while the device is offline.
        let client: BitwardenClient
        /// "Another device": a second login of the same account.
        let other: BitwardenClient
        let password: String

        /// Runs `body` with the other device's client; a session that expired while that device
        /// was idle (its refresh token lapsed over a long run) logs in again first, as a real
        /// device would.
        func onOtherDevice<T>(_ body: (BitwardenClient) async throws -> T) async throws -> T {
            do {
                return try await body(other)
            } catch let error as BitwardenAPIError where error.serverErrorKind == .loginRequired {
                _ = try await other.login(email: email, password: password)
                return try await body(other)
            }
        }
    }

    let scenario: Scenario
    let runner: ScenarioRunner
    let clock = VaultLogTesting.ManualClock()
    let seed: UInt64
    /// The embedded emulator (nil against a remote server).
    let emulator: BitwardenEmulator?
    let serverURL: URL
    /// Held for the whole run: the device's transport while it is offline.
    let offlinePort: ClosedPort
    var offlineURL: URL { offlinePort.url }
    let storePath: String
    var store: VaultLogStore
    var users: [User] = []
    /// Item ref → (user ref, the id the item first had).
    var refs: [String: (user: String, id: String)] = [:]
    var syncResults: [String] = []
    var pendingCrash: Int?
    /// Crashes so far (each reopen seeds its ids anew).
    var reopens: UInt64 = 0
    /// Events removed by `compact` steps so far.
    var compactedEvents = 0
    /// Folder ref → the server's folder id.
    var folders: [String: String] = [:]

    /// Each ref's ids in order, following the id map (filled by ``observe()``).
    var itemIds: [String: [String]] = [:]
    /// Every item step that succeeded, in order.
    var journal: [ScenarioJournalEntry] = []
    /// The device is offline (its clients point at the closed port).
    var offline = false
    /// One resolver per user id on the current store, shared by syncs, resolves and the
    /// repository (as an app shares one): its server reports every effect to the scope of
    /// the step that runs (crashes, `atEffect` saves). Dropped when the store is reopened.
    var resolvers: [String: OfflineSyncResolver] = [:]
    /// `atEffect`: the sub-steps the next `sync`/`resolve` runs after its n-th server effect.
    var effectPlan: (afterEffect: Int, steps: [ScenarioStep], step: Int)?
    /// Views read by `openView`, by name: the step that read them, the item ref and the view.
    var views: [String: (step: Int, ref: String, view: CipherView)] = [:]
    /// Each user id's pending-count stream on the current store (its newest value is checked
    /// against the log's count at the end).
    var countStreams: [String: AsyncStream<Int>] = [:]
    /// What went wrong beyond the journal (see ``ScenarioOutcome/runViolations``).
    var runViolations: [String] = []

    init(scenario: Scenario, runner: ScenarioRunner) async throws {
        self.scenario = scenario
        self.runner = runner
        seed = scenario.seed ?? 1
        let clock = self.clock
        switch runner.server {
        case .embedded:
            var configuration = EmulatorConfiguration()
            configuration.logger = runner.logger
            configuration.flavor = scenario.flavor ?? .bitwarden
            configuration.now = { clock.now }
            configuration.random = SeededRandomSource(seed: seed &+ 7)
            let emulator = BitwardenEmulator(configuration: configuration)
            self.emulator = emulator
            serverURL = try await emulator.start()
        case .remote(let url):
            emulator = nil
            serverURL = url
            clock.set(Date())
        }
        offlinePort = try ClosedPort()
        let base = runner.workDirectory ?? NSTemporaryDirectory()
        storePath = runner.storePath ?? (base as NSString).appendingPathComponent(
            "vaultlog-replay-\(scenario.name.filter { $0.isLetter || $0.isNumber || $0 == "-" })-\(UUID().uuidString.prefix(8))")
        store = try Self.openStore(storePath, clock: clock, seed: seed, realTime: emulator == nil, logger: runner.logger)
        for user in scenario.users ?? [ScenarioUser(ref: "alice", email: "alice@example.com", password: "alice's master password")] {
            try emulator?.createAccount(email: user.email, password: user.password, kdf: user.kdf ?? .pbkdf2(iterations: 5000))
            let client = BitwardenClient(configuration: clientConfiguration())
            runner.onProgress?("logging in \(user.email) (the device and another device: each login derives the master key)")
            let login = try await client.login(email: user.email, password: user.password)
            let other = BitwardenClient(configuration: clientConfiguration())
            _ = try await other.login(email: user.email, password: user.password)
            try store.saveAccount(StoredAccount(userId: login.userId, email: user.email, kdf: login.kdf, protectedUserKey: login.protectedUserKey, salt: login.salt))
            store.unlock(userId: login.userId, userKey: login.userKey)
            users.append(User(ref: user.ref, email: user.email, userId: login.userId, userKey: login.userKey, client: client, other: other, password: user.password))
        }
        subscribeToPendingCounts()
        for (index, entry) in (scenario.server ?? []).enumerated() {
            let user = try self.user(entry.user, step: -1)
            let encrypted = try Self.view(entry.item).encrypt(userKey: user.userKey, random: random(11 &+ UInt64(index)))
            let stored = try await user.onOtherDevice { try await $0.createCipher(encrypted) }
            try await store.applyLocal([.upsert(stored)], userId: user.userId)
            refs[entry.ref] = (user.ref, stored.id!)
            journal.append(.init(step: -1, ref: entry.ref, action: .initial, content: content(Self.view(entry.item)), offline: false,
                                 pendingBefore: false, user: user.ref))
        }
    }

    /// Randomness for IVs and keys of "another device": seeded against the embedded emulator
    /// (the run repeats byte for byte), the system's CSPRNG against a real server.
    func random(_ offset: UInt64) -> any RandomSource {
        emulator == nil ? SystemRandomSource() : SeededRandomSource(seed: seed &+ offset)
    }

    static func openStore(_ path: String, clock: VaultLogTesting.ManualClock, seed: UInt64, realTime: Bool = false,
                          logger: Logger) throws -> VaultLogStore {
        var options = VaultLogStoreOptions()
        options.logger = logger
        options.eventLog.logger = logger
        // Against a real server, time is the server's: the device uses the real clock too.
        options.dependencies = realTime ? VaultDependencies() : .deterministic(seed: seed, clock: clock)
        // Checkpoints every few events, so replays and the simulation load them (and their
        // snapshots decoded after the tail) as a long-lived store does.
        options.checkpointInterval = 16
        // The item index merged every few events (1 to 8 by seed), so the runs cross merges
        // as a long-lived store does, and item histories read both the index and the headers.
        options.eventLog.itemIndexMergeInterval = 1 + Int(seed % 8)
        return try VaultLogStore(path: path, options: options)
    }

    func clientConfiguration() -> BitwardenClientConfiguration {
        var configuration = BitwardenClientConfiguration.selfHosted(serverURL)
        configuration.logger = runner.logger
        configuration.allowInsecureHTTP = runner.allowInsecureHTTP
        // SwiftNIO, not FoundationNetworking: thousands of seeds in one process crashed
        // URLSession in libdispatch.
        configuration.transport = AsyncHTTPClientTransport(timeout: configuration.timeout,
                                                           maximumConnectionsPerHost: configuration.maximumConnectionsPerHost)
        return configuration
    }

    func finish(stopServer: Bool = true) async {
        store.close()
        offlinePort.close()
        if stopServer { await emulator?.stop() }
        if !runner.keepStore { try? FileManager.default.removeItem(atPath: storePath) }
    }

    func user(_ ref: String?, step: Int) throws -> User {
        guard let ref else { return users[0] }
        guard let user = users.first(where: { $0.ref == ref }) else {
            throw ReplayError.badStep(index: step, reason: "unknown user '\(ref)' (users: \(users.map(\.ref)))")
        }
        return user
    }

    /// The item's id now, as an app reading its local store sees it: temporary ids follow the
    /// resolver's id map, except while the pending state still lives under an earlier id.
    func currentId(_ ref: String, step: Int) throws -> (User, String) {
        guard let (userRef, id) = refs[ref] else { throw ReplayError.badStep(index: step, reason: "unknown item ref '\(ref)'") }
        let user = try self.user(userRef, step: step)
        let map = store.isUnlocked(userId: user.userId) ? try store.projection(userId: user.userId).idMap : [:]
        return (user, VaultRepository.currentId(id, idMap: map, pending: try store.pendingFromHeaders(userId: user.userId).pending))
    }

    static func view(_ item: ScenarioItem) -> CipherView {
        var view: CipherView
        if item.type == "secureNote" {
            view = CipherView(type: .secureNote, name: item.name ?? "", notes: item.notes, folderId: item.folderId,
                              secureNote: CipherSecureNote())
        } else {
            view = CipherView(type: .login, name: item.name ?? "", notes: item.notes, folderId: item.folderId,
                              login: LoginView(username: item.username, password: item.password))
        }
        if let history = item.passwordHistory {
            view.passwordHistory = history.map { PasswordHistoryView(password: $0, lastUsedDate: BitwardenDate(Date(timeIntervalSince1970: 1_700_000_000))) }
        }
        return view
    }

    /// Whether the item behind `ref` has pending offline state on the device (any of its ids:
    /// the temporary one and those the resolver mapped it to). Read from headers, so it also
    /// works while the vault is locked.
    func isPending(_ ref: String) -> Bool {
        guard let (userRef, id) = refs[ref], let user = try? self.user(userRef, step: -1),
              let pending = try? store.pendingFromHeaders(userId: user.userId).pending else { return false }
        let map = store.isUnlocked(userId: user.userId) ? ((try? store.projection(userId: user.userId).idMap) ?? [:]) : [:]
        var current = id
        for _ in 0..<8 {
            if pending[current] != nil { return true }
            guard let next = map[current], next != current else { break }
            current = next
        }
        return pending[current] != nil
    }

    static func apply(_ item: ScenarioItem, to view: inout CipherView) {
        if let name = item.name { view.name = name }
        if let notes = item.notes { view.notes = notes }
        if let username = item.username { view.login?.username = username }
        if let password = item.password { view.login?.password = password }
        if let folderId = item.folderId { view.folderId = folderId }
    }

    /// `item` with its `folder` ref turned into the folder's id.
    func resolvingFolder(_ item: ScenarioItem, step: Int) throws -> ScenarioItem {
        guard let ref = item.folder else { return item }
        guard let id = folders[ref] else { throw ReplayError.badStep(index: step, reason: "unknown folder ref '\(ref)'") }
        var resolved = item
        resolved.folderId = id
        return resolved
    }

}
