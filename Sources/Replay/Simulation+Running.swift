import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Simulation {
    // MARK: Running

    /// Runs one seed: the scenario, the invariant checks, and the store's integrity (verify
    /// with the key) and plaintext scan (no typed password in any file of the store).
    /// With `concurrent`, the seed's scenario of the concurrent mode (its interleavings are
    /// driven by effect indices, but runs at once may vary in timing).
    public static func run(seed: UInt64, operations: Int = 40, concurrent: Bool = false) async throws -> [String] {
        try await run(Self.scenario(seed: seed, operations: operations, concurrent: concurrent))
    }

    /// Runs `scenario` (a generated one, saved with `--save` and perhaps cut down) and checks
    /// the invariants. With `keepStoreAt`, the device's store is left in that directory (for
    /// `vaultlog events`, `history`, `verify`); otherwise it is removed.
    public static func run(_ scenario: Scenario, keepStoreAt: String? = nil) async throws -> [String] {
        var runner = ScenarioRunner()
        runner.keepStore = true
        runner.storePath = keepStoreAt
        // Injected faults make the resolver warn by design; only errors are worth showing.
        runner.logger.logLevel = .error
        let outcome = try await runner.run(scenario)
        var violations = check(outcome) + folderViolations(scenario: scenario, outcome: outcome)
        if let path = outcome.storePath {
            defer { if keepStoreAt == nil { try? FileManager.default.removeItem(atPath: path) } }
            violations += try storeViolations(path: path, scenario: scenario, outcome: outcome)
        }
        return violations
    }

    /// Invariant 6 on the store the run left.
    static func storeViolations(path: String, scenario: Scenario, outcome: ScenarioOutcome) throws -> [String] {
        try storeViolations(path: path, users: scenario.users ?? [],
                            typedPasswords: Set(outcome.journal.compactMap { $0.content?.password }))
    }

    /// Invariant 6 on a store no other handle holds: `verify` with every user's key
    /// (unlocked with the master password) is clean, and none of `typedPasswords` appears in
    /// any file of the store.
    public static func storeViolations(path: String, users: [ScenarioUser], typedPasswords sentinels: Set<String>) throws -> [String] {
        var violations: [String] = []
        let store = try VaultLogStore(path: path)
        var keys: [String: SealingKey] = [:]
        for user in users {
            let userId = try store.unlockBlocking(email: user.email, masterPassword: user.password)
            keys[userId] = SealingKey(userKey: try store.userKey(userId: userId))
        }
        let report = try store.log.verify(keys: keys)
        violations += try itemHistoryViolations(store.log)
        store.close()
        if !report.isClean { violations.append("invariant 6: verify reports \(report.problems.prefix(3))") }
        for file in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
            guard let bytes = FileManager.default.contents(atPath: (path as NSString).appendingPathComponent(file)) else { continue }
            for sentinel in sentinels where contains(bytes, Data(sentinel.utf8)) {
                violations.append("invariant 6: plaintext password \(sentinel) found in \(file)")
            }
        }
        return violations
    }

    /// Whether `needle` occurs in `haystack`: `memchr` for its first byte, then `memcmp`.
    /// Foundation's `Data.range(of:)` compared byte by byte from every offset and took most of
    /// a seed's time on a store file of a few MiB.
    public static func contains(_ haystack: Data, _ needle: Data) -> Bool {
        guard !needle.isEmpty else { return true }
        return haystack.withUnsafeBytes { hay in
            needle.withUnsafeBytes { pin in
                guard let start = hay.baseAddress, let pattern = pin.baseAddress, hay.count >= pin.count else { return false }
                let first = Int32(pin[0])
                var offset = 0
                let last = hay.count - pin.count
                while offset <= last {
                    guard let hit = memchr(start + offset, first, last - offset + 1) else { return false }
                    let at = start.distance(to: UnsafeRawPointer(hit))
                    if memcmp(start + at, pattern, pin.count) == 0 { return true }
                    offset = at + 1
                }
                return false
            }
        }
    }

    /// Invariant 8, item histories: one item's events (the item index, merged every few events,
    /// then the headers after it) are exactly the log's events of that user and item.
    static func itemHistoryViolations(_ log: EventLogStore) throws -> [String] {
        struct Item: Hashable { let user: String, cipher: String }
        var expected: [Item: [UInt64]] = [:]
        try log.read { reader in
            try reader.forEachHeader { header in
                if !header.cipherId.isEmpty { expected[Item(user: header.userId, cipher: header.cipherId), default: []].append(header.sequence) }
                return true
            }
        }
        return try expected.compactMap { item, sequences in
            let found = try log.read { try $0.sequences(userId: item.user, cipherId: item.cipher) }
            return found == sequences ? nil
                : "invariant 8: item \(item.cipher) of user \(item.user) lists events \(found), the log holds \(sequences)"
        }.sorted()
    }
}
