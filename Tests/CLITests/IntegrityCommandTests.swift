import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import Replay
import Testing
import VaultCrypto
import VaultModel
import VaultLogTesting
import VaultLogTestSupport

/// `verify`, `export`/`import` and `decrypt`, through the built binary.
@Suite("vaultlog integrity commands")
struct IntegrityCommandTests {
    let fixture = StoreFixture.shared

    // MARK: verify

    @Test func verify_cleanStore_withKey_exits0AndAuthenticates() throws {
        let result = try CLI.run(["verify", fixture.store, "--json"] + fixture.passwordArgs)
        #expect(result.status == 0, "\(result)")
        let document = try result.jsonDocument()
        #expect(document["clean"] as? Bool == true)
        #expect(document["eventsChecked"] as? Int == 10)
        #expect(document["eventsAuthenticated"] as? Int == 9, "user A's nine events")
        #expect(document["usersWithoutKey"] as? [String] == ["user-b"])
    }

    @Test func verify_withoutKey_saysMacsWereNotChecked() throws {
        let result = try CLI.run(["verify", fixture.store])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("OK: no problems found"))
        #expect(result.stdout.contains("MACs not checked for user(s) user-a, user-b"))
    }

    @Test func verify_flippedByteInEnvelopeBody_exits1NamingTheSequence() throws {
        let copy = try copyWithEvent3Damaged()

        let result = try CLI.run(["verify", copy.path] + fixture.passwordArgs)
        #expect(result.status == 1, "\(result)")
        #expect(result.stdout.contains("PROBLEMS: 1 problem(s) at sequence(s) 3"), "\(result)")
        #expect(result.stdout.contains("seq 3: failed authentication"))

        let json = try CLI.run(["verify", copy.path, "--json", "--user-key-file", fixture.userKeyFile, "--user", "user-a"])
        #expect(json.status == 1, "\(json)")
        #expect(try json.jsonDocument()["damagedSequences"] as? [Int] == [3])
    }

    @Test func events_onCorruptedCopy_exits4NamingTheEvent() throws {
        let copy = try copyWithEvent3Damaged()

        let result = try CLI.run(["pending", copy.path] + fixture.passwordArgs)
        #expect(result.status == 4, "\(result)")
        #expect(result.stderr.contains("data.mdb"), "\(result)")
        #expect(result.stderr.contains("event 3"))
    }

    /// `events` and `history` show what they can of a damaged log (every other event), then
    /// exit 1 naming the first event that did not open, as `verify` would.
    @Test func eventsAndHistory_onADamagedEvent_showTheRest_andExit1() throws {
        let copy = try copyWithEvent3Damaged()

        let events = try CLI.run(["events", copy.path] + fixture.passwordArgs)
        #expect(events.status == 1, "\(events)")
        #expect(events.stdout.contains("seq 2, 2026-01-01 10:02:00Z: edited offline"), "\(events)")
        #expect(events.stdout.contains("seq 10,"), "the events after the damaged one are shown")
        #expect(events.stderr.contains("1 event(s) shown above could not be read with this key (first: sequence 3)"), "\(events)")
        #expect(events.stderr.contains("vaultlog verify \(copy.path)"))

        let history = try CLI.run(["history", copy.path, "server-bank", "--json"] + fixture.passwordArgs)
        #expect(history.status == 1, "\(history)")
        #expect(try history.jsonLines().count == 3, "\(history)")
        #expect(history.stderr.contains("(first: sequence 3)"), "\(history)")

        let clean = try CLI.run(["events", fixture.store] + fixture.passwordArgs)
        #expect(clean.status == 0, "\(clean)")
    }

    @Test func notAStore_exits4NamingTheFile() throws {
        let dir = TemporaryDirectory("vaultlog-garbage", create: true)
        try Data(repeating: 0x5A, count: 16384).write(to: URL(fileURLWithPath: dir.file("data.mdb")))
        let result = try CLI.run(["info", dir.path])
        #expect(result.status == 4, "\(result)")
        #expect(result.stderr.contains("\(dir.path)/data.mdb"))
    }

    /// A copy of the fixture's store in which event 3 (a password change of `server-bank`) has
    /// one ciphertext byte flipped.
    private func copyWithEvent3Damaged() throws -> TemporaryDirectory {
        let copy = TemporaryDirectory("vaultlog-corrupt", create: true)
        try fixture.copyStore(to: copy.path)
        let target = try #require(try StoreFixture.envelopes(of: fixture.store).first { $0.header.sequence == 3 })
        try flipByte(ofEnvelope: target.bytes, inDataFileOf: copy.path)
        return copy
    }

    /// Flips one ciphertext byte of every stored copy of `envelope` in `data.mdb`.
    private func flipByte(ofEnvelope envelope: [UInt8], inDataFileOf dir: String) throws {
        let path = (dir as NSString).appendingPathComponent("data.mdb")
        var data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let headerLength = Int(envelope[1])
        let offsetInEnvelope = headerLength + 16 + 32 + 16 + 5 // a ciphertext byte (after the IV and the two MACs of format 3)
        var flipped = 0
        var start = 0
        while start + envelope.count <= data.count {
            if data[start] == envelope[0], data[start..<start + envelope.count].elementsEqual(envelope) {
                data[start + offsetInEnvelope] ^= 0x01
                flipped += 1
                start += envelope.count
            } else {
                start += 1
            }
        }
        try #require(flipped > 0, "the envelope was not found in data.mdb")
        try Data(data).write(to: URL(fileURLWithPath: path))
    }

    // MARK: export / import

    @Test func exportImport_roundTrip_isByteIdenticalAndVerifiesClean() throws {
        let work = TemporaryDirectory("vaultlog-export", create: true)
        let file = work.file("log.jsonl")
        let export = try CLI.run(["export", fixture.store, "--out", file])
        #expect(export.status == 0, "\(export)")

        let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 11, "metadata + one line per envelope")
        let metadata = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(metadata["format"] as? String == "vaultlog-export")
        #expect(metadata["version"] as? Int == 1)
        #expect(metadata["eventCount"] as? Int == 10)

        let copy = work.file("copy")
        let imported = try CLI.run(["import", file, copy])
        #expect(imported.status == 0, "\(imported)")
        #expect(imported.stdout.contains("verify: OK"))
        #expect(imported.stderr.contains("no key given: the MACs") && imported.stderr.contains("were not checked"),
                "an import without a key says what it could not check: \(imported)")

        let original = try StoreFixture.envelopes(of: fixture.store)
        let restored = try StoreFixture.envelopes(of: copy)
        #expect(original.count == 10)
        #expect(restored.map(\.bytes) == original.map(\.bytes), "every envelope byte-identical")
        #expect(restored.map(\.header) == original.map(\.header))

        // The copy verifies clean with the MACs, unlocked by the account carried in the export.
        let verify = try CLI.run(["verify", copy, "--json"] + fixture.passwordArgs)
        #expect(verify.status == 0, "\(verify)")
        #expect(try verify.jsonDocument()["eventsAuthenticated"] as? Int == 9)
    }

    @Test func export_toStdout_isJSONLines() throws {
        let result = try CLI.run(["export", fixture.store])
        #expect(result.status == 0, "\(result)")
        let lines = try result.jsonLines()
        #expect(lines.count == 11)
        #expect(lines.dropFirst().map { $0["sequence"] as? Int } == Array(1...10))
        #expect(lines.dropFirst().allSatisfy { ($0["envelope"] as? String).flatMap { Data(base64Encoded: $0) } != nil })
    }

    @Test func import_malformedLine_isRefusedWithItsLineNumber() throws {
        let work = TemporaryDirectory("vaultlog-import", create: true)
        let file = work.file("log.jsonl")
        #expect(try CLI.run(["export", fixture.store, "--out", file]).status == 0)
        var lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n").map(String.init)
        lines[2] = lines[2].replacingOccurrences(of: "\"envelope\":\"", with: "\"envelope\":\"!!")
        try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)

        let target = work.file("copy")
        let result = try CLI.run(["import", file, target])
        #expect(result.status == 4, "\(result)")
        #expect(result.stderr.contains("line 3:"), "\(result)")
        #expect(!FileManager.default.fileExists(atPath: target), "nothing is created for a refused file")
    }

    /// The fixture's export in `work`, its metadata and lines changed by `edit`, written back as
    /// a file; returns the file and the metadata as edited.
    func editedExport(_ work: TemporaryDirectory,
                      _ edit: (inout ExportFormat.Metadata, inout [String]) throws -> Void) throws -> (file: String, metadata: ExportFormat.Metadata) {
        let file = work.file("log.jsonl")
        #expect(try CLI.run(["export", fixture.store, "--out", file]).status == 0)
        var lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n").map(String.init)
        var metadata = try ExportFormat.metadata(line: lines[0])
        try edit(&metadata, &lines)
        lines[0] = try ExportFormat.encode(metadata)
        try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        return (file, metadata)
    }

    @Test func import_accountWithKdfOutOfRange_isRefusedNamingTheAccount() throws {
        let work = TemporaryDirectory("vaultlog-import", create: true)
        let (file, metadata) = try editedExport(work) { metadata, _ in metadata.accounts[0].kdf = .pbkdf2(iterations: 5_000_000_000) }
        let target = work.file("copy")
        let result = try CLI.run(["import", file, target])
        #expect(result.status == 4, "\(result)")
        #expect(result.stderr.contains("line 1:") && result.stderr.contains(metadata.accounts[0].email)
                && result.stderr.contains("5000000000"), "\(result)")
        #expect(!FileManager.default.fileExists(atPath: target), "nothing is created for a refused file")
    }

    @Test func import_keepsTheHeadRecords_soARemovedTailIsStillFound() throws {
        let work = TemporaryDirectory("vaultlog-import", create: true)
        var removed: Envelope?
        let (file, _) = try editedExport(work) { metadata, lines in
            #expect(metadata.heads?.isEmpty == false, "the export carries the sealed heads")
            // Drop the last event (metadata adjusted so the file itself is consistent).
            removed = try ExportFormat.envelope(line: lines.removeLast())
            metadata.eventCount -= 1
            metadata.lastSequence = try ExportFormat.envelope(line: lines.last!).header.sequence
        }
        let last = try #require(removed)
        let result = try CLI.run(["import", file, work.file("copy")])
        // Refused before anything is committed: the head names an event the file does not have
        // (it used to be found only by the final check, after the commit).
        #expect(result.status == 4, "\(result)")
        #expect(result.stderr.contains("names event \(last.header.sequence) as the user's last, past the last event given"), "\(result)")
        #expect(!FileManager.default.fileExists(atPath: work.file("copy")), "a store is left behind")
    }

    /// An event removed from the middle of an export: the import commits (each line is well
    /// formed), the final check finds the broken chain, and the store is removed (it used to
    /// stay, for an app to open).
    @Test func import_whoseFinalCheckFails_removesTheStore() throws {
        let work = TemporaryDirectory("vaultlog-import", create: true)
        let (file, _) = try editedExport(work) { metadata, lines in
            lines.remove(at: lines.count / 2)
            metadata.eventCount -= 1
        }
        let result = try CLI.run(["import", file, work.file("copy")])
        #expect(result.status == 1, "\(result)")
        #expect(result.stdout.contains("chain"), "\(result)")
        #expect(!FileManager.default.fileExists(atPath: work.file("copy")), "the store that failed its check is still there")
        #expect(result.stderr.contains("failed its final check and was removed"), "\(result)")
    }

    /// With the key, the head records and snapshots the export carries are checked before
    /// anything is committed (a forged head record used to be imported, and then refused every
    /// append of its user).
    @Test func import_withTheKey_refusesATamperedHeadRecord_andImportsNothing() throws {
        let work = TemporaryDirectory("vaultlog-import", create: true)
        let (file, _) = try editedExport(work) { metadata, _ in
            var head = try #require(metadata.heads?[StoreFixture.userA].flatMap { Base64.decode($0) })
            head[head.count - 1] ^= 0x01
            metadata.heads?[StoreFixture.userA] = Base64.encode(head)
        }
        let target = work.file("copy")
        let result = try CLI.run(["import", file, target] + fixture.passwordArgs)
        #expect(result.status == 4, "\(result)")
        #expect(result.stderr.contains("the head record of user \(StoreFixture.userA) fail authentication"), "\(result)")
        #expect(!FileManager.default.fileExists(atPath: target), "nothing is created for a refused file")
    }

    @Test func import_truncatedFile_isRefused() throws {
        let work = TemporaryDirectory("vaultlog-import", create: true)
        let file = work.file("log.jsonl")
        #expect(try CLI.run(["export", fixture.store, "--out", file]).status == 0)
        let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n").map(String.init)
        try (lines.dropLast(2).joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let result = try CLI.run(["import", file, work.file("copy")])
        #expect(result.status == 4, "\(result)")
        #expect(result.stderr.contains("announces 10 event(s) but the file has 8"))
    }

    @Test func import_intoNonEmptyStore_isRefusedAndChangesNothing() throws {
        let work = TemporaryDirectory("vaultlog-import", create: true)
        let file = work.file("log.jsonl")
        #expect(try CLI.run(["export", fixture.store, "--out", file]).status == 0)
        let store = work.file("existing")
        try fixture.copyStore(to: store)
        let before = try Data(contentsOf: URL(fileURLWithPath: store + "/data.mdb"))

        let result = try CLI.run(["import", file, store])
        #expect(result.status == 2, "\(result)")
        #expect(result.stderr.contains("already holds a store with 10 event(s)"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: store + "/data.mdb")) == before)
    }

    @Test func import_withWrongKey_exits3AndImportsNothing() throws {
        let work = TemporaryDirectory("vaultlog-import", create: true)
        let file = work.file("log.jsonl")
        #expect(try CLI.run(["export", fixture.store, "--out", file]).status == 0)
        let target = work.file("copy")
        let result = try CLI.run(["import", file, target, "--user-key-file", fixture.wrongKeyFile, "--user", "user-a"])
        #expect(result.status == 3, "\(result)")
        #expect(!FileManager.default.fileExists(atPath: target))
    }

    // MARK: decrypt

    static let t1Key = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+Pw=="
    static let t1 = "2.2NokAMS6llUxk26oueMqrA==|6k0QD71SJLy2WEBDkV4esiTrgkP/z7eoSedSesGLGYE=|PE4sb0jpAwZW+tnyPuW43eeWvSxjvdw3xMJlPGbDlYI="
    static let t2Key = "sJnO8rVi0dTwND43n0T9x7665s8mVUYNAaJ4nm7gx1iia1I7947URL60nwfIHaf9QJePO4VkNN0oT9jh4iC6aA=="
    static let t2Bytes = "2.kTtIypq9OLzd5iMMbU11pQ==|J4i3hTtGVdg7EZ+AQv/ujg==|QJpSpotQVpIW8j8dR/8l015WJzAIxBaOmrz4Uj/V1JA="
    static let t2Text = "2.fkvl0+sL1lwtiOn1eewsvQ==|dT0TynLl8YERZ8x7dxC+DQ==|cWhiRSYHOi/AA2LiV/JBJWbO9C7pbUpOM6TMAcV47hE="

    @Test func decrypt_bitwardenVectorT1_printsPlaintext() throws {
        let result = try CLI.run(["decrypt", "--key", Self.t1Key, Self.t1])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == "Bitwarden SDK test vector\n")
    }

    @Test func decrypt_bitwardenVectorT2_text() throws {
        let result = try CLI.run(["decrypt", "--key", Self.t2Key, Self.t2Text])
        #expect(result.stdout == "Hello, World!\n", "\(result)")
    }

    @Test func decrypt_bitwardenVectorT2_base64OfRawBytes() throws {
        let result = try CLI.run(["decrypt", "--key", Self.t2Key, "--base64", Self.t2Bytes])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == Data([1, 2, 3, 4, 5]).base64EncodedString() + "\n")
    }

    @Test func decrypt_wrongKey_exits3WithMacMessage() throws {
        let result = try CLI.run(["decrypt", "--key", Self.t2Key, Self.t1])
        #expect(result.status == 3, "\(result)")
        #expect(result.stderr.contains("MAC check failed"))
        #expect(result.stdout.isEmpty)
    }

    @Test func decrypt_badInput_isUsageError() throws {
        #expect(try CLI.run(["decrypt", "--key", "AAAA", Self.t1]).status == 2)
        #expect(try CLI.run(["decrypt", "--key", Self.t1Key, "not-an-encstring"]).status == 2)
        #expect(try CLI.run(["decrypt", Self.t1]).status == 2)
    }
}

/// One event of every `VaultEventType`, so every explanation is exercised.
@Suite("vaultlog explains every event type")
struct EventTypeExplanationTests {
    /// The phrase each type's explanation must contain when the body is known.
    static let expected: [VaultEventType: String] = [
        .created: "created offline: \"Item\"",
        .updated: "edited offline, password changed (based on server revision",
        .softDeleted: "moved to the trash offline (based on server revision",
        .hardDeleted: "deleted permanently offline (based on server revision",
        .restored: "restored from the trash offline (based on server revision",
        .restoreApplied: "restored from the server's trash (srv-1), new server revision",
        .pushed: "local version pushed to the server as srv-1, new server revision",
        .idMapped: "temporary id x is now server id srv-1",
        .backupCreated: "backup of the server copy created as bak-1, server revision 2026-01-01T00:00:00.0000000Z (conflict: server newer)",
        .serverCopyKept: "the server's copy was kept",
        .recreated: "re-created from the local copy as srv-2",
        .deleteApplied: "delete applied on the server (moved to the trash)",
        .deleteDropped: "delete dropped because the server's copy changed",
        .cleanedUp: "cleaned up locally",
        .resolutionFailed: "resolution attempt 5 failed: HTTP 500; dead letter",
        .resolved: "resolved: nothing pending",
        .clearedAfterOnlineSuccess: "an online save succeeded",
        .retryRequested: "put back into automatic retries",
        .createPlanned: "about to create a backup on the server",
        .syncAborted: "sync aborted: 3 change(s) still pending (server unreachable)",
        .syncApplied: "full sync applied",
        .changeDiscarded: "the pending change was discarded on request; the server's version replaced the local copy",
        .reportsReviewed: "resolution reports up to seq 1 marked as reviewed",
        .attachmentPlanned: "about to copy an attachment to item bak-1",
        .attachmentCopied: "attachment copied to item bak-1 as att-2",
        .attachmentUnavailable: "attachment not copied: attachment \"scan.pdf\" was not copied",
        .folderCreated: "folder created offline",
        .folderRenamed: "folder renamed offline",
        .folderDeleted: "folder deleted offline",
        .folderCreatePlanned: "about to create the folder on the server",
        .folderMapped: "folder is on the server as folder-1",
        .folderRenameApplied: "folder's new name is on the server",
        .folderDeleteApplied: "folder deleted on the server",
        .folderAlreadyDeleted: "already deleted by another device",
        .itemFolderMissing: "its folder folder-1 was deleted by another device: saved with no folder",
        .folderResolved: "everything pending for the folder is done",
        .folderChangeDiscarded: "the folder's pending change was discarded on request: not sent to the server",
    ]

    final class Store: Sendable {
        let dir = TemporaryDirectory("vaultlog-alltypes", create: true)
        let records: [String: String]

        init() throws {
            let userKey = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 5))
            let clock = ManualClock()
            var options = VaultLogStoreOptions()
            options.dependencies = .deterministic(seed: 5, clock: clock)
            let store = try VaultLogStore(path: dir.file("store"), options: options)
            store.unlock(userId: "u", userKey: userKey)
            let base = try BitwardenDate("2026-01-01T00:00:00.0000000Z")
            let at = BitwardenDate(clock.now)
            let cipher = try CipherView(type: .login, name: "Item", login: LoginView(username: "u", password: "p"))
                .encrypt(userKey: userKey, random: SeededRandomSource(seed: 6))
            for type in VaultEventType.allCases {
                let body: VaultEvent.Body
                if type.isOperation {
                    body = .operation(OperationBody(cipher: cipher, passwordChanged: true, baseRevisionDate: type == .created ? nil : base, at: at))
                } else {
                    var outcome = OutcomeBody(at: at)
                    switch type {
                    case .pushed, .idMapped, .restoreApplied: outcome.serverId = "srv-1"; outcome.revisionDate = at
                    case .recreated: outcome.serverId = "srv-2"
                    case .backupCreated:
                        outcome.backupId = "bak-1"; outcome.backupOf = .server; outcome.sourceRevisionDate = base
                        outcome.reason = "conflict: server newer"
                    case .deleteApplied: outcome.reason = "moved to the trash"
                    case .resolutionFailed: outcome.attempt = 5; outcome.reason = "HTTP 500"; outcome.deadLetter = true
                    case .createPlanned: outcome.purpose = .backup; outcome.cipher = cipher
                    case .syncAborted: outcome.pendingCount = 3; outcome.reason = "server unreachable"
                    case .changeDiscarded: outcome.serverId = "srv-1"; outcome.cipher = cipher
                    case .reportsReviewed: outcome.sourceSequence = 1
                    case .attachmentPlanned, .attachmentCopied, .attachmentUnavailable:
                        outcome.attachment = AttachmentCopy(sourceCipherId: "srv-1", sourceAttachmentId: "att-1", targetCipherId: "bak-1",
                                                            targetAttachmentId: type == .attachmentCopied ? "att-2" : nil)
                        if type == .attachmentUnavailable { outcome.reason = "attachment \"scan.pdf\" was not copied to item bak-1: gone" }
                    case .folderCreated, .folderRenamed, .folderCreatePlanned: outcome.folderName = cipher.name?.serialized
                    case .folderMapped, .folderRenameApplied, .folderDeleteApplied, .folderAlreadyDeleted, .folderResolved, .folderChangeDiscarded:
                        outcome.serverId = "folder-1"
                    case .itemFolderMissing: outcome.folderId = "folder-1"
                    case .created, .updated, .softDeleted, .hardDeleted, .restored, .serverCopyKept, .deleteDropped, .cleanedUp, .resolved,
                         .clearedAfterOnlineSuccess, .retryRequested, .syncApplied, .folderDeleted: break
                    }
                    body = .outcome(outcome)
                }
                let userLevel = type.kind == .userLevel
                try store.append(userId: "u", cipherId: userLevel ? "" : "x", type: type, body: body)
            }
            store.close()
            try userKey.exportBase64().write(toFile: dir.file("u.key"), atomically: true, encoding: .utf8)

            let result = try CLI.run(["events", dir.file("store"), "--json", "--user-key-file", dir.file("u.key")])
            guard result.status == 0 else { throw CLIError(result: result) }
            var records: [String: String] = [:]
            for line in try result.jsonLines() {
                records[line["type"] as? String ?? "?"] = line["explanation"] as? String
            }
            self.records = records
        }

        struct CLIError: Error, CustomStringConvertible {
            let result: RunResult
            var description: String { "\(result)" }
        }
    }

    static let store: Store = try! Store()

    @Test(arguments: VaultEventType.allCases)
    func everyTypeIsExplainedFromItsBody(type: VaultEventType) throws {
        let explanation = try #require(Self.store.records[type.description], "no event of type \(type) listed")
        let phrase = try #require(Self.expected[type])
        #expect(explanation.contains(phrase), "\(type): \(explanation)")
    }
}

/// Each kind of planned create is explained as what it is, including every part of an overflow
/// copy (stored as `passwordOverflow-N`).
@Suite("vaultlog explains every planned create")
struct CreatePurposeExplanationTests {
    @Test func everyPurposeHasItsOwnWords() throws {
        let dir = TemporaryDirectory("vaultlog-purposes", create: true)
        let userKey = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 8))
        var options = VaultLogStoreOptions()
        options.dependencies = .deterministic(seed: 8, clock: ManualClock())
        let store = try VaultLogStore(path: dir.file("store"), options: options)
        store.unlock(userId: "u", userKey: userKey)
        let purposes: [(CreatePurpose, String)] = [
            (.create, "about to create the item on the server"),
            (.recreate, "about to create the item again (it was deleted on the server)"),
            (.backup, "about to create a backup on the server"),
            (.passwordOverflow(part: 1), "about to create part 1 of the copy holding passwords that overflow"),
            (.passwordOverflow(part: 12), "about to create part 12 of the copy holding passwords that overflow"),
        ]
        for (purpose, _) in purposes {
            try store.append(userId: "u", cipherId: "x", type: .createPlanned,
                             body: .outcome(OutcomeBody(at: BitwardenDate(Date(timeIntervalSince1970: 0)), purpose: purpose)))
        }
        store.close()
        try userKey.exportBase64().write(toFile: dir.file("u.key"), atomically: true, encoding: .utf8)
        let result = try CLI.run(["events", dir.file("store"), "--json", "--user-key-file", dir.file("u.key")])
        #expect(result.status == 0, "\(result)")
        let explanations = try result.jsonLines().compactMap { $0["explanation"] as? String }
        #expect(explanations.count == purposes.count)
        for ((purpose, phrase), explanation) in zip(purposes, explanations) {
            #expect(explanation.contains(phrase), "\(purpose): \(explanation)")
            #expect(!explanation.contains("passwordOverflow"), "the stored code leaks into the text: \(explanation)")
        }
        let stored = try result.jsonLines().compactMap { ($0["outcome"] as? [String: Any])?["purpose"] as? String }
        #expect(stored == ["create", "recreate", "backup", "passwordOverflow-1", "passwordOverflow-12"])
    }
}
