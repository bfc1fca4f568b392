import BitwardenEmulator
import Foundation
import VaultCrypto

/// A replay scenario: plaintext JSON a test author writes (or `vaultlog demo --record`
/// writes), run deterministically by ``ScenarioRunner`` against the in-process emulator with a
/// fixed clock and seeded ids and IVs. Format: `Docs/Fixtures.md`.
public struct Scenario: Codable, Sendable, Equatable {
    /// Format version of the scenario file.
    public var format: Int = 1
    public var name: String
    public var description: String?
    /// `bitwarden` (default) or `vaultwarden`.
    public var flavor: EmulatorFlavor?
    /// Seeds ids, IVs and keys; the same seed gives the same log byte for byte.
    public var seed: UInt64?
    /// Accounts on the server (default: one user `alice`).
    public var users: [ScenarioUser]?
    /// Items on the server and in the local store before the first step (as after a sync).
    public var server: [ScenarioServerItem]?
    public var steps: [ScenarioStep]
    public var expect: ScenarioExpectation

    public init(name: String, description: String? = nil, flavor: EmulatorFlavor? = nil, seed: UInt64? = nil,
                users: [ScenarioUser]? = nil, server: [ScenarioServerItem]? = nil, steps: [ScenarioStep], expect: ScenarioExpectation) {
        self.name = name
        self.description = description
        self.flavor = flavor
        self.seed = seed
        self.users = users
        self.server = server
        self.steps = steps
        self.expect = expect
    }
}

/// An account of the scenario.
public struct ScenarioUser: Codable, Sendable, Equatable {
    /// How steps and expectations name the user.
    public var ref: String
    public var email: String
    public var password: String
    /// How the emulator derives the account's master key; default PBKDF2 with 5,000 iterations
    /// (fast). JSON: `{"pbkdf2": {"iterations": 5000}}` or
    /// `{"argon2id": {"iterations": 2, "memoryMiB": 16, "parallelism": 1}}`.
    public var kdf: KdfConfig?

    public init(ref: String, email: String, password: String, kdf: KdfConfig? = nil) {
        self.ref = ref
        self.email = email
        self.password = password
        self.kdf = kdf
    }
}

/// The plaintext content of an item (encrypted by the runner).
public struct ScenarioItem: Codable, Sendable, Equatable {
    /// `login` (default) or `secureNote`.
    public var type: String?
    public var name: String?
    public var notes: String?
    public var username: String?
    public var password: String?
    public var folderId: String?
    /// Old passwords, newest first: the history an item already has (items on the server
    /// before the first step; an edit replaces the history only when given).
    public var passwordHistory: [String]?
    /// A folder by its ref (a `createFolder` step's): the item is put in that folder.
    public var folder: String?

    public init(type: String? = nil, name: String? = nil, notes: String? = nil, username: String? = nil,
                password: String? = nil, folderId: String? = nil, passwordHistory: [String]? = nil, folder: String? = nil) {
        self.type = type
        self.name = name
        self.notes = notes
        self.username = username
        self.password = password
        self.folderId = folderId
        self.passwordHistory = passwordHistory
        self.folder = folder
    }
}

/// An item present before the scenario starts.
public struct ScenarioServerItem: Codable, Sendable, Equatable {
    public var ref: String
    /// Owner (default: the first user).
    public var user: String?
    public var item: ScenarioItem

    public init(ref: String, user: String? = nil, item: ScenarioItem) {
        self.ref = ref
        self.user = user
        self.item = item
    }
}

/// One step. `do` names the action; the other fields are its arguments.
///
/// | `do` | arguments | what happens |
/// |---|---|---|
/// | `offline` / `online` | | the device's network (the emulator refuses connections) |
/// | `advance` | `seconds` | the shared clock moves |
/// | `create` | `ref`, `item` | the user adds an item (online or offline) |
/// | `update` | `ref`, `item` (fields to change) | the user edits an item |
/// | `softDelete` / `delete` | `ref` | trash / permanent delete |
/// | `anotherDevice` | `ref`, `item` | another device edits the server copy |
/// | `anotherDeviceDelete` | `ref` | another device permanently deletes it |
/// | `anotherDeviceCreate` | `ref`, `item` | another device adds an item |
/// | `createFolder` | `ref` | another device adds a folder; items name it by `folder` |
/// | `lock` / `unlock` | | the user's vault |
/// | `sync` | | `SyncService.fetchSync` (resolves first) |
/// | `resolve` | | `OfflineSyncResolver.processPendingChanges` |
/// | `retryDeadLetters` | | puts dead letters back into retries |
/// | `fault` | `fault` | server fault injection (see ``ScenarioFault``) |
/// | `crash` | `afterEffect` | the next `sync`/`resolve` crashes right after server effect n (1-based), then the device reopens its store |
///
/// `user` picks the acting user (default: the first); `expectError` (a substring) makes the
/// step expect a thrown error, e.g. an organization item that is never saved offline;
/// `optional` ignores a failure of the step.
public struct ScenarioStep: Codable, Sendable, Equatable {
    public var `do`: ScenarioAction
    public var user: String?
    public var ref: String?
    public var item: ScenarioItem?
    public var seconds: Double?
    public var fault: ScenarioFault?
    public var afterEffect: Int?
    public var expectError: String?
    /// A failure of this step is ignored (generated scenarios: another device may edit an item
    /// the server does not have yet).
    public var optional: Bool?

    public init(_ action: ScenarioAction, user: String? = nil, ref: String? = nil, item: ScenarioItem? = nil, seconds: Double? = nil,
                fault: ScenarioFault? = nil, afterEffect: Int? = nil, expectError: String? = nil, optional: Bool? = nil) {
        self.do = action
        self.user = user
        self.ref = ref
        self.item = item
        self.seconds = seconds
        self.fault = fault
        self.afterEffect = afterEffect
        self.expectError = expectError
        self.optional = optional
    }
}

/// What a ``ScenarioStep`` does (its `do` field; the table on ``ScenarioStep`` says what each
/// one needs). Stored as its name, so files written before this type existed still decode; an
/// unknown name is refused when the file is read, naming the step and listing the known ones.
public enum ScenarioAction: String, Codable, Sendable, CaseIterable, CustomStringConvertible {
    case offline, online, advance
    case create, update, softDelete, delete
    case anotherDevice, anotherDeviceDelete, anotherDeviceCreate, createFolder
    case lock, unlock, sync, resolve, retryDeadLetters
    case fault, crash

    public var description: String { rawValue }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let name = try container.decode(String.self)
        guard let action = ScenarioAction(rawValue: name) else {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "unknown action '\(name)' (known: \(Self.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        self = action
    }
}

/// A server fault: `failNext` requests matching `method` and `path` answer `status` (the
/// server does nothing); `dropResponseAfterApply` requests are applied but answered by a
/// closed connection; `clear` removes every fault.
public struct ScenarioFault: Codable, Sendable, Equatable {
    public var failNext: Int?
    public var dropResponseAfterApply: Int?
    public var method: String?
    /// A substring of the path; `{ref}` is replaced by the item's current server id.
    public var path: String?
    public var status: Int?
    /// With `failNext`: answer `status` with these raw bytes instead of the server's error body
    /// (a proxy in front of the server, such as an HTML 403); the request is not applied.
    public var body: String?
    public var clear: Bool?

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
    /// The results of the `sync` steps in order: `applied` or `aborted`.
    public var syncResults: [String]?

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
    public var name: String?
    /// The name must start with this (backups carry a timestamp).
    public var namePrefix: String?
    public var password: String?
    public var notes: String?
    /// Passwords of the history, newest first.
    public var passwordHistory: [String]?
    /// In the trash.
    public var deleted: Bool?
    /// The folder's ref (a `createFolder` step's), when the item is in one.
    public var folder: String?

    public init(name: String? = nil, namePrefix: String? = nil, password: String? = nil, notes: String? = nil,
                passwordHistory: [String]? = nil, deleted: Bool? = nil, folder: String? = nil) {
        self.name = name
        self.namePrefix = namePrefix
        self.password = password
        self.notes = notes
        self.passwordHistory = passwordHistory
        self.deleted = deleted
        self.folder = folder
    }

    public var description: String {
        var parts: [String] = []
        if let name { parts.append("name=\(name.debugDescription)") }
        if let namePrefix { parts.append("name^=\(namePrefix.debugDescription)") }
        if let password { parts.append("password=\(password.debugDescription)") }
        if let notes { parts.append("notes=\(notes.debugDescription)") }
        if let passwordHistory { parts.append("history=\(passwordHistory)") }
        if let deleted { parts.append("deleted=\(deleted)") }
        if let folder { parts.append("folder=\(folder.debugDescription)") }
        return "{" + parts.joined(separator: ", ") + "}"
    }
}

extension Scenario {
    /// Decodes a scenario file, with an error naming the file and the JSON problem.
    public static func load(path: String) throws -> Scenario {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw ReplayError.unreadable(path: path, reason: "\(error.localizedDescription)")
        }
        return try decode(data, path: path)
    }

    /// Decodes scenario JSON already read (what ``load(path:)`` does after reading the file);
    /// `path` only names the source in errors.
    ///
    /// ```swift
    /// let scenario = try Scenario.decode(Data(json.utf8), path: "inline scenario")
    /// ```
    public static func decode(_ data: Data, path: String) throws -> Scenario {
        do {
            let scenario = try JSONDecoder().decode(Scenario.self, from: data)
            guard scenario.format == 1 else {
                throw ReplayError.malformed(path: path, reason: "scenario format \(scenario.format) is newer than this build reads (1)")
            }
            return scenario
        } catch let error as ReplayError {
            throw error
        } catch let error as DecodingError {
            throw ReplayError.malformed(path: path, reason: Self.describe(error))
        } catch {
            throw ReplayError.malformed(path: path, reason: "\(error)")
        }
    }

    /// Encodes the scenario as pretty, key-sorted JSON (what `demo --record` writes).
    public func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let p = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return p.isEmpty ? "the top level" : String(p.drop(while: { $0 == "." }))
        }
        switch error {
        case .keyNotFound(let key, let context): return "missing field '\(key.stringValue)' at \(path(context))"
        case .typeMismatch(_, let context), .valueNotFound(_, let context): return "\(context.debugDescription) at \(path(context))"
        case .dataCorrupted(let context): return "\(context.debugDescription) at \(path(context))"
        @unknown default: return "\(error)"
        }
    }
}

/// Errors of loading and running scenarios.
public enum ReplayError: Error, Sendable, Equatable, CustomStringConvertible {
    case unreadable(path: String, reason: String)
    case malformed(path: String, reason: String)
    /// A step the runner cannot perform (an unknown ref, a missing argument...).
    case badStep(index: Int, reason: String)

    public var description: String {
        switch self {
        case .unreadable(let path, let reason): return "\(path): cannot read the scenario (\(reason))"
        case .malformed(let path, let reason): return "\(path): not a valid scenario: \(reason); see Docs/Fixtures.md"
        case .badStep(let index, let reason): return "step \(index + 1): \(reason); see Docs/Fixtures.md"
        }
    }
}
