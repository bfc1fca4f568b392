import BitwardenAPI
import BitwardenEmulator
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@_spi(Tools) import OfflineSync
import Testing
import VaultCrypto
import VaultModel

@Suite("Cipher routes: CRUD, revision dates, stale checks, errors")
struct CipherRouteTests {
    /// Fractional digits of an emitted date: 7 on Bitwarden, 6 on Vaultwarden.
    static func fractionDigits(_ date: BitwardenDate?) -> Int? {
        guard let text = date?.text, let dot = text.firstIndex(of: "."), text.hasSuffix("Z") else { return nil }
        return text.distance(from: dot, to: text.index(before: text.endIndex)) - 1
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func create_ignoresTheClientId_andStampsServerDates(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            var cipher = h.loginCipher()
            cipher.id = "11111111-2222-4333-8444-555555555555"
            let created = try await h.client.createCipher(cipher)
            #expect(created.id != nil && created.id != cipher.id)
            #expect(created.revisionDate == BitwardenDate(Harness.start))
            #expect(created.creationDate == created.revisionDate)
            #expect(created.deletedDate == nil)
            #expect(Self.fractionDigits(created.revisionDate) == (flavor == .bitwarden ? 7 : 6))
            #expect(try h.decryptName(created) == "Example")
            #expect(h.emulator.ciphers(userId: h.account.userId).map(\.id) == [created.id])
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func get_list_andSync_returnWhatWasCreated(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let a = try await h.client.createCipher(h.loginCipher(name: "A"))
            let b = try await h.client.createCipher(h.loginCipher(name: "B"))
            try await h.client.softDeleteCipher(id: try #require(b.id))
            #expect(try await h.client.getCipher(id: a.id!).id == a.id)
            #expect(try await h.client.ciphers().map(\.id) == [a.id, b.id])
            let snapshot = try await h.client.sync()
            #expect(snapshot.ciphers.map(\.id) == [a.id, b.id])   // trashed items included
            #expect(snapshot.ciphers[1].deletedDate != nil)
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func sync_hasTheServersShape(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            _ = try await h.client.createCipher(h.loginCipher())
            let json = try RawHTTP.json(try await h.raw("GET", "/api/sync").body)
            #expect(json["object"] as? String == "sync")
            for key in ["profile", "folders", "collections", "ciphers", "domains", "policies", "sends"] {
                #expect(json[key] != nil, "sync lacks \(key)")
            }
            let profile = try #require(json["profile"] as? [String: Any])
            #expect(profile["key"] as? String == h.account.protectedUserKey.serialized)
            #expect(profile["privateKey"] as? String == h.account.privateKey?.serialized)
            #expect((profile["organizations"] as? [Any])?.isEmpty == true)
            let cipher = try #require((json["ciphers"] as? [[String: Any]])?.first)
            #expect(cipher["object"] as? String == "cipherDetails")
            let full = try await h.client.fullSync()
            #expect(full.profile.email == Harness.email)
            #expect(full.profile.key == h.account.protectedUserKey)
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func update_withTheCurrentRevision_succeedsAndBumpsTheRevisionDate(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let created = try await h.client.createCipher(h.loginCipher(name: "Old"))
            h.clock.advance(by: 5)
            var edited = created
            edited.name = EncString.encrypt("New", key: h.account.userKey, random: h.random)
            let updated = try await h.client.updateCipher(edited, lastKnownRevisionDate: created.revisionDate)
            #expect(updated.revisionDate == BitwardenDate(Harness.start.addingTimeInterval(5)))
            #expect(try h.decryptName(updated) == "New")
            #expect(try h.decryptName(try await h.client.getCipher(id: created.id!)) == "New")
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func update_afterAnotherDeviceEdited_isATypedStaleRevisionError(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let created = try await h.client.createCipher(h.loginCipher())
            h.clock.advance(by: 10)
            let theirs = try h.emulator.editAsAnotherDevice(cipherId: created.id!) {
                $0.notes = EncString.encrypt("from the phone", key: h.account.userKey, random: h.random)
            }
            #expect(theirs.revisionDate! > created.revisionDate!)
            let error = await apiError { _ = try await h.client.updateCipher(created, lastKnownRevisionDate: created.revisionDate) }
            #expect(error?.serverErrorKind == .staleRevision)
            #expect(error?.isStaleRevision == true)
            #expect(error?.status == 400)
            #expect(error?.message.contains("out of date") == true)
            // The server copy is untouched.
            #expect(h.emulator.cipher(id: created.id!)?.notes == theirs.notes)
        }
    }

    /// Bitwarden: |server − lastKnown| > 1 s fails, either way. Vaultwarden: only a server copy
    /// newer by ≥ 2 whole seconds fails; unparseable dates are ignored.
    @Test(arguments: [
        (EmulatorFlavor.bitwarden, 0.9, 200), (.bitwarden, -0.9, 200), (.bitwarden, 1.5, 400), (.bitwarden, -1.5, 400),
        (.vaultwarden, -1.9, 200), (.vaultwarden, -2.5, 400), (.vaultwarden, 5.0, 200), (.vaultwarden, 0.5, 200),
    ])
    func staleCheckTolerance(flavor: EmulatorFlavor, clientOffset: Double, expected: Int) async throws {
        try await Harness.with(flavor) { h in
            let created = try await h.client.createCipher(h.loginCipher())
            let lastKnown = BitwardenDate(Harness.start.addingTimeInterval(clientOffset))
            let status = try await h.raw("PUT", "/api/ciphers/\(created.id!)",
                                         body: try created.requestBody(lastKnownRevisionDate: lastKnown)).status
            #expect(status == expected)
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func unparseableLastKnownRevisionDate(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let created = try await h.client.createCipher(h.loginCipher())
            var body = try RawHTTP.json(try created.requestBody())
            body["lastKnownRevisionDate"] = "yesterday"
            let reply = try await h.raw("PUT", "/api/ciphers/\(created.id!)", body: try JSONSerialization.data(withJSONObject: body))
            #expect(reply.status == (flavor == .bitwarden ? 400 : 200))
            if flavor == .bitwarden {
                let errors = try #require(try RawHTTP.json(reply.body)["validationErrors"] as? [String: [String]])
                #expect(errors["LastKnownRevisionDate"] != nil)
            }
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func softDeleteTwice_isIdempotentOnBitwarden_andBumpsOnVaultwarden(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let created = try await h.client.createCipher(h.loginCipher())
            let id = try #require(created.id)
            h.clock.advance(by: 3)
            try await h.client.softDeleteCipher(id: id)
            let first = try await h.client.getCipher(id: id)
            #expect(first.deletedDate == BitwardenDate(Harness.start.addingTimeInterval(3)))
            #expect(first.revisionDate == first.deletedDate)
            h.clock.advance(by: 3)
            try await h.client.softDeleteCipher(id: id)
            let second = try await h.client.getCipher(id: id)
            switch flavor {
            case .bitwarden:
                #expect(second.revisionDate == first.revisionDate)
                #expect(second.deletedDate == first.deletedDate)
            case .vaultwarden:
                #expect(second.revisionDate == BitwardenDate(Harness.start.addingTimeInterval(6)))
                #expect(second.deletedDate == second.revisionDate)
            }
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func restore_clearsTheDeletedDate_andBumpsTheRevision(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let created = try await h.client.createCipher(h.loginCipher())
            try await h.client.softDeleteCipher(id: created.id!)
            h.clock.advance(by: 2)
            let restored = try await h.client.restoreCipher(id: created.id!)
            #expect(restored.deletedDate == nil)
            #expect(restored.revisionDate == BitwardenDate(Harness.start.addingTimeInterval(2)))
            // Restoring an item that is not deleted: a no-op on Bitwarden.
            h.clock.advance(by: 2)
            let again = try await h.client.restoreCipher(id: created.id!)
            #expect((again.revisionDate == restored.revisionDate) == (flavor == .bitwarden))
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func permanentDelete_thenEveryRouteSaysNotFound(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let created = try await h.client.createCipher(h.loginCipher())
            let id = try #require(created.id)
            try await h.client.deleteCipher(id: id)
            #expect(h.emulator.cipher(id: id) == nil)
            let expectedStatus = flavor == .bitwarden ? 404 : 400
            let calls: [(String, () async throws -> Void)] = [
                ("get", { _ = try await h.client.getCipher(id: id) }),
                ("update", { _ = try await h.client.updateCipher(created, lastKnownRevisionDate: created.revisionDate) }),
                ("soft delete", { try await h.client.softDeleteCipher(id: id) }),
                ("restore", { _ = try await h.client.restoreCipher(id: id) }),
                ("delete", { try await h.client.deleteCipher(id: id) }),
            ]
            for (name, call) in calls {
                let error = await apiError(call)
                #expect(error?.serverErrorKind == .notFound, "\(name)")
                #expect(error?.status == expectedStatus, "\(name)")
            }
            if flavor == .vaultwarden {
                let error = await apiError { _ = try await h.client.getCipher(id: id) }
                #expect(error?.message == "Cipher doesn't exist")
            }
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func anotherUsersCipher_isNotFound(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let bob = try h.emulator.createAccount(email: "bob@example.com", password: "pw", iterations: 5000)
            let theirs = h.emulator.insertCipher(userId: bob.userId, Cipher(type: .secureNote,
                name: EncString.encrypt("bob's", key: bob.userKey, random: h.random), secureNote: CipherSecureNote()))
            let error = await apiError { _ = try await h.client.getCipher(id: theirs.id!) }
            #expect(error?.serverErrorKind == .notFound)
            let update = await apiError { _ = try await h.client.updateCipher(theirs, lastKnownRevisionDate: theirs.revisionDate) }
            #expect(update?.serverErrorKind == .notFound)
            #expect(try await h.client.ciphers().isEmpty)
        }
    }

    @Test func plaintextName_isRejectedWithAValidationErrorNamingTheField() async throws {
        try await Harness.with(.bitwarden) { h in
            let body = Data(#"{"type":1,"name":"My bank","login":{"username":"alice"}}"#.utf8)
            let reply = try await h.raw("POST", "/api/ciphers", body: body)
            #expect(reply.status == 400)
            let json = try RawHTTP.json(reply.body)
            #expect(json["object"] as? String == "error")
            #expect(json["message"] as? String == "The model state is invalid.")
            let errors = try #require(json["validationErrors"] as? [String: [String]])
            #expect(errors["Name"] == ["Name is not a valid encrypted string."])
            #expect(errors["Login.Username"] == ["Username is not a valid encrypted string."])
            #expect(h.emulator.ciphers(userId: h.account.userId).isEmpty)
        }
    }

    @Test func plaintextName_isAcceptedByVaultwarden() async throws {
        try await Harness.with(.vaultwarden) { h in
            let reply = try await h.raw("POST", "/api/ciphers", body: Data(#"{"type":2,"name":"plain","secureNote":{"type":0}}"#.utf8))
            #expect(reply.status == 200)
            #expect(h.emulator.rawCiphers(userId: h.account.userId).count == 1)
        }
    }

    @Test func clientValidationErrors_areRejections() async throws {
        try await Harness.with(.bitwarden) { h in
            var cipher = h.loginCipher()
            cipher.notes = try EncString(iv: Array(repeating: 1, count: 16), ciphertext: Array(repeating: 2, count: 8000),
                                         mac: Array(repeating: 3, count: 32))
            let error = await apiError { _ = try await h.client.createCipher(cipher) }
            #expect(error?.serverErrorKind == .rejected)
            #expect(error?.validationErrors["Notes"]?.first?.contains("maximum encrypted value length of 10000") == true)
            let missingName = Data(#"{"type":1,"login":{}}"#.utf8)
            let json = try RawHTTP.json(try await h.raw("POST", "/api/ciphers", body: missingName).body)
            #expect((json["validationErrors"] as? [String: [String]])?["Name"] == ["The Name field is required."])
            let empty = try await h.raw("POST", "/api/ciphers", body: Data())
            #expect(empty.status == 400)
        }
    }

    @Test func notesLengthLimit_isEnforcedByVaultwardenToo() async throws {
        try await Harness.with(.vaultwarden) { h in
            let notes = String(repeating: "x", count: 10_001)
            let reply = try await h.raw("POST", "/api/ciphers", body: Data(#"{"type":2,"name":"n","notes":"\#(notes)"}"#.utf8))
            #expect(reply.status == 400)
            #expect((try RawHTTP.json(reply.body)["message"] as? String)?.contains("Notes exceeds") == true)
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func unknownFields_surviveStorageSyncAndUpdates(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            var cipher = h.loginCipher()
            cipher.extra["futureFeature"] = .object(["level": .integer(3), "tags": .array([.string("a")])])
            cipher.login?.extra["passkeyHint"] = .string("kept")
            let inserted = h.emulator.insertCipher(userId: h.account.userId, cipher)
            var fetched = try await h.client.getCipher(id: inserted.id!)
            #expect(fetched.extra["futureFeature"] == cipher.extra["futureFeature"])
            #expect(fetched.login?.extra["passkeyHint"] == .string("kept"))
            fetched.favorite = true
            _ = try await h.client.updateCipher(fetched, lastKnownRevisionDate: fetched.revisionDate)
            let stored = try #require(h.emulator.cipher(id: inserted.id!))
            #expect(stored.extra["futureFeature"] == cipher.extra["futureFeature"])
            #expect(stored.login?.extra["passkeyHint"] == .string("kept"))
            #expect(stored.favorite == true)
        }
    }

    @Test func update_ignoresTheTypeInTheBody() async throws {
        try await Harness.with(.bitwarden) { h in
            let created = try await h.client.createCipher(h.loginCipher())
            var changed = created
            changed.type = .secureNote
            let updated = try await h.client.updateCipher(changed, lastKnownRevisionDate: created.revisionDate)
            #expect(updated.type == .login)
        }
    }

    @Test func createWithCollections_route_wrapsTheCipher() async throws {
        try await Harness.with(.bitwarden) { h in
            let inner = try RawHTTP.json(try h.loginCipher().requestBody(lastKnownRevisionDate: nil))
            let body = try JSONSerialization.data(withJSONObject: ["cipher": inner, "collectionIds": [String]()])
            let reply = try await h.raw("POST", "/api/ciphers/create", body: body)
            #expect(reply.status == 200)
            let bad = try await h.raw("POST", "/api/ciphers/create", body: Data(#"{"cipher":{"type":1,"name":"x"},"collectionIds":[]}"#.utf8))
            #expect((try RawHTTP.json(bad.body)["validationErrors"] as? [String: [String]])?["Cipher.Name"] != nil)
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func folders_listAndCreate(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            #expect(try await h.client.folders().isEmpty)
            let name = EncString.encrypt("Work", key: h.account.userKey, random: h.random)
            let folder = try await h.client.createFolder(name: name)
            #expect(folder.name == name)
            #expect(Self.fractionDigits(folder.revisionDate) == (flavor == .bitwarden ? 7 : 6))
            #expect(try await h.client.folders() == [folder])
            #expect(try await h.client.sync().folderIds == [folder.id])
            let plain = try await h.raw("POST", "/api/folders", body: Data(#"{"name":"Work"}"#.utf8))
            #expect(plain.status == (flavor == .bitwarden ? 400 : 200))
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func accountRevisionDate_followsEveryWrite(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            #expect(try await h.client.revisionDate() == Harness.start)
            h.clock.advance(by: 42)
            _ = try await h.client.createCipher(h.loginCipher())
            #expect(try await h.client.revisionDate() == Harness.start.addingTimeInterval(42))
            let raw = try await h.raw("GET", "/api/accounts/revision-date")
            #expect(String(decoding: raw.body, as: UTF8.self) == "\(Int64((Harness.start.timeIntervalSince1970 + 42) * 1000))")
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func errorBodies_haveTheServersShape(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let reply = try await h.raw("GET", "/api/ciphers/00000000-0000-4000-8000-000000000000")
            let json = try RawHTTP.json(reply.body)
            #expect(json["object"] as? String == "error")
            switch flavor {
            case .bitwarden:
                #expect(reply.status == 404)
                #expect(json["message"] as? String == "Resource not found.")
                #expect(json.keys.contains("validationErrors") && json.keys.contains("exceptionMessage"))
            case .vaultwarden:
                #expect(reply.status == 400)
                #expect((json["errorModel"] as? [String: Any])?["message"] as? String == "Cipher doesn't exist")
            }
        }
    }

    @Test func manyConcurrentUpdates_allSucceed() async throws {
        try await Harness.with(.bitwarden) { h in
            var created: [Cipher] = []
            for i in 0..<40 { created.append(try await h.client.createCipher(h.loginCipher(name: "item \(i)"))) }
            h.clock.advance(by: 1)
            let updated = try await withThrowingTaskGroup(of: Cipher.self) { group in
                for cipher in created {
                    group.addTask { try await h.client.updateCipher(cipher, lastKnownRevisionDate: cipher.revisionDate) }
                }
                return try await group.reduce(into: [Cipher]()) { $0.append($1) }
            }
            #expect(updated.count == 40)
            #expect(updated.allSatisfy { $0.revisionDate == BitwardenDate(Harness.start.addingTimeInterval(1)) })
        }
    }
}
