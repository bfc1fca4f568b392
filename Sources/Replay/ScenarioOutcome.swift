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

/// What a scenario run observed, compared with its expectations.
public struct ScenarioOutcome: Sendable {
    /// The scenario's name.
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
    /// Events removed by the run's `compact` steps, over all users.
    public var compactedEvents = 0
    /// What the run itself saw go wrong beyond the journal: a save made while offline that
    /// the library refused, a pending-count stream that did not end at the log's count, a save
    /// that could not become durable while a resolution waited for it. One line each, in the
    /// form of ``Simulation/check(_:)``'s violations.
    public var runViolations: [String] = []

    /// Whether every expectation held (no mismatches).
    public var passed: Bool { mismatches.isEmpty }
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
    /// `delete`, `restore` (the user), `anotherDevice`, `anotherDeviceDelete`, `syncApplied` (a sync that
    /// replaced the device's copies with the server's).
    public var action: JournalAction
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
    /// `update`: the fields the save changed (the step's `item`), for the field-change
    /// invariant; nil in journals written before this was recorded.
    public var changes: ScenarioItem?
    /// A save made from a view read earlier (`openView`): the step that read it. Nil: the save
    /// started from the item's current local copy.
    public var viewStep: Int?
    /// Another device's change: true once the server answered it (nil while unknown: a lost
    /// answer may or may not have applied it).
    public var applied: Bool?
    /// `anotherDevice`: the server gave the change a revision date more than a second after the
    /// copy's it replaced (false: within the second a server's out-of-date check tolerates, on
    /// the simulated clock, so a save based on that copy still goes through over the change).
    public var newRevision: Bool?
    /// `anotherDeviceAttach`: the attachment added.
    public var attachment: ScenarioAttachment? = nil
    /// Another device's change: the server's copy it read was in the trash (a trash move of
    /// this device was applied already, perhaps before a crash recorded it).
    public var sawTrashed: Bool? = nil
    /// `anotherDeviceAttach`: the item's revision date the server's answer gave (the attachment
    /// is on every copy of the item with this revision or a later one).
    public var attachedRevision: BitwardenDate? = nil

    /// An entry from its fields; `pendingBefore`, `user` and `kept` default to nil (not recorded).
    public init(step: Int, ref: String, action: JournalAction, content: ScenarioItem?, offline: Bool,
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

/// What a journal entry records. Stored by its name (`"create"`, `"syncApplied"`, ...).
public enum JournalAction: String, Codable, Sendable, CaseIterable {
    /// An item the scenario put on the server before the run.
    case initial
    /// The device created the item.
    case create
    /// The device edited the item.
    case update
    /// The device moved the item to the trash.
    case softDelete
    /// The device deleted the item for good.
    case delete
    /// Another device edited the item.
    case anotherDevice
    /// Another device deleted the item.
    case anotherDeviceDelete
    /// A full sync was applied (`kept`: the refs whose pending local copy it kept).
    case syncApplied
    /// Another device toggled the favourite flag (every encrypted field kept).
    case anotherDeviceFavorite
    /// Another device moved the item to another folder (every encrypted field kept).
    case anotherDeviceMove
    /// Another device restored the item from the trash.
    case anotherDeviceRestore
    /// Another device encrypted the item again, every field unchanged.
    case anotherDeviceReencrypt
    /// The device took the item out of the trash.
    case restore
    /// Another device added an attachment (``ScenarioJournalEntry/attachment``).
    case anotherDeviceAttach

    /// Whether another device did it.
    public var isAnotherDevice: Bool {
        switch self {
        case .anotherDevice, .anotherDeviceDelete, .anotherDeviceFavorite, .anotherDeviceMove, .anotherDeviceRestore,
             .anotherDeviceReencrypt, .anotherDeviceAttach: return true
        case .initial, .create, .update, .softDelete, .delete, .syncApplied, .restore: return false
        }
    }
}
