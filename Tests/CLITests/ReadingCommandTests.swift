import EventLog
import Foundation
import Testing
import VaultLogTestSupport

/// `info`, `events`, `pending`, `history` on a store made by OfflineSync, run through the
/// built binary.
@Suite("vaultlog reading commands")
struct ReadingCommandTests {
    @Test func version_namesTheReleaseTheFormatsAndLMDB() throws {
        let result = try CLI.run(["--version"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.hasPrefix("vaultlog 0."), "\(result)")
        #expect(result.stdout.contains("store format \(EventLogStore.storeFormatVersion)") && result.stdout.contains("LMDB 0.9"), "\(result)")
    }

    let fixture = StoreFixture.shared

    // MARK: info

    @Test func info_showsUsersAccountsEventsAndMap() throws {
        let result = try CLI.run(["info", fixture.store])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("events        10, last sequence 10"), "\(result)")
        #expect(result.stdout.contains("item index    up to seq 0; one item's later events are found by their headers"), "\(result)")
        #expect(result.stdout.contains("user user-a"))
        #expect(result.stdout.contains(StoreFixture.email))
        #expect(result.stdout.contains("user user-b"))
        #expect(result.stdout.contains("map"))
    }

    @Test func info_json_parsesAsOneDocument() throws {
        let result = try CLI.run(["info", fixture.store, "--json"])
        #expect(result.status == 0, "\(result)")
        let document = try result.jsonDocument()
        #expect(document["eventCount"] as? Int == 10)
        #expect(document["lastSequence"] as? Int == 10)
        #expect(document["itemIndexedThrough"] as? Int == 0, "ten events: no merge yet")
        let users = try #require(document["users"] as? [[String: Any]])
        #expect(users.map { $0["userId"] as? String } == ["user-a", "user-b"])
        #expect(users[0]["emails"] as? [String] == [StoreFixture.email])
        #expect((document["mapSize"] as? Int ?? 0) > 0)
    }

    // MARK: events

    @Test func events_withoutKey_showsHeadersOnlyAndSaysSo() throws {
        let result = try CLI.run(["events", fixture.store])
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("headers only"), "\(result)")
        #expect(result.stdout.contains("seq 2, 2026-01-01 10:02:00Z: edited offline"), "\(result)")
        #expect(!result.stdout.contains("Bank"), "no body without a key")
        #expect(result.stdout.split(separator: "\n").filter { $0.hasPrefix("seq ") }.count == 10)
    }

    @Test func events_withPassword_decryptsBodiesAndMasksPasswords() throws {
        let result = try CLI.run(["events", fixture.store] + fixture.passwordArgs)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("edited offline, password changed (based on server revision \(StoreFixture.baseRevision)): \"Bank\""), "\(result)")
        #expect(result.stdout.contains("password ********"))
        #expect(!result.stdout.contains("hunter2"), "passwords are masked without --reveal")
        #expect(!result.stderr.contains("headers only"))
    }

    @Test func events_reveal_showsPasswords() throws {
        let result = try CLI.run(["events", fixture.store, "--cipher", "server-bank", "--reveal"] + fixture.passwordArgs)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("password hunter2"))
        #expect(result.stdout.contains("password hunter3"))
    }

    @Test func events_json_isOneObjectPerLineWithDecryptedItem() throws {
        let result = try CLI.run(["events", fixture.store, "--json"] + fixture.passwordArgs)
        #expect(result.status == 0, "\(result)")
        let lines = try result.jsonLines()
        try #require(lines.count == 10)
        let second = lines[1]
        #expect(second["sequence"] as? Int == 2)
        #expect(second["type"] as? String == "updated")
        #expect(second["decrypted"] as? Bool == true)
        let operation = try #require(second["operation"] as? [String: Any])
        #expect(operation["passwordChanged"] as? Bool == true)
        let item = try #require(operation["item"] as? [String: Any])
        #expect(item["name"] as? String == "Bank")
        #expect(item["password"] as? String == "********")
        // user B's event stays a header: the key is user A's.
        #expect(lines[9]["decrypted"] as? Bool == false)
    }

    @Test func events_userKeyFile_withUser_listsOnlyThatUser() throws {
        let result = try CLI.run(["events", fixture.store, "--json", "--user-key-file", fixture.userKeyFile, "--user", "user-a"])
        #expect(result.status == 0, "\(result)")
        let lines = try result.jsonLines()
        #expect(lines.count == 9)
        #expect(lines.allSatisfy { $0["userId"] as? String == "user-a" && $0["decrypted"] as? Bool == true })
    }

    @Test func events_filters_byCipherTypeAndRange() throws {
        let byType = try CLI.run(["events", fixture.store, "--json", "--cipher", "server-bank", "--type", "updated"])
        #expect(try byType.jsonLines().map { $0["sequence"] as? Int } == [2, 3], "\(byType)")
        let byRange = try CLI.run(["events", fixture.store, "--json", "--from", "4", "--to", "6", "--user", "user-a"])
        #expect(try byRange.jsonLines().map { $0["sequence"] as? Int } == [4, 5, 6], "\(byRange)")
    }

    @Test func events_passwordFromStdin_unlocks() throws {
        let result = try CLI.run(["events", fixture.store, "--email", StoreFixture.email, "--password-stdin", "--cipher", "c-temp"],
                                 stdin: StoreFixture.password + "\n")
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("created offline: \"Mail\""), "\(result)")
    }

    @Test func events_unknownType_isUsageError() throws {
        let result = try CLI.run(["events", fixture.store, "--type", "bogus"])
        #expect(result.status == 2, "\(result)")
        #expect(result.stderr.contains("unknown event type 'bogus'"))
    }

    // MARK: keys

    @Test func wrongPassword_exits3WithClearMessage() throws {
        let result = try CLI.run(["events", fixture.store, "--email", StoreFixture.email, "--password-file", fixture.wrongPasswordFile])
        #expect(result.status == 3, "\(result)")
        #expect(result.stderr.contains("wrong master password for \(StoreFixture.email) (or the store's account record is stale)"))
        #expect(result.stdout.isEmpty)
    }

    @Test func unknownEmail_exits3() throws {
        let result = try CLI.run(["pending", fixture.store, "--email", "nobody@example.com", "--password-file", fixture.passwordFile])
        #expect(result.status == 3, "\(result)")
        #expect(result.stderr.contains("no account for nobody@example.com"))
    }

    @Test func wrongUserKey_exits3() throws {
        let result = try CLI.run(["pending", fixture.store, "--user-key-file", fixture.wrongKeyFile, "--user", "user-a"])
        #expect(result.status == 3, "\(result)")
        #expect(result.stderr.contains("does not open the events of user user-a"))
    }

    @Test func userKeyWithSeveralUsers_needsUser() throws {
        let result = try CLI.run(["pending", fixture.store, "--user-key-file", fixture.userKeyFile])
        #expect(result.status == 2, "\(result)")
        #expect(result.stderr.contains("--user"))
    }

    @Test func emailWithoutPassword_isUsageError() throws {
        let result = try CLI.run(["events", fixture.store, "--email", StoreFixture.email])
        #expect(result.status == 2, "\(result)")
        #expect(result.stderr.contains("--password-file"))
    }

    // MARK: missing store

    @Test(arguments: ["info", "events", "pending", "verify", "export"])
    func missingDirectory_exits4AndCreatesNothing(command: String) throws {
        let missing = NSTemporaryDirectory() + "/vaultlog-missing-\(UUID().uuidString)"
        let result = try CLI.run([command, missing])
        #expect(result.status == 4, "\(result)")
        #expect(result.stderr.contains("no VaultLog store at \(missing)"))
        #expect(!FileManager.default.fileExists(atPath: missing), "a reading command never creates a store")
    }

    // MARK: pending

    @Test func pending_withoutKey_listsHeaderPendingSetOfEveryUser() throws {
        let result = try CLI.run(["pending", fixture.store, "--json"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("headers only"))
        let document = try result.jsonDocument()
        #expect(document["decrypted"] as? Bool == false)
        let users = try #require(document["users"] as? [[String: Any]])
        let userA = try #require(users.first { $0["userId"] as? String == "user-a" })
        let pending = try #require(userA["pending"] as? [[String: Any]])
        #expect(pending.map { $0["cipherId"] as? String } == ["server-bank", "server-notes", "server-old"])
        #expect(pending.map { $0["changeType"] as? String } == ["update", "softDelete", "hardDelete"])
    }

    @Test func pending_withKey_showsPasswordChangesAttemptsAndRetry() throws {
        let result = try CLI.run(["pending", fixture.store] + fixture.passwordArgs)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("user user-a: 3 pending as of seq 10"), "\(result)")
        #expect(result.stdout.contains("server-bank  update  \"Bank\""))
        #expect(result.stdout.contains("based on server revision \(StoreFixture.baseRevision), 2 offline password change(s)"))
        #expect(result.stdout.contains("1 failed attempt(s), last error: HTTP 503 Service Unavailable; next retry at"))
        #expect(result.stdout.contains("c-temp → server-mail"))
    }

    @Test func pending_at_isTimeTravel() throws {
        let result = try CLI.run(["pending", fixture.store, "--at", "2", "--json"] + fixture.passwordArgs)
        #expect(result.status == 0, "\(result)")
        let document = try result.jsonDocument()
        #expect(document["atSequence"] as? Int == 2)
        let user = try #require((document["users"] as? [[String: Any]])?.first)
        let pending = try #require(user["pending"] as? [[String: Any]])
        #expect(pending.map { $0["cipherId"] as? String } == ["c-temp", "server-bank"])
        let bank = try #require(pending.first { $0["cipherId"] as? String == "server-bank" })
        #expect(bank["offlinePasswordChangeCount"] as? Int == 1)
        #expect(bank["attempts"] as? Int == 0)
        #expect(bank["originalRevisionDate"] as? String == StoreFixture.baseRevision)
    }

    @Test func pending_at_withoutKey_foldsHeadersUpToSequence() throws {
        let result = try CLI.run(["pending", fixture.store, "--at", "1", "--user", "user-a"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("user user-a: 1 pending as of seq 1 (from headers; details need a key)"), "\(result)")
        #expect(result.stdout.contains("c-temp  create"))
    }

    // MARK: history

    @Test func history_explainsEachEventInWords() throws {
        let result = try CLI.run(["history", fixture.store, "server-bank"] + fixture.passwordArgs)
        #expect(result.status == 0, "\(result)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("history of item server-bank") == true, "\(result)")
        #expect(lines.contains { $0.hasPrefix("seq 2, 2026-01-01 10:02:00Z: edited offline, password changed (based on server revision \(StoreFixture.baseRevision))") })
        #expect(lines.contains { $0.hasPrefix("seq 6, 2026-01-01 10:06:00Z: resolution attempt 1 failed: HTTP 503 Service Unavailable; next retry at 2026-01-01 10:11:00Z") })
    }

    @Test func history_followsTemporaryIdToServerId() throws {
        let result = try CLI.run(["history", fixture.store, "server-mail"] + fixture.passwordArgs)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("also known as c-temp"), "\(result)")
        #expect(result.stdout.contains("seq 1, 2026-01-01 10:01:00Z: created offline: \"Mail\""))
        #expect(result.stdout.contains("seq 8, 2026-01-01 10:08:00Z: created on the server: temporary id c-temp is now server id server-mail"))
        #expect(result.stdout.contains("seq 9, 2026-01-01 10:09:00Z: resolved"))
    }

    @Test func history_withoutKey_namesEventKinds() throws {
        let result = try CLI.run(["history", fixture.store, "server-notes"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("headers only"))
        #expect(result.stdout.contains("seq 4, 2026-01-01 10:04:00Z: moved to the trash offline"), "\(result)")
    }

    @Test func history_unknownItem_exits1() throws {
        let result = try CLI.run(["history", fixture.store, "no-such-item"])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("no events for item no-such-item"))
    }
}

/// `items`, and `history` finding an item by name or id prefix.
@Suite("vaultlog items and finding an item")
struct ItemsCommandTests {
    let fixture = StoreFixture.shared

    @Test func items_withKey_listsNamesAndPendingStates_sortedByName() throws {
        let result = try CLI.run(["items", fixture.store] + fixture.passwordArgs)
        #expect(result.status == 0, "\(result)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "3 item(s), 3 pending, user user-a", "\(result)")
        #expect(lines.dropFirst().map { $0.trimmingCharacters(in: .whitespaces) } == [
            "server-bank \"Bank\" login, pending update, no local copy",
            "server-notes \"Notes\" login, in the trash, pending softDelete, no local copy",
            "server-old \"Old\" login, pending hardDelete, no local copy",
        ], "\(result)")
        #expect(!result.stdout.contains("hunter"), "never a password")
    }

    @Test func items_withoutKey_listsIdsAndPendingStatesOfEveryUser() throws {
        let result = try CLI.run(["items", fixture.store, "--json"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("headers only"))
        let lines = try result.jsonLines()
        #expect(lines.map { "\($0["userId"]!)/\($0["id"]!)/\($0["pending"]!)" }
                == ["user-a/server-bank/update", "user-a/server-notes/softDelete", "user-a/server-old/hardDelete", "user-b/b-item/create"])
        #expect(lines.allSatisfy { $0["name"] == nil })
    }

    @Test func history_findsAnItemByName_orByIdPrefix() throws {
        let byName = try CLI.run(["history", fixture.store, "bank"] + fixture.passwordArgs)
        #expect(byName.status == 0, "\(byName)")
        #expect(byName.stdout.hasPrefix("history of item server-bank"), "\(byName)")
        #expect(byName.stderr.contains("'bank' is item server-bank \"Bank\""), "\(byName)")
        let byPrefix = try CLI.run(["history", fixture.store, "server-o"])
        #expect(byPrefix.status == 0, "\(byPrefix)")
        #expect(byPrefix.stdout.hasPrefix("history of item server-old"), "\(byPrefix)")
    }

    @Test func history_ambiguousPrefix_listsTheCandidates_andExits2() throws {
        let result = try CLI.run(["history", fixture.store, "server-"] + fixture.passwordArgs)
        #expect(result.status == 2, "\(result)")
        #expect(result.stderr.contains("'server-' matches 3 items"), "\(result)")
        for id in ["server-bank \"Bank\"", "server-notes \"Notes\"", "server-old \"Old\""] {
            #expect(result.stderr.contains(id), "\(result)")
        }
        #expect(result.stdout.isEmpty)
    }
}

/// The master password from the environment, for scripts that cannot use a file.
@Suite("vaultlog password from VAULTLOG_PASSWORD")
struct PasswordEnvironmentTests {
    let fixture = StoreFixture.shared

    @Test func vaultlogPassword_unlocksWithEmail_andAWrongOneExits3() throws {
        let good = try CLI.run(["pending", fixture.store, "--email", StoreFixture.email],
                               environment: ["VAULTLOG_PASSWORD": StoreFixture.password])
        #expect(good.status == 0, "\(good)")
        #expect(!good.stderr.contains("headers only"), "\(good)")
        #expect(good.stdout.contains("\"Bank\""), "\(good)")
        let bad = try CLI.run(["pending", fixture.store, "--email", StoreFixture.email],
                              environment: ["VAULTLOG_PASSWORD": "not the password"])
        #expect(bad.status == 3, "\(bad)")
        #expect(bad.stderr.contains("wrong master password"), "\(bad)")
    }

    @Test func aPasswordFile_winsOverTheEnvironment() throws {
        let result = try CLI.run(["pending", fixture.store] + fixture.passwordArgs,
                                 environment: ["VAULTLOG_PASSWORD": "not the password"])
        #expect(result.status == 0, "\(result)")
    }
}

/// `user-key` writes the file `--user-key-file` reads.
@Suite("vaultlog user-key")
struct UserKeyCommandTests {
    let fixture = StoreFixture.shared

    @Test func writesAKeyFileThatOpensTheEvents_readableByTheOwnerOnly() throws {
        let dir = TemporaryDirectory("vaultlog-user-key", create: true)
        try FileManager.default.createDirectory(atPath: dir.path, withIntermediateDirectories: true)
        let file = dir.file("alice.key")
        let written = try CLI.run(["user-key", fixture.store, "--out", file] + fixture.passwordArgs)
        #expect(written.status == 0, "\(written)")
        #expect(!written.stdout.contains(try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)),
                "the key is never printed")
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int)
        #expect(mode == 0o600)
        #expect(try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
                == fixture.userKey.exportBase64())
        let events = try CLI.run(["events", fixture.store, "--user-key-file", file, "--user", StoreFixture.userA])
        #expect(events.status == 0 && events.stdout.contains("\"Bank\""), "\(events)")

        let again = try CLI.run(["user-key", fixture.store, "--out", file] + fixture.passwordArgs)
        #expect(again.status == 2 && again.stderr.contains("already exists"), "\(again)")
        let wrong = try CLI.run(["user-key", fixture.store, "--out", dir.file("x.key"), "--email", StoreFixture.email,
                                 "--password-file", fixture.wrongPasswordFile])
        #expect(wrong.status == 3, "\(wrong)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("x.key")), "nothing written with a wrong password")
    }
}
