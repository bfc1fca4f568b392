import BitwardenEmulator
import Foundation
import VaultCrypto

/// A replay scenario: plaintext JSON a test author writes (or `vaultlog demo --record`
/// writes), run deterministically by ``ScenarioRunner`` against the in-process emulator with a
/// fixed clock and seeded ids and IVs. Format: `Docs/Fixtures.md`.
public struct Scenario: Codable, Sendable, Equatable {
    /// Format version of the scenario file.
    public var format: Int = 1
    /// The scenario's name: reported in the outcome and part of the store directory's name.
    public var name: String
    /// What the scenario shows, for people reading the file (the runner does not use it).
    public var description: String?
    /// `bitwarden` (default) or `vaultwarden`.
    public var flavor: EmulatorFlavor?
    /// Seeds ids, IVs and keys; the same seed gives the same log byte for byte.
    public var seed: UInt64?
    /// Whether the resolver merges an offline edit with another device's change of other parts
    /// of the item (`ResolverOptions.mergesDisjointChanges`); default true. False:
    /// the decision matrix for every change another device made.
    public var merge: Bool?
    /// Accounts on the server (default: one user `alice`).
    public var users: [ScenarioUser]?
    /// Items on the server and in the local store before the first step (as after a sync).
    public var server: [ScenarioServerItem]?
    /// What happens, in order.
    public var steps: [ScenarioStep]
    /// What must hold after the last step.
    public var expect: ScenarioExpectation

    /// A format-1 scenario from its parts; an optional part left nil takes its default.
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
    /// The account's login email.
    public var email: String
    /// The account's master password.
    public var password: String
    /// How the emulator derives the account's master key; default PBKDF2 with 5,000 iterations
    /// (fast). JSON: `{"pbkdf2": {"iterations": 5000}}` or
    /// `{"argon2id": {"iterations": 2, "memoryMiB": 16, "parallelism": 1}}`.
    public var kdf: KdfConfig?

    /// A user from its parts; `kdf` nil means the default PBKDF2 with 5,000 iterations.
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
    /// The item's name (empty when a new item gives none).
    public var name: String?
    /// The item's notes.
    public var notes: String?
    /// The login's username (ignored for a secure note).
    public var username: String?
    /// The login's password (ignored for a secure note).
    public var password: String?
    /// The id of the folder the item is in, as the server knows it (``folder`` names one by ref).
    public var folderId: String?
    /// Old passwords, newest first: the history an item already has (items on the server
    /// before the first step; an edit replaces the history only when given).
    public var passwordHistory: [String]?
    /// A folder by its ref (a `createFolder` step's): the item is put in that folder.
    public var folder: String?

    /// An item from its fields; every field defaults to nil (not given).
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
    /// How steps and expectations name the item.
    public var ref: String
    /// Owner (default: the first user).
    public var user: String?
    /// The item's plaintext content.
    public var item: ScenarioItem

    /// A server item from its parts; `user` nil means the first user.
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
/// | `restore` | `ref` | the user takes the item out of the trash (online or offline) |
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
/// | `compact` | `keepDays`, `keepVersions` (defaults 30, 5) | the user's log is compacted under that retention policy, then the device reopens its store; the projection must be the same as before (skipped while the vault is locked) |
/// | `concurrently` | `steps` | the sub-steps (`sync`, `resolve`, `create`, `update`, `softDelete`, `delete`, `restore`, `folderDelete`) run at once (one task each) on the user's one shared resolver; recorded in order afterwards |
/// | `atEffect` | `afterEffect`, `steps` | the next `sync`/`resolve` runs the sub-steps (saves, `offline`, `online`) right after its n-th server effect, while that resolution waits for each save to return |
/// | `openView` | `ref`, `view` | a screen reads the item's view (decrypted local copy) and keeps it under the name `view`; an `update` or `softDelete` with `view` saves from it later |
/// | `anotherDeviceFavorite` / `anotherDeviceMove` | `ref` (`item.folder` for a move) | another device toggles the favourite flag / moves the item to a folder, keeping every encrypted field (the name included) |
/// | `anotherDeviceRestore` | `ref` | another device restores the item from the trash (`PUT …/restore`) |
/// | `anotherDeviceReencrypt` | `ref` | another device encrypts the item again with every field unchanged (a new encrypted name) |
/// | `coldStart` | | the app restarts: in-memory state dropped, store reopened, vaults unlocked from the stored accounts, the device's clients hold no session tokens |
/// | `login` | | the device's clients log in again (after a `coldStart`) |
/// | `anotherDeviceAttach` | `ref`, `attachment` | another device adds an attachment (file name and text contents) to the item |
/// | `folderCreate` | `ref`, `item.name` (default "folder {ref}") | the user creates a folder (online, or offline with a temporary id items may name by `folder`) |
/// | `folderRename` / `folderDelete` | `ref` (`item.name` for a rename) | the user renames / deletes a folder (online or offline) |
/// | `anotherDeviceFolderRename` / `anotherDeviceFolderDelete` | `ref` (`item.name` for a rename) | another device renames / deletes the folder on the server |
/// | `folderDiscard` | `ref` | the user discards the folder's pending change (`OfflineSyncResolver.discardPendingFolderChange`) |
///
/// `user` picks the acting user (default: the first); `expectError` (a substring) makes the
/// step expect a thrown error, e.g. an organization item that is never saved offline;
/// `optional` ignores a failure of the step.
public struct ScenarioStep: Codable, Sendable, Equatable {
    /// The action.
    public var `do`: ScenarioAction
    /// The acting user's ref (default: the first user).
    public var user: String?
    /// The item (or, for `createFolder`, folder) ref the step acts on; creating steps give the new
    /// item this ref.
    public var ref: String?
    /// The content: the whole item for a create, the fields to change for an edit.
    public var item: ScenarioItem?
    /// `advance`: how far the clock moves, in seconds, from 0 to 100 years.
    public var seconds: Double?
    /// `fault`: the server fault to set up or clear.
    public var fault: ScenarioFault?
    /// `crash`: the next `sync` or `resolve` crashes right after this server effect (1-based);
    /// `atEffect`: it runs the step's `steps` there.
    public var afterEffect: Int?
    /// The step must throw an error whose text contains this; a step that succeeds fails the run.
    public var expectError: String?
    /// A failure of this step is ignored (generated scenarios: another device may edit an item
    /// the server does not have yet).
    public var optional: Bool?
    /// `compact`: resolved events younger than this many days stay (default 30).
    public var keepDays: Int?
    /// `compact`: versions kept per item in the snapshot (default 5).
    public var keepVersions: Int?
    /// `concurrently` and `atEffect`: the sub-steps (not themselves `concurrently` or `atEffect`).
    public var steps: [ScenarioStep]?
    /// `openView`: the name the view is kept under; `update` / `softDelete`: save from that view
    /// (read earlier, perhaps stale) instead of the item's current local copy.
    public var view: String?
    /// `anotherDeviceAttach`: the attachment another device adds to the item.
    public var attachment: ScenarioAttachment? = nil

    /// A step from its action and arguments; every argument defaults to nil (not given).
    public init(_ action: ScenarioAction, user: String? = nil, ref: String? = nil, item: ScenarioItem? = nil, seconds: Double? = nil,
                fault: ScenarioFault? = nil, afterEffect: Int? = nil, expectError: String? = nil, optional: Bool? = nil,
                keepDays: Int? = nil, keepVersions: Int? = nil, steps: [ScenarioStep]? = nil, view: String? = nil) {
        self.do = action
        self.user = user
        self.ref = ref
        self.item = item
        self.seconds = seconds
        self.fault = fault
        self.afterEffect = afterEffect
        self.expectError = expectError
        self.optional = optional
        self.keepDays = keepDays
        self.keepVersions = keepVersions
        self.steps = steps
        self.view = view
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
    case compact
    case concurrently, atEffect, openView
    case anotherDeviceFavorite, anotherDeviceMove, anotherDeviceRestore, anotherDeviceReencrypt
    case coldStart, login
    case restore
    case anotherDeviceAttach
    case folderCreate, folderRename, folderDelete, anotherDeviceFolderRename, anotherDeviceFolderDelete
    case folderDiscard

    /// The action's name, as in the file.
    public var description: String { rawValue }

    /// Decodes the action's name; an unknown name throws a `DecodingError` listing the known ones.
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
    /// The file at `path` could not be read.
    case unreadable(path: String, reason: String)
    /// The file at `path` is not a valid scenario (bad JSON, a missing field, an unknown action,
    /// or a newer format).
    case malformed(path: String, reason: String)
    /// A step the runner cannot perform (an unknown ref, a missing argument...).
    case badStep(index: Int, reason: String)

    /// What went wrong, naming the file or the step (1-based), with a pointer to `Docs/Fixtures.md`.
    public var description: String {
        switch self {
        case .unreadable(let path, let reason): return "\(path): cannot read the scenario (\(reason))"
        case .malformed(let path, let reason): return "\(path): not a valid scenario: \(reason); see Docs/Fixtures.md"
        case .badStep(let index, let reason): return "step \(index + 1): \(reason); see Docs/Fixtures.md"
        }
    }
}
