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
import OfflineSync
import Synchronization
import VaultCrypto
import VaultModel

/// What a scenario run observed, compared with its expectations.
public struct ScenarioOutcome: Sendable {
    public var name: String
    /// Readable differences between expected and actual; empty when the scenario passed.
    public var mismatches: [String]
    /// Everything observed, in the shape of an expectation (what `--record` writes).
    public var actual: ScenarioExpectation
    /// Where the device's store was (kept only when the runner was asked to keep it).
    public var storePath: String?
    /// Each item ref's ids, first to last (temporary id, server id, re-created id).
    public var itemIds: [String: [String]] = [:]
    /// Each user ref's user id.
    public var userIds: [String: String] = [:]
    /// The embedded emulator, still running, when the runner was asked to keep it.
    public var runningServer: BitwardenEmulator?
    /// The server's base URL.
    public var serverURL: URL?
    /// Every item step that succeeded, in order (what the user and other devices did).
    public var journal: [ScenarioJournalEntry] = []

    public var passed: Bool { mismatches.isEmpty }
}

/// Runs scenarios against an in-process emulator over loopback HTTP, with a hand-moved clock
/// shared by device and server and seeded ids, IVs and keys: the same scenario gives the same
/// log and outcomes byte for byte (resolution runs at concurrency 1).
///
/// ```swift
/// let outcome = try await ScenarioRunner().run(Scenario.load(path: "Fixtures/scenarios/x.json"))
/// if !outcome.passed { print(outcome.mismatches.joined(separator: "\n")) }
/// ```
public struct ScenarioRunner: Sendable {
    /// Keep the device's store directory after the run (its path is in the outcome).
    public var keepStore = false
    /// Where stores are made (default: the temporary directory).
    public var workDirectory: String?
    /// Where the store goes (default: a new directory under ``workDirectory``).
    public var storePath: String?
    /// The server: the embedded emulator (default; faults available), or any
    /// Bitwarden-compatible server whose accounts already exist (the scenario's users must
    /// match them; `fault` steps are refused).
    public var server: ScenarioServer = .embedded
    /// Leave the embedded emulator running after the run (it is in the outcome).
    public var keepServerRunning = false
    /// Allow a ``ScenarioServer/remote(_:)`` server over plain `http` that is not on loopback.
    public var allowInsecureHTTP = false
    /// Where the run's components log (default: warnings and worse only, so a replay's output
    /// is its result).
    public var logger: Logger = {
        var logger = Logger(label: "vaultlog.replay")
        logger.logLevel = .warning
        return logger
    }()

    public init() {}

    /// Runs `scenario` and compares what happened with its expectations. Throws only when the
    /// scenario cannot be run at all (a bad step, the emulator failing to start).
    public func run(_ scenario: Scenario) async throws -> ScenarioOutcome {
        let run = try await Run(scenario: scenario, runner: self)
        do {
            try await run.perform()
            let actual = try await run.observe()
            var outcome = ScenarioOutcome(name: scenario.name, mismatches: Self.compare(scenario.expect, actual),
                                          actual: actual, storePath: keepStore ? run.storePath : nil)
            outcome.itemIds = run.itemIds
            outcome.userIds = Dictionary(uniqueKeysWithValues: run.users.map { ($0.ref, $0.userId) })
            outcome.serverURL = run.serverURL
            outcome.journal = run.journal
            if keepServerRunning { outcome.runningServer = run.emulator }
            await run.finish(stopServer: !keepServerRunning)
            return outcome
        } catch {
            await run.finish()
            throw error
        }
    }

    // MARK: Comparison

    /// Readable differences; only the parts `expected` gives are compared.
    public static func compare(_ expected: ScenarioExpectation, _ actual: ScenarioExpectation) -> [String] {
        var lines: [String] = []
        if let outcomes = expected.outcomes {
            for ref in outcomes.keys.sorted() {
                let want = outcomes[ref]!, got = actual.outcomes?[ref] ?? []
                if want != got {
                    lines.append("outcomes.\(ref): expected \(want)")
                    lines.append("outcomes.\(ref):   actual \(got)")
                }
            }
        }
        if let pending = expected.pending {
            for user in pending.keys.sorted() where pending[user] != actual.pending?[user] {
                lines.append("pending.\(user): expected \(pending[user]!), actual \(actual.pending?[user].map(String.init) ?? "nothing")")
            }
        }
        if let deadLetters = expected.deadLetters {
            for user in deadLetters.keys.sorted() {
                let want = deadLetters[user]!.sorted(), got = (actual.deadLetters?[user] ?? []).sorted()
                if want != got { lines.append("deadLetters.\(user): expected \(want), actual \(got)") }
            }
        }
        if let syncResults = expected.syncResults, syncResults != (actual.syncResults ?? []) {
            lines.append("syncResults: expected \(syncResults), actual \(actual.syncResults ?? [])")
        }
        if let server = expected.server {
            for user in server.keys.sorted() {
                var remaining = actual.server?[user] ?? []
                var missing: [ScenarioItemExpectation] = []
                // Most specific expectations first, so a loose one cannot take a precise one's item.
                for want in server[user]!.sorted(by: { specificity($0) > specificity($1) }) {
                    if let index = remaining.firstIndex(where: { matches(want, $0) }) {
                        remaining.remove(at: index)
                    } else {
                        missing.append(want)
                    }
                }
                for item in missing { lines.append("server.\(user): missing    \(item)") }
                for item in remaining { lines.append("server.\(user): unexpected \(item)") }
            }
        }
        return lines
    }

    static func specificity(_ e: ScenarioItemExpectation) -> Int {
        [e.name != nil, e.namePrefix != nil, e.password != nil, e.notes != nil, e.passwordHistory != nil, e.deleted != nil,
         e.folder != nil].filter { $0 }.count
    }

    static func matches(_ want: ScenarioItemExpectation, _ got: ScenarioItemExpectation) -> Bool {
        if let name = want.name, got.name != name { return false }
        if let prefix = want.namePrefix, !(got.name ?? "").hasPrefix(prefix) { return false }
        if let password = want.password, got.password != password { return false }
        if let notes = want.notes, got.notes != notes { return false }
        if let history = want.passwordHistory, got.passwordHistory ?? [] != history { return false }
        if let deleted = want.deleted, (got.deleted ?? false) != deleted { return false }
        if let folder = want.folder, got.folder != folder { return false }
        return true
    }
}

/// One item step that succeeded: who did what to which item, with the content saved.
/// Codable so a run in one process (`vaultlog resolve-worker prepare`) can hand its journal to
/// the checks in another (the resolver kill test).
public struct ScenarioJournalEntry: Codable, Sendable, Equatable {
    /// The step's index (-1 for the items on the server before the first step).
    public var step: Int
    /// The item ref (empty for a user-level entry: a sync).
    public var ref: String
    /// `initial` (on the server before the first step), `create`, `update`, `softDelete`,
    /// `delete` (the user), `anotherDevice`, `anotherDeviceDelete`, `syncApplied` (a sync that
    /// replaced the device's copies with the server's).
    public var action: String
    /// The plaintext saved (creates and edits; the initial content).
    public var content: ScenarioItem?
    /// Saved offline (the repository fell back to the log), or not applied online.
    public var offline: Bool
    /// The item had pending offline state on the device just before the step (nil in journals
    /// written before this was recorded).
    public var pendingBefore: Bool?
    /// The acting user's ref.
    public var user: String?
    /// `syncApplied`: the refs still pending after the sync, whose local copies it kept (a
    /// sync never replaces an item with pending changes, e.g. one made while locked).
    public var kept: [String]?

    public init(step: Int, ref: String, action: String, content: ScenarioItem?, offline: Bool,
                pendingBefore: Bool? = nil, user: String? = nil, kept: [String]? = nil) {
        self.step = step
        self.ref = ref
        self.action = action
        self.content = content
        self.offline = offline
        self.pendingBefore = pendingBefore
        self.user = user
        self.kept = kept
    }
}

/// Where a scenario runs.
public enum ScenarioServer: Sendable {
    /// The in-process emulator on loopback, with the scenario's clock.
    case embedded
    /// A running Bitwarden-compatible server (self-hosted layout: `URL/api`, `URL/identity`).
    case remote(URL)
}

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
    let clock = OfflineSync.ManualClock()
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
    /// Folder ref → the server's folder id.
    var folders: [String: String] = [:]

    init(scenario: Scenario, runner: ScenarioRunner) async throws {
        self.scenario = scenario
        self.runner = runner
        seed = scenario.seed ?? 1
        let clock = self.clock
        switch runner.server {
        case .embedded:
            var configuration = EmulatorConfiguration()
            configuration.logger = runner.logger
            configuration.flavor = scenario.flavor == "vaultwarden" ? .vaultwarden : .bitwarden
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
            let login = try await client.login(email: user.email, password: user.password)
            let other = BitwardenClient(configuration: clientConfiguration())
            _ = try await other.login(email: user.email, password: user.password)
            try store.saveAccount(StoredAccount(userId: login.userId, email: user.email, kdf: login.kdf, protectedUserKey: login.protectedUserKey, salt: login.salt))
            store.unlock(userId: login.userId, userKey: login.userKey)
            users.append(User(ref: user.ref, email: user.email, userId: login.userId, userKey: login.userKey, client: client, other: other, password: user.password))
        }
        for (index, entry) in (scenario.server ?? []).enumerated() {
            let user = try self.user(entry.user, step: -1)
            let encrypted = try Self.view(entry.item).encrypt(userKey: user.userKey, random: random(11 &+ UInt64(index)))
            let stored = try await user.onOtherDevice { try await $0.createCipher(encrypted) }
            try await store.applyLocal([.upsert(stored)], userId: user.userId)
            refs[entry.ref] = (user.ref, stored.id!)
            journal.append(.init(step: -1, ref: entry.ref, action: "initial", content: content(Self.view(entry.item)), offline: false,
                                 pendingBefore: false, user: user.ref))
        }
    }

    /// Randomness for IVs and keys of "another device": seeded against the embedded emulator
    /// (the run repeats byte for byte), the system's CSPRNG against a real server.
    func random(_ offset: UInt64) -> any RandomSource {
        emulator == nil ? SystemRandomSource() : SeededRandomSource(seed: seed &+ offset)
    }

    static func openStore(_ path: String, clock: OfflineSync.ManualClock, seed: UInt64, realTime: Bool = false,
                          logger: Logger) throws -> VaultLogStore {
        var options = VaultLogStoreOptions()
        options.logger = logger
        options.eventLog.logger = logger
        // Against a real server, time is the server's: the device uses the real clock too.
        options.dependencies = realTime ? VaultDependencies() : .deterministic(seed: seed, clock: clock)
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

    // MARK: Steps

    func perform() async throws {
        for (index, step) in scenario.steps.enumerated() {
            do {
                try await perform(step, index: index)
                if let expected = step.expectError {
                    throw ReplayError.badStep(index: index, reason: "expected an error containing '\(expected)', but '\(step.do)' succeeded")
                }
            } catch where step.optional == true {
                runner.logger.debug("optional step failed", metadata: ["step": "\(index + 1)", "error": "\(error)"])
            } catch let error as ReplayError {
                throw error
            } catch {
                guard let expected = step.expectError, "\(error)".contains(expected) else {
                    throw ReplayError.badStep(index: index, reason: "'\(step.do)' failed: \(error)")
                }
            }
        }
    }

    /// The user's repository; items with pending state are resolved at once by the same
    /// deterministic resolver a sync uses (without the scheduled crash, which belongs to the next sync).
    func repository(_ user: User) -> VaultRepository {
        VaultRepository(store: store, userId: user.userId, server: user.client, resolver: resolver(user, crashing: false),
                        logger: runner.logger)
    }

    func resolver(_ user: User, crashing: Bool = true) -> OfflineSyncResolver {
        var options = ResolverOptions()
        options.concurrency = 1
        options.jitter = 0
        if crashing, let crashAt = pendingCrash {
            let count = Mutex(0)
            options.afterServerEffect = { _ in
                if count.withLock({ $0 += 1; return $0 }) == crashAt { throw ReplayCrash() }
            }
        }
        return OfflineSyncResolver(store: store, server: user.client, options: options, logger: runner.logger)
    }

    /// A crash: every in-memory state is dropped and the store reopened (unlocked users stay
    /// unlocked: the app unlocks again on restart).
    func reopen() throws {
        let unlocked = users.filter { store.isUnlocked(userId: $0.userId) }
        store.close()
        // A new seed per reopen: restarting one sequence would hand out the same ids again
        // (a temporary id of an earlier create, after a second crash).
        reopens += 1
        store = try Self.openStore(storePath, clock: clock, seed: seed &+ 100 &+ UInt64(reopens) &* 7919, realTime: emulator == nil,
                                   logger: runner.logger)
        for user in unlocked { store.unlock(userId: user.userId, userKey: user.userKey) }
    }

    func item(_ step: ScenarioStep, _ index: Int) throws -> ScenarioItem {
        guard let item = step.item else { throw ReplayError.badStep(index: index, reason: "'\(step.do)' needs 'item'") }
        return item
    }

    func ref(_ step: ScenarioStep, _ index: Int) throws -> String {
        guard let ref = step.ref else { throw ReplayError.badStep(index: index, reason: "'\(step.do)' needs 'ref'") }
        return ref
    }

    /// The longest clock step a scenario may take (100 years): enough for any retention or
    /// expiry rule, and far from the dates a header's millisecond field can hold.
    static let maxAdvance: Double = 100 * 365 * 86_400

    func perform(_ step: ScenarioStep, index: Int) async throws {
        switch step.do {
        case "offline":
            // The device's transport points at a closed port; other devices still reach the server.
            for user in users { user.client.setBaseURL(offlineURL) }
        case "online":
            for user in users { user.client.setBaseURL(serverURL) }
        case "advance":
            guard let seconds = step.seconds, seconds >= 0, seconds <= Self.maxAdvance else {
                throw ReplayError.badStep(index: index, reason: "'advance' needs 'seconds' from 0 to \(Int(Self.maxAdvance)) (100 years)")
            }
            if emulator == nil {
                // A real server's clock cannot be moved: wait for real (whole seconds matter for backup names).
                try await Task.sleep(for: .seconds(min(seconds, 2)))
            } else {
                clock.advance(by: seconds)
            }
        case "create":
            let user = try self.user(step.user, step: index)
            let pendingBefore = false
            let result = try await repository(user).addCipher(Self.view(try resolvingFolder(try item(step, index), step: index)))
            let cipher: Cipher?
            switch result {
            case .online(let c), .savedOffline(let c, _), .resolved(let c, _): cipher = c
            default: cipher = nil
            }
            guard let id = cipher?.id else { throw ReplayError.badStep(index: index, reason: "create returned no item") }
            refs[try ref(step, index)] = (user.ref, id)
            journal.append(.init(step: index, ref: step.ref!, action: "create", content: content(Self.view(try resolvingFolder(try item(step, index), step: index))),
                                 offline: result.isOffline, pendingBefore: pendingBefore, user: user.ref))
        case "update":
            let pendingBefore = isPending(try ref(step, index))
            let (user, id) = try currentId(try ref(step, index), step: index)
            guard let local = try store.localCipher(userId: user.userId, id: id) else {
                throw ReplayError.badStep(index: index, reason: "item '\(step.ref!)' is not in the local store")
            }
            var view = try local.decrypt(userKey: user.userKey)
            Self.apply(try resolvingFolder(try item(step, index), step: index), to: &view)
            let result = try await repository(user).updateCipher(view)
            journal.append(.init(step: index, ref: step.ref!, action: "update", content: content(view), offline: result.isOffline,
                                 pendingBefore: pendingBefore, user: user.ref))
        case "softDelete":
            let pendingBefore = isPending(try ref(step, index))
            let (user, id) = try currentId(try ref(step, index), step: index)
            guard let local = try store.localCipher(userId: user.userId, id: id) else {
                throw ReplayError.badStep(index: index, reason: "item '\(step.ref!)' is not in the local store")
            }
            let result = try await repository(user).softDeleteCipher(try local.decrypt(userKey: user.userKey))
            journal.append(.init(step: index, ref: step.ref!, action: "softDelete", content: nil, offline: result.isOffline,
                                 pendingBefore: pendingBefore, user: user.ref))
        case "delete":
            let pendingBefore = isPending(try ref(step, index))
            let (user, id) = try currentId(try ref(step, index), step: index)
            let result = try await repository(user).deleteCipher(id: id)
            journal.append(.init(step: index, ref: step.ref!, action: "delete", content: nil, offline: result.isOffline,
                                 pendingBefore: pendingBefore, user: user.ref))
        case "anotherDevice":
            // A real edit by a second login: read, change, write with lastKnownRevisionDate.
            let (user, id) = try currentId(try ref(step, index), step: index)
            let current = try await user.onOtherDevice { try await $0.getCipher(id: id) }
            var view = try current.decrypt(userKey: user.userKey)
            let before = view
            Self.apply(try resolvingFolder(try item(step, index), step: index), to: &view)
            view = view.applyingPasswordHistory(original: before, now: BitwardenDate(clock.now))
            var encrypted = try view.encrypt(userKey: user.userKey, random: random(UInt64(index) &+ 1000))
            encrypted.id = id
            // Journaled before the request: a lost response may still have applied it.
            journal.append(.init(step: index, ref: step.ref!, action: "anotherDevice", content: content(view), offline: false,
                                 pendingBefore: isPending(step.ref!), user: user.ref))
            _ = try await user.onOtherDevice { try await $0.updateCipher(encrypted, lastKnownRevisionDate: current.revisionDate) }
        case "anotherDeviceDelete":
            let (user, id) = try currentId(try ref(step, index), step: index)
            journal.append(.init(step: index, ref: step.ref!, action: "anotherDeviceDelete", content: nil, offline: false,
                                 pendingBefore: isPending(step.ref!), user: user.ref))
            try await user.onOtherDevice { try await $0.deleteCipher(id: id) }
        case "anotherDeviceCreate":
            let user = try self.user(step.user, step: index)
            let encrypted = try Self.view(try item(step, index)).encrypt(userKey: user.userKey, random: random(UInt64(index)))
            let stored = try await user.onOtherDevice { try await $0.createCipher(encrypted) }
            refs[try ref(step, index)] = (user.ref, stored.id!)
        case "createFolder":
            let user = try self.user(step.user, step: index)
            let name = EncString.encrypt("folder \(try ref(step, index))", key: user.userKey,
                                         random: random(UInt64(index) &+ 3000))
            folders[try ref(step, index)] = try await user.onOtherDevice { try await $0.createFolder(name: name).id }
        case "lock": store.lock(userId: try user(step.user, step: index).userId)
        case "unlock":
            let user = try self.user(step.user, step: index)
            store.unlock(userId: user.userId, userKey: user.userKey)
        case "sync", "resolve":
            let user = try self.user(step.user, step: index)
            let crashing = pendingCrash != nil
            do {
                if step.do == "sync" {
                    // Forced, as a pull-to-refresh: every sync step fetches the server's items.
                    let result = try await SyncService(store: store, server: user.client, resolver: resolver(user), logger: runner.logger)
                        .fetchSync(userId: user.userId, forceSync: true)
                    syncResults.append(result.isApplied ? "applied" : "aborted")
                    if result.isApplied {
                        let kept = refs.filter { $0.value.user == user.ref && isPending($0.key) }.map(\.key).sorted()
                        journal.append(.init(step: index, ref: "", action: "syncApplied", content: nil, offline: false, user: user.ref,
                                             kept: kept.isEmpty ? nil : kept))
                    }
                } else {
                    _ = try await resolver(user).processPendingChanges(userId: user.userId)
                }
            } catch is ReplayCrash {
                if step.do == "sync" { syncResults.append("crashed") }
                try reopen()
            }
            if crashing { pendingCrash = nil }
        case "retryDeadLetters":
            let user = try self.user(step.user, step: index)
            try resolver(user).retryDeadLetters(userId: user.userId)
        case "fault":
            guard let fault = step.fault else { throw ReplayError.badStep(index: index, reason: "'fault' needs 'fault'") }
            try applyFault(fault, index: index)
        case "crash":
            guard let n = step.afterEffect, n >= 1 else { throw ReplayError.badStep(index: index, reason: "'crash' needs 'afterEffect' ≥ 1") }
            pendingCrash = n
        default:
            throw ReplayError.badStep(index: index, reason: "unknown action '\(step.do)'")
        }
    }

    func applyFault(_ fault: ScenarioFault, index: Int) throws {
        guard let emulator else {
            throw ReplayError.badStep(index: index, reason: "server faults need the embedded emulator (not a remote server)")
        }
        if fault.clear == true { emulator.faults.clear(); return }
        var path = fault.path ?? ""
        if path.contains("{"), let open = path.firstIndex(of: "{"), let close = path.firstIndex(of: "}") {
            let ref = String(path[path.index(after: open)..<close])
            let (_, id) = try currentId(ref, step: index)
            path.replaceSubrange(open...close, with: id)
        }
        let route = RouteMatcher(method: fault.method, path: path)
        for (name, count) in [("failNext", fault.failNext), ("dropResponseAfterApply", fault.dropResponseAfterApply)] {
            if let count, !(1...1_000_000).contains(count) {
                throw ReplayError.badStep(index: index, reason: "'\(name)' must be a count from 1 to 1000000 (got \(count))")
            }
        }
        if let status = fault.status, !(100...599).contains(status) {
            throw ReplayError.badStep(index: index, reason: "'status' must be an HTTP status from 100 to 599 (got \(status))")
        }
        if let n = fault.failNext {
            let status = fault.status ?? 500
            emulator.faults.failNext(n, matching: route, with: fault.body.map { .reply(status: status, body: $0) } ?? .status(status))
        } else if let n = fault.dropResponseAfterApply {
            emulator.faults.dropResponseAfterApplying(next: n, matching: route)
        } else {
            throw ReplayError.badStep(index: index, reason: "a fault needs 'failNext', 'dropResponseAfterApply' or 'clear'")
        }
    }

    // MARK: Observing

    /// Each ref's ids in order, following the id map (filled by ``observe()``).
    var itemIds: [String: [String]] = [:]
    /// Every item step that succeeded, in order.
    var journal: [ScenarioJournalEntry] = []

    func content(_ view: CipherView) -> ScenarioItem {
        ScenarioItem(name: view.name, notes: view.notes, username: view.login?.username, password: view.login?.password,
                     folder: folderRef(view.folderId))
    }

    /// The ref of a folder id (nil for none, or a folder no step created).
    func folderRef(_ id: String?) -> String? {
        guard let id else { return nil }
        return folders.first { $0.value.lowercased() == id.lowercased() }?.key
    }

    func observe() async throws -> ScenarioExpectation {
        var outcomes: [String: [String]] = [:]
        var pending: [String: Int] = [:]
        var deadLetters: [String: [String]] = [:]
        var server: [String: [ScenarioItemExpectation]] = [:]
        for user in users {
            let wasLocked = !store.isUnlocked(userId: user.userId)
            if wasLocked { store.unlock(userId: user.userId, userKey: user.userKey) }
            defer { if wasLocked { store.lock(userId: user.userId) } }
            let projection = try store.projection(userId: user.userId)
            pending[user.ref] = projection.pendingCount
            let events = try store.events(userId: user.userId)
            for (ref, entry) in refs where entry.user == user.ref {
                var chain = [entry.id]
                var current = entry.id
                for _ in 0..<8 { guard let next = projection.idMap[current], next != current else { break }; chain.append(next); current = next }
                itemIds[ref] = chain
                let ids = Set(chain)
                outcomes[ref] = events.filter { ids.contains($0.cipherId) && !$0.type.isOperation && $0.type != .createPlanned }
                    .map(\.type.description)
                if projection.pending.values.contains(where: { ids.contains($0.cipherId) && $0.isDeadLetter }) {
                    deadLetters[user.ref, default: []].append(ref)
                }
            }
            let serverCiphers = try await user.onOtherDevice { try await $0.sync().ciphers }
            server[user.ref] = try serverCiphers.map { cipher in
                let view = try cipher.decrypt(userKey: user.userKey)
                return ScenarioItemExpectation(name: view.name, password: view.login?.password, notes: view.notes,
                                               passwordHistory: (view.passwordHistory ?? []).compactMap(\.password),
                                               deleted: view.deletedDate != nil, folder: folderRef(view.folderId))
            }.sorted { ($0.name ?? "", $0.password ?? "") < ($1.name ?? "", $1.password ?? "") }
        }
        return ScenarioExpectation(outcomes: outcomes, pending: pending, deadLetters: deadLetters, server: server,
                                   syncResults: syncResults)
    }
}

/// A loopback port nothing listens on: the device's "offline" transport. The socket stays bound
/// (never listening) until `close()`, so connections are refused and no other server — another
/// scenario's emulator started meanwhile — can be given the port.
final class ClosedPort: Sendable {
    let url: URL
    private let socket: Mutex<Int32?>

    init() throws {
        #if canImport(Glibc)
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = Darwin.socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw ReplayError.badStep(index: -1, reason: "cannot open a socket to find a closed port") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else {
            closeDescriptor(fd)
            throw ReplayError.badStep(index: -1, reason: "cannot bind a loopback socket to find a closed port")
        }
        url = URL(string: "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))")!
        socket = Mutex(fd)
    }

    /// Releases the port (idempotent).
    func close() {
        socket.withLock { fd in
            if let open = fd { closeDescriptor(open) }
            fd = nil
        }
    }

    deinit { close() }
}

private func closeDescriptor(_ fd: Int32) {
    #if canImport(Glibc)
    _ = Glibc.close(fd)
    #else
    _ = Darwin.close(fd)
    #endif
}
