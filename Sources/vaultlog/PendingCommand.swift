import ArgumentParser
import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto

/// `vaultlog pending DIR [--at SEQ]`: what is waiting to reach the server, now or at any
/// past sequence.
struct Pending: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the pending changes (the projection), now or as of a past sequence.",
        discussion: """
        With a key: for each pending item its change type, name, the server revision the first \
        offline edit was based on, how many offline edits changed the password, resolution \
        attempts, the last error, the next retry time, whether it is a dead letter, and the \
        resolver steps already done; each folder change waiting (create, rename, delete, with \
        its name); plus the temporary-id maps of items and folders and the last sync abort.
        Without a key: the pending items and change types from headers alone (what the app \
        knows while the vault is locked), for every user.
        --at SEQ shows the state right after event SEQ (time travel).

        Examples:
          vaultlog pending store
          vaultlog pending store --email me@example.com --password-stdin --at 120 < pw.txt
        """
    )

    @Argument(help: ArgumentHelp("The store directory (holding data.mdb).", valueName: "dir"))
    var directory: String

    @Option(help: ArgumentHelp("Show the state as of this sequence instead of now.", valueName: "seq"))
    var at: UInt64?

    @Flag(help: "Show passwords in clear instead of masked.")
    var reveal = false

    @Flag(help: "Print one JSON document instead of text.")
    var json = false

    @OptionGroup(title: "Key (optional)")
    var key: KeyOptions

    func run() throws {
        try reportingErrors(storePath: directory) {
            let store = try StoreAccess.openForReading(directory)
            defer { store.close() }
            let unlocked = try key.unlock(store)
            let last = try store.log.lastSequence()
            let sequence = min(at ?? last, last)
            let report: PendingReport
            if let unlocked {
                let projection = try store.projection(userId: unlocked.userId, at: sequence)
                report = PendingReport(atSequence: sequence, decrypted: true,
                                       users: [PendingReport.User(projection, key: unlocked, reveal: reveal)])
            } else {
                Console.note(KeyOptions.headersOnlyNote)
                report = PendingReport(atSequence: sequence, decrypted: false,
                                       users: try Self.headerProjections(store, upTo: sequence, only: key.user))
            }
            if json {
                try Console.jsonDocument(report)
            } else {
                report.printText()
            }
            // A quarantined item is data the store cannot read: say so with the storage exit code.
            let quarantined = report.users.flatMap { user in (user.quarantined ?? [:]).sorted { $0.key < $1.key }.map { (user.userId, $0.key, $0.value) } }
            if let (user, cipher, reason) = quarantined.first {
                throw CLIError.storage("data.mdb: user \(user): \(reason); item \(cipher) is quarantined"
                                       + (quarantined.count > 1 ? " (and \(quarantined.count - 1) more)" : ""))
            }
        }
    }

    /// Each user's pending set from headers up to `sequence` (no key needed).
    static func headerProjections(_ store: VaultLogStore, upTo sequence: UInt64, only: String?) throws -> [PendingReport.User] {
        var projections: [String: HeaderProjection] = [:]
        for user in try StoreAccess.userIds(store) where only == nil || only == user {
            projections[user] = HeaderProjection()
        }
        if let only, projections[only] == nil {
            throw CLIError.usage("the store has no user \(only)")
        }
        for user in projections.keys {
            projections[user] = try store.pendingFromHeaders(userId: user, at: sequence)
        }
        return projections.sorted { $0.key < $1.key }.map { user, projection in
            let pending = projection.pending.sorted { $0.key < $1.key }
            return PendingReport.User(userId: user, pendingCount: pending.count,
                                      pending: pending.map { PendingReport.Item(cipherId: $0.key, changeType: $0.value.rawValue) },
                                      idMap: nil, lastSyncAbort: nil)
        }
    }
}

/// What `pending` prints.
struct PendingReport: Encodable {
    var atSequence: UInt64
    /// Whether bodies were read (a key was given); otherwise only ids and change types are known.
    var decrypted: Bool
    var users: [User]

    struct User: Encodable {
        var userId: String
        var pendingCount: Int
        var pending: [Item]
        /// Temporary id → server id (key only).
        var idMap: [String: String]?
        /// The last sync abort (key only): when, why, how many were pending.
        var lastSyncAbort: SyncAbort?
        /// Items with an event that cannot be read (key only): cipher id → which event, why.
        var quarantined: [String: String]?
        /// Folder changes waiting for the server (key only), by folder id.
        var pendingFolders: [Folder]?
        /// A folder created offline: temporary id → server id (key only).
        var folderIdMap: [String: String]?

        init(userId: String, pendingCount: Int, pending: [Item], idMap: [String: String]?, lastSyncAbort: SyncAbort?) {
            self.userId = userId
            self.pendingCount = pendingCount
            self.pending = pending
            self.idMap = idMap
            self.lastSyncAbort = lastSyncAbort
        }

        init(_ projection: Projection, key: UnlockedUser, reveal: Bool) {
            userId = projection.userId
            pendingCount = projection.pendingCount
            pending = projection.pending.sorted { $0.key < $1.key }.map { Item($0.value, key: key, reveal: reveal) }
            idMap = projection.idMap
            lastSyncAbort = projection.lastSyncAbort.map {
                SyncAbort(at: $0.at.text, pendingCount: $0.pendingCount, reason: $0.reason)
            }
            quarantined = projection.quarantined
            pendingFolders = (projection.folders ?? [:]).values.sorted { $0.folderId < $1.folderId }.map { folder in
                Folder(folderId: folder.folderId, change: folder.change.rawValue,
                       name: folder.name.flatMap { try? EncString($0).decryptString(key: key.userKey) },
                       updatedAt: folder.updatedAt.text, serverId: folder.mappedServerId,
                       steps: folder.steps.map { "\($0.type) (seq \($0.sequence))" })
            }
            folderIdMap = projection.folderIdMap
        }
    }

    /// A folder change waiting for the server: create, rename or delete, the name it will have.
    struct Folder: Encodable {
        var folderId: String
        var change: String
        var name: String?
        var updatedAt: String
        /// The server id an earlier attempt created the folder under.
        var serverId: String?
        var steps: [String]
    }

    struct SyncAbort: Encodable {
        var at: String
        var pendingCount: Int?
        var reason: String?
    }

    struct Item: Encodable {
        var cipherId: String
        var changeType: String
        var item: ItemSummary?
        var originalRevisionDate: String?
        var offlinePasswordChangeCount: Int?
        var createdAt: String?
        var updatedAt: String?
        var versionSequences: [UInt64]?
        var attempts: Int?
        var lastError: String?
        var nextRetryAt: String?
        var isDeadLetter: Bool?
        /// Restored from the trash since the last trash move: the server's copy is taken out of
        /// its trash when the local version wins.
        var restoresFromTrash: Bool?
        /// Resolver steps already done for this change (type and sequence).
        var steps: [String]?

        init(cipherId: String, changeType: String) {
            self.cipherId = cipherId
            self.changeType = changeType
        }

        init(_ change: PendingChange, key: UnlockedUser, reveal: Bool) {
            cipherId = change.cipherId
            changeType = change.changeType.rawValue
            item = ItemSummary(change.latest, userKey: key.userKey, reveal: reveal)
            originalRevisionDate = change.originalRevisionDate?.text
            offlinePasswordChangeCount = change.offlinePasswordChangeCount
            createdAt = change.createdAt.text
            updatedAt = change.updatedAt.text
            versionSequences = change.versionSequences
            attempts = change.attempts
            lastError = change.lastError
            nextRetryAt = change.nextRetryAt?.text
            isDeadLetter = change.isDeadLetter
            restoresFromTrash = change.restoresFromTrash
            steps = change.steps.map { "\($0.type) (seq \($0.sequence))" }
        }
    }

    func printText() {
        for (index, user) in users.enumerated() {
            if index > 0 { Console.out("") }
            let folders = user.pendingFolders?.count ?? 0
            Console.out("user \(user.userId): \(user.pendingCount) pending"
                        + (folders > 0 ? " and \(folders) folder change\(folders == 1 ? "" : "s")" : "") + " as of seq \(atSequence)"
                        + (decrypted ? "" : " (from headers; details need a key)"))
            for item in user.pending {
                Console.out("  \(item.cipherId)  \(item.changeType)" + (item.item.map { "  \($0.text)" } ?? ""))
                guard decrypted else { continue }
                var facts: [String] = []
                facts.append(item.originalRevisionDate.map { "based on server revision \($0)" } ?? "no server revision (new item)")
                facts.append("\(item.offlinePasswordChangeCount ?? 0) offline password change(s)")
                if let created = item.createdAt.map(Format.time(bitwardenText:)), let updated = item.updatedAt.map(Format.time(bitwardenText:)) {
                    facts.append(created == updated ? "edited \(created)" : "edited \(created) … \(updated)")
                }
                if item.restoresFromTrash == true { facts.append("restored from the trash (the server's copy comes out of its trash)") }
                Console.out("      " + facts.joined(separator: ", "))
                if let versions = item.versionSequences, !versions.isEmpty {
                    Console.out("      versions at seq \(versions.map(String.init).joined(separator: ", "))")
                }
                if let attempts = item.attempts, attempts > 0 {
                    var line = "      \(attempts) failed attempt(s)"
                    if let error = item.lastError { line += ", last error: \(error)" }
                    if item.isDeadLetter == true {
                        line += "; DEAD LETTER: no automatic retries until one is requested"
                    } else if let next = item.nextRetryAt {
                        line += "; next retry at \(Format.time(bitwardenText: next))"
                    }
                    Console.out(line)
                }
                if let steps = item.steps, !steps.isEmpty {
                    Console.out("      steps done: \(steps.joined(separator: ", "))")
                }
            }
            if let quarantined = user.quarantined, !quarantined.isEmpty {
                Console.out("  QUARANTINED (an event cannot be read; the item is not resolved; run 'vaultlog verify'):")
                for (id, reason) in quarantined.sorted(by: { $0.key < $1.key }) { Console.out("    \(id): \(reason)") }
            }
            for folder in user.pendingFolders ?? [] {
                Console.out("  folder \(folder.folderId)  \(folder.change)" + (folder.name.map { "  \"\($0)\"" } ?? "")
                            + "  (edited \(Format.time(bitwardenText: folder.updatedAt)))")
                if !folder.steps.isEmpty { Console.out("      steps done: \(folder.steps.joined(separator: ", "))") }
            }
            if let idMap = user.folderIdMap, !idMap.isEmpty {
                Console.out("  folder id map (temporary → server):")
                for (temp, server) in idMap.sorted(by: { $0.key < $1.key }) { Console.out("    \(temp) → \(server)") }
            }
            if let idMap = user.idMap, !idMap.isEmpty {
                Console.out("  id map (temporary → server):")
                for (temp, server) in idMap.sorted(by: { $0.key < $1.key }) { Console.out("    \(temp) → \(server)") }
            }
            if let abort = user.lastSyncAbort {
                Console.out("  last sync aborted at \(Format.time(bitwardenText: abort.at)): \(abort.pendingCount.map(String.init) ?? "?") pending"
                            + (abort.reason.map { " (\($0))" } ?? ""))
            }
        }
    }
}
