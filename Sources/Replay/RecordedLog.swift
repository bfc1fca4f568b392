import Foundation
@_spi(Tools) import OfflineSync

/// A recorded log: an export (`vaultlog export`, JSON Lines of sealed envelopes) kept under
/// `Fixtures/logs/NAME.jsonl` with `NAME.expect.json`, what a reader must see in it: the
/// decoded events and the projection. `vaultlog replay NAME.jsonl` imports it into a fresh
/// store and compares; the format-v1 log proves every later version still reads version 1.
public enum RecordedLog {
    /// What a reader of the log must see (for the account the file names).
    public struct Expectation: Codable, Equatable, Sendable {
        /// One event of the log as a reader decodes it.
        public struct Event: Codable, Equatable, Sendable {
            /// The event's sequence number in the log.
            public var sequence: UInt64
            /// The account the event belongs to (from its header).
            public var userId: String
            /// The item the event is about.
            public var cipherId: String
            /// The event type's name (`created`, `updated`, `idMapped`...).
            public var type: String
            /// Operations: the decrypted name and password of the snapshot.
            public var name: String?
            /// Operations: the decrypted login password of the snapshot, if it has one.
            public var password: String?
            /// Operations: whether the edit changed the password.
            public var passwordChanged: Bool?
            /// Outcomes: the reason and server id.
            public var reason: String?
            /// Outcomes: the server's id of the item, when the outcome carries one.
            public var serverId: String?
        }
        /// The account's login email.
        public var email: String
        /// The master password that unlocks the account (a test fixture's, never a real one).
        public var password: String
        /// The user id the unlock must yield.
        public var userId: String
        /// Every event of the account, in sequence order.
        public var events: [Event]
        /// The projection: pending change type and password-change count per item, id map.
        public var pending: [String: String]
        /// Offline password changes counted per pending item (cipher id → count).
        public var passwordChanges: [String: Int]
        /// Temporary id → server id, for creates that reached the server.
        public var idMap: [String: String]
    }

    /// `NAME.expect.json` beside `NAME.jsonl`.
    public static func expectationPath(forLog path: String) -> String {
        (path.hasSuffix(".jsonl") ? String(path.dropLast(6)) : path) + ".expect.json"
    }

    /// Loads an expectation file, with an error naming it.
    public static func loadExpectation(path: String) throws -> Expectation {
        do {
            return try JSONDecoder().decode(Expectation.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
        } catch let error as DecodingError {
            throw ReplayError.malformed(path: path, reason: Scenario.describe(error))
        } catch {
            throw ReplayError.unreadable(path: path, reason: error.localizedDescription)
        }
    }

    /// Reads a store as `email` (unlocked with `password`): every event decoded, the projection.
    public static func observe(store: VaultLogStore, email: String, password: String) throws -> Expectation {
        let userId = try store.unlockBlocking(email: email, masterPassword: password)
        let key = try store.userKey(userId: userId)
        let events = try store.events(userId: userId).map { event -> Expectation.Event in
            var e = Expectation.Event(sequence: event.sequence, userId: event.header.userId, cipherId: event.cipherId,
                                      type: event.type.description)
            if let op = event.operation {
                let view = try op.cipher.decrypt(userKey: key)
                e.name = view.name
                e.password = view.login?.password
                e.passwordChanged = op.passwordChanged
            }
            if let outcome = event.outcome {
                e.reason = outcome.reason
                e.serverId = outcome.serverId
            }
            return e
        }
        let projection = try store.projection(userId: userId)
        return Expectation(email: email, password: password, userId: userId, events: events,
                           pending: projection.pending.mapValues(\.changeType.rawValue),
                           passwordChanges: projection.pending.mapValues(\.offlinePasswordChangeCount),
                           idMap: projection.idMap)
    }

    /// Readable differences, one line each.
    public static func compare(_ expected: Expectation, _ actual: Expectation) -> [String] {
        var lines: [String] = []
        if expected.userId != actual.userId { lines.append("userId: expected \(expected.userId), actual \(actual.userId)") }
        if expected.events.count != actual.events.count {
            lines.append("events: expected \(expected.events.count), actual \(actual.events.count)")
        }
        for (want, got) in zip(expected.events, actual.events) where want != got {
            lines.append("event \(want.sequence): expected \(want)")
            lines.append("event \(want.sequence):   actual \(got)")
        }
        if expected.pending != actual.pending { lines.append("pending: expected \(expected.pending.sorted { $0.key < $1.key }), actual \(actual.pending.sorted { $0.key < $1.key })") }
        if expected.passwordChanges != actual.passwordChanges {
            lines.append("passwordChanges: expected \(expected.passwordChanges.sorted { $0.key < $1.key }), actual \(actual.passwordChanges.sorted { $0.key < $1.key })")
        }
        if expected.idMap != actual.idMap { lines.append("idMap: expected \(expected.idMap), actual \(actual.idMap)") }
        return lines
    }
}
