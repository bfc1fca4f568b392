import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultModel

/// The story `vaultlog demo` tells: a user syncs, goes offline, edits (a new item, seven
/// password changes, a conflict each way, a note edit the phone's favourite flag merges with, a
/// trash move and a permanent delete) while "another device" edits too, comes back and syncs. Written as a ``Scenario`` so the same story runs
/// against the embedded emulator, any Bitwarden-compatible server, and as a fixture.
public enum DemoStory {
    /// The scenario for `user` (against a real server its account must exist).
    /// `kdf` is how the embedded emulator derives the account's master key (nil: PBKDF2, 5,000 iterations).
    public static func scenario(email: String, password: String, exactNames: Bool = true, kdf: KdfConfig? = nil) -> Scenario {
        func step(_ action: ScenarioAction, ref: String? = nil, item: ScenarioItem? = nil, seconds: Double? = nil) -> ScenarioStep {
            ScenarioStep(action, ref: ref, item: item, seconds: seconds)
        }
        var steps: [ScenarioStep] = [
            step(.sync),
            step(.offline),
            step(.advance, seconds: 600),
            step(.create, ref: "note", item: ScenarioItem(name: "VaultLog demo: Parking spot", notes: "Level 3, bay 42", username: "car", password: "p-3-42")),
            step(.advance, seconds: 60),
            step(.anotherDevice, ref: "streaming", item: ScenarioItem(password: "changed-on-the-phone")),
            step(.advance, seconds: 60),
            step(.update, ref: "streaming", item: ScenarioItem(password: "changed-on-this-laptop")),
            step(.advance, seconds: 60),
            step(.update, ref: "email", item: ScenarioItem(notes: "recovery codes updated on this laptop")),
            step(.advance, seconds: 60),
            step(.anotherDevice, ref: "email", item: ScenarioItem(notes: "recovery codes updated on the phone")),
        ]
        for n in 1...7 {
            steps += [step(.advance, seconds: 60), step(.update, ref: "bank", item: ScenarioItem(password: "bank-\(n)"))]
        }
        steps += [
            // Different parts of one item on each side: merged, no backup.
            step(.advance, seconds: 60),
            step(.update, ref: "recipes", item: ScenarioItem(notes: "pancakes: 2 eggs, 250 ml milk")),
            step(.advance, seconds: 60),
            step(.anotherDeviceFavorite, ref: "recipes"),
            step(.advance, seconds: 60),
            step(.softDelete, ref: "forum"),
            step(.advance, seconds: 60),
            step(.delete, ref: "wifi"),
            step(.online),
            step(.advance, seconds: 60),
            step(.sync),
        ]
        // Backup names carry the losing side's time: exact against the emulator's clock,
        // prefixes against a real server's.
        func backup(_ name: String, at minutes: Int) -> ScenarioItemExpectation {
            exactNames ? ScenarioItemExpectation(name: "\(name) - 2026-01-01 00:\(String(format: "%02d", minutes)):00")
                       : ScenarioItemExpectation(namePrefix: "\(name) - 20")
        }
        var emailBackup = backup("VaultLog demo: Email", at: 13)
        emailBackup.notes = "recovery codes updated on this laptop"
        var streamingBackup = backup("VaultLog demo: Streaming", at: 11)
        streamingBackup.password = "changed-on-the-phone"
        var bankBackup = backup("VaultLog demo: Bank", at: 0)
        bankBackup.password = "bank-0"
        return Scenario(
            name: "demo",
            description: "The vaultlog demo story: offline edits, conflicts both ways, deletes, and nothing lost.",
            seed: 2026,
            users: [ScenarioUser(ref: "me", email: email, password: password, kdf: kdf)],
            server: [
                ScenarioServerItem(ref: "email", item: ScenarioItem(name: "VaultLog demo: Email", notes: "recovery codes v1", username: "me@example.com", password: "email-0")),
                ScenarioServerItem(ref: "bank", item: ScenarioItem(name: "VaultLog demo: Bank", username: "me", password: "bank-0")),
                ScenarioServerItem(ref: "streaming", item: ScenarioItem(name: "VaultLog demo: Streaming", username: "me", password: "stream-0")),
                ScenarioServerItem(ref: "forum", item: ScenarioItem(name: "VaultLog demo: Old forum", username: "me", password: "forum-0")),
                ScenarioServerItem(ref: "recipes", item: ScenarioItem(type: "secureNote", name: "VaultLog demo: Recipes", notes: "pancakes: 1 egg")),
                ScenarioServerItem(ref: "wifi", item: ScenarioItem(type: "secureNote", name: "VaultLog demo: Wi-Fi", notes: "guest network key")),
            ],
            steps: steps,
            expect: ScenarioExpectation(
                outcomes: [
                    "note": ["idMapped", "resolved"],
                    "email": ["backupCreated", "serverCopyKept", "resolved"],
                    "streaming": ["backupCreated", "pushed", "resolved"],
                    "bank": ["backupCreated", "backupCreated", "pushed", "resolved"],
                    "recipes": ["pushed", "resolved"],
                    "forum": ["deleteApplied", "resolved"],
                    "wifi": ["deleteApplied", "resolved"],
                ],
                pending: ["me": 0],
                server: ["me": [
                    ScenarioItemExpectation(name: "VaultLog demo: Parking spot", password: "p-3-42"),
                    ScenarioItemExpectation(name: "VaultLog demo: Email", notes: "recovery codes updated on the phone"),
                    emailBackup,
                    ScenarioItemExpectation(name: "VaultLog demo: Streaming", password: "changed-on-this-laptop"),
                    streamingBackup,
                    ScenarioItemExpectation(name: "VaultLog demo: Bank", password: "bank-7",
                                            passwordHistory: ["bank-6", "bank-5", "bank-4", "bank-3", "bank-2"]),
                    bankBackup,
                    ScenarioItemExpectation(namePrefix: "VaultLog demo: Bank - offline passwords", passwordHistory: ["bank-1"]),
                    ScenarioItemExpectation(name: "VaultLog demo: Recipes", notes: "pancakes: 2 eggs, 250 ml milk", favorite: true),
                    ScenarioItemExpectation(name: "VaultLog demo: Old forum", deleted: true),
                ]],
                syncResults: ["applied", "applied"]))
    }

    /// The story in words, from the store the run left (outcome events of each item).
    public static func narrate(_ outcome: ScenarioOutcome, store: VaultLogStore, userKey: SymmetricCryptoKey) throws -> [String] {
        guard let userId = outcome.userIds["me"] else { return [] }
        let titles = ["note": "New item \"Parking spot\" (created offline)",
                      "bank": "\"Bank\": seven password changes offline",
                      "email": "\"Email\": edited here, then on the phone",
                      "streaming": "\"Streaming\": edited on the phone, then here",
                      "recipes": "\"Recipes\": notes edited here, marked a favourite on the phone",
                      "forum": "\"Old forum\": moved to the trash offline",
                      "wifi": "\"Wi-Fi\": permanently deleted offline"]
        var lines: [String] = []
        for ref in ["note", "bank", "email", "streaming", "recipes", "forum", "wifi"] {
            let ids = Set(outcome.itemIds[ref] ?? [])
            lines.append("• \(titles[ref]!)")
            for event in try store.events(userId: userId) where ids.contains(event.cipherId) && !event.type.isOperation {
                guard let body = event.outcome else { continue }
                let backupName = try body.cipher.flatMap { try $0.decrypt(userKey: userKey).name }.map { "\"\($0)\"" } ?? "a copy"
                let text: String?
                switch event.type {
                case .idMapped: text = "created on the server: temporary id \(event.cipherId.prefix(8))… is now \(body.serverId?.prefix(8) ?? "?")…"
                case .recreated: text = "the server had lost it: created again as \(body.serverId?.prefix(8) ?? "?")…"
                case .backupCreated where body.purpose?.isPasswordOverflow == true:
                    text = "offline passwords the 5-entry history could not hold were kept in \(backupName)"
                case .backupCreated where body.backupOf == .server:
                    text = "the server's copy was backed up as \(backupName) before being replaced (\(body.reason ?? ""))"
                case .backupCreated: text = "your offline version lost and was kept as \(backupName) (\(body.reason ?? ""))"
                case .pushed where body.merged != nil:
                    text = "merged: your change (\(body.merged?.local.joined(separator: ", ") ?? "")) and the phone's (\(body.merged?.server.joined(separator: ", ") ?? "")) touch different parts, so one item on the server holds both; no backup"
                case .pushed: text = "your version is on the server"
                case .serverCopyKept: text = "the phone's newer version stays active"
                case .deleteApplied: text = "deleted on the server (\(body.reason ?? ""))"
                case .deleteDropped: text = "the delete was dropped: the server copy had changed"
                case .cleanedUp: text = "already gone on the server; cleaned up"
                case .resolutionFailed: text = "attempt \(body.attempt ?? 0) failed: \(body.reason ?? "")"
                case .restoreApplied: text = "taken out of the server's trash"
                case .created, .updated, .softDeleted, .hardDeleted, .restored, .resolved, .clearedAfterOnlineSuccess, .retryRequested,
                     .createPlanned, .changeDiscarded, .attachmentPlanned, .attachmentCopied, .attachmentUnavailable,
                     .syncAborted, .syncApplied, .reportsReviewed, .itemFolderMissing, .folderCreated, .folderRenamed, .folderDeleted, .folderCreatePlanned, .folderMapped, .folderRenameApplied, .folderDeleteApplied, .folderAlreadyDeleted, .folderResolved, .folderChangeDiscarded:
                    text = nil
                }
                if let text { lines.append("    seq \(event.sequence): \(text)") }
            }
        }
        return lines
    }
}
