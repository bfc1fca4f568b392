import Foundation
import Testing
import VaultCrypto
import VaultModel
@_spi(Tools) @testable import OfflineSync
import VaultLogTesting

/// The resolver's decision matrix (`Docs/Resolution.md`) as a table over the pure decide functions.
@Suite struct DecisionMatrixTests {
    static let key = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 77))
    static let t0 = BitwardenDate(ticksSince1970: 17_672_256_000_000_000)
    static func at(_ seconds: Int64) -> BitwardenDate { BitwardenDate(ticksSince1970: t0.ticksSince1970 + seconds * 10_000_000) }

    static func cipher(_ name: String, revision: BitwardenDate?, deleted: Bool = false, seed: UInt64) -> Cipher {
        var view = CipherView(type: .login, name: name, login: LoginView(username: "u", password: "p"))
        view.revisionDate = revision
        view.deletedDate = deleted ? revision : nil
        return try! view.encrypt(userKey: key, random: SeededRandomSource(seed: seed))
    }

    /// `content` as the server would return it in `server`'s place: its revision and trash date.
    static func onServer(_ content: Cipher, as server: Cipher) -> Cipher {
        var copy = content
        copy.revisionDate = server.revisionDate
        copy.deletedDate = server.deletedDate
        return copy
    }

    struct UpdateRow: Sendable, CustomTestStringConvertible {
        let label: String
        let base: BitwardenDate?
        let serverRevision: BitwardenDate
        let localUpdatedAt: BitwardenDate
        let passwordChanges: Int
        let serverHoldsLatest: Bool
        var serverHoldsOwnEarlier = false
        var createChain = false
        let expected: String
        var testDescription: String { label }
    }

    /// One row per update row of `Docs/Resolution.md` (404 is the resolver's, not the decision's).
    static let updateRows: [UpdateRow] = [
        UpdateRow(label: "server unchanged, ≤3 password changes → push", base: at(0), serverRevision: at(0), localUpdatedAt: at(10),
                  passwordChanges: 3, serverHoldsLatest: false, expected: "push"),
        UpdateRow(label: "server unchanged, 4 password changes → backup server, push", base: at(0), serverRevision: at(0), localUpdatedAt: at(10),
                  passwordChanges: 4, serverHoldsLatest: false, expected: "backup+push"),
        UpdateRow(label: "server changed, local newer → backup server, push", base: at(0), serverRevision: at(5), localUpdatedAt: at(10),
                  passwordChanges: 0, serverHoldsLatest: false, expected: "backup+push"),
        UpdateRow(label: "server changed, server newer → backup local, keep server", base: at(0), serverRevision: at(20), localUpdatedAt: at(10),
                  passwordChanges: 0, serverHoldsLatest: false, expected: "keep"),
        UpdateRow(label: "server changed, equal times → server wins", base: at(0), serverRevision: at(10), localUpdatedAt: at(10),
                  passwordChanges: 0, serverHoldsLatest: false, expected: "keep"),
        UpdateRow(label: "no base revision → no conflict", base: nil, serverRevision: at(20), localUpdatedAt: at(10),
                  passwordChanges: 0, serverHoldsLatest: false, expected: "push"),
        UpdateRow(label: "server already holds the latest version → nothing to send", base: at(0), serverRevision: at(30), localUpdatedAt: at(10),
                  passwordChanges: 5, serverHoldsLatest: true, expected: "applied"),
        UpdateRow(label: "server holds an earlier version of ours (lost answer) → push, no conflict", base: at(0), serverRevision: at(30),
                  localUpdatedAt: at(10), passwordChanges: 2, serverHoldsLatest: false, serverHoldsOwnEarlier: true, expected: "push"),
        UpdateRow(label: "server holds an earlier version of ours, 4 password changes → soft conflict", base: at(0), serverRevision: at(30),
                  localUpdatedAt: at(10), passwordChanges: 4, serverHoldsLatest: false, serverHoldsOwnEarlier: true, expected: "backup+push"),
        UpdateRow(label: "create chain, 6 password changes → push, never a backup", base: at(0), serverRevision: at(0),
                  localUpdatedAt: at(10), passwordChanges: 6, serverHoldsLatest: false, createChain: true, expected: "push"),
    ]

    @Test(arguments: updateRows)
    func updateDecision(row: UpdateRow) {
        let latest = Self.cipher("local", revision: row.base, seed: 1)
        var server = Self.cipher("server", revision: row.serverRevision, seed: 2)
        let earlier = Self.cipher("local v1", revision: row.base, seed: 5)
        // The server holding one of our versions: that version's content under the server's revision.
        if row.serverHoldsLatest { server = Self.onServer(latest, as: server) }
        if row.serverHoldsOwnEarlier { server = Self.onServer(earlier, as: server) }
        let decision = UpdateDecision.decide(latest: latest, base: row.base, localUpdatedAt: row.localUpdatedAt,
                                             passwordChanges: row.passwordChanges, server: server, softConflictThreshold: 4,
                                             own: OwnWrites(sent: [earlier, latest]), createChain: row.createChain)
        let label: String
        switch decision {
        case .alreadyApplied: label = "applied"
        case .pushLocal(let backup, _): label = backup ? "backup+push" : "push"
        case .keepServer: label = "keep"
        case .merged: label = "merged"
        }
        #expect(label == row.expected)
    }

    struct DeleteRow: Sendable, CustomTestStringConvertible {
        let label: String
        let type: PendingChangeType
        /// nil: the server answered 404.
        let serverRevision: BitwardenDate?
        var serverTrashed = false
        var hasEdits = false
        var serverHoldsLatest = false
        var serverHoldsOwnEarlier = false
        var passwordChanges = 0
        var createChain = false
        /// The local copy the delete was made from was in the trash.
        var latestTrashed = false
        /// The revision an earlier attempt's push of the latest edits got (recorded as `pushed`).
        var latestPushed: BitwardenDate?
        let expected: DeleteDecision
        var testDescription: String { label }
    }

    /// One row per delete row of `Docs/Resolution.md`.
    static let deleteRows: [DeleteRow] = [
        DeleteRow(label: "soft delete, no conflict", type: .softDelete, serverRevision: at(0),
                  expected: .apply(pushEdits: false, backupServer: false)),
        DeleteRow(label: "soft delete with edits, no conflict → push edits first", type: .softDelete, serverRevision: at(0),
                  hasEdits: true, passwordChanges: 3, expected: .apply(pushEdits: true, backupServer: false)),
        DeleteRow(label: "soft delete with 4 password changes → backup server, push edits, trash", type: .softDelete, serverRevision: at(0),
                  hasEdits: true, passwordChanges: 4, expected: .apply(pushEdits: true, backupServer: true)),
        DeleteRow(label: "soft delete of a create chain with 6 password changes → no backup", type: .softDelete, serverRevision: at(0),
                  hasEdits: true, passwordChanges: 6, createChain: true, expected: .apply(pushEdits: true, backupServer: false)),
        DeleteRow(label: "soft delete, server changed → drop", type: .softDelete, serverRevision: at(5), expected: .drop(backupLocal: false)),
        DeleteRow(label: "soft delete, already in the server's trash", type: .softDelete, serverRevision: at(5), serverTrashed: true,
                  expected: .alreadyApplied),
        DeleteRow(label: "soft delete with edits, already trashed, unchanged → push the edits", type: .softDelete, serverRevision: at(0),
                  serverTrashed: true, hasEdits: true, expected: .apply(pushEdits: true, backupServer: false)),
        DeleteRow(label: "soft delete with edits, server changed → drop, edits backed up", type: .softDelete,
                  serverRevision: at(5), serverTrashed: true, hasEdits: true, expected: .drop(backupLocal: true)),
        DeleteRow(label: "soft delete with edits already pushed and trashed → nothing to send", type: .softDelete, serverRevision: at(5),
                  serverTrashed: true, hasEdits: true, serverHoldsLatest: true, expected: .alreadyApplied),
        DeleteRow(label: "soft delete with edits already pushed → delete", type: .softDelete, serverRevision: at(5),
                  hasEdits: true, serverHoldsLatest: true, expected: .apply(pushEdits: false, backupServer: false)),
        DeleteRow(label: "soft delete with edits pushed (recorded), server unchanged since → delete", type: .softDelete,
                  serverRevision: at(5), hasEdits: true, serverHoldsLatest: true, latestPushed: at(5),
                  expected: .apply(pushEdits: false, backupServer: false)),
        DeleteRow(label: "soft delete with edits pushed (recorded), trashed, then restored by another device → drop, no backup",
                  type: .softDelete, serverRevision: at(7), hasEdits: true, serverHoldsLatest: true, latestPushed: at(5),
                  expected: .drop(backupLocal: false)),
        DeleteRow(label: "soft delete whose own earlier version is on the server (lost answer) → no conflict", type: .softDelete,
                  serverRevision: at(5), hasEdits: true, serverHoldsOwnEarlier: true, expected: .apply(pushEdits: true, backupServer: false)),
        DeleteRow(label: "soft delete with edits, 404 → re-create, trash again", type: .softDelete, serverRevision: nil, hasEdits: true,
                  expected: .recreateAndTrash),
        DeleteRow(label: "soft delete, 404 → clean up", type: .softDelete, serverRevision: nil, expected: .cleanUp),
        DeleteRow(label: "hard delete, no conflict", type: .hardDelete, serverRevision: at(0), expected: .apply(pushEdits: false, backupServer: false)),
        DeleteRow(label: "hard delete after 5 password changes → delete, no backup", type: .hardDelete, serverRevision: at(0), hasEdits: true,
                  passwordChanges: 5, expected: .apply(pushEdits: false, backupServer: false)),
        DeleteRow(label: "hard delete, server changed → drop", type: .hardDelete, serverRevision: at(5), expected: .drop(backupLocal: false)),
        DeleteRow(label: "hard delete with edits, server changed → drop, no backup", type: .hardDelete, serverRevision: at(5), hasEdits: true,
                  expected: .drop(backupLocal: false)),
        DeleteRow(label: "hard delete of a trashed item, server changed → drop", type: .hardDelete, serverRevision: at(5), serverTrashed: true,
                  expected: .drop(backupLocal: false)),
        DeleteRow(label: "hard delete after our own trash move (lost answer) → delete", type: .hardDelete, serverRevision: at(5),
                  serverTrashed: true, serverHoldsOwnEarlier: true, expected: .apply(pushEdits: false, backupServer: false)),
        DeleteRow(label: "hard delete, unmodified local copy equals the server's → delete", type: .hardDelete, serverRevision: at(0),
                  serverHoldsLatest: true, expected: .apply(pushEdits: false, backupServer: false)),
        DeleteRow(label: "hard delete, 404 → clean up", type: .hardDelete, serverRevision: nil, hasEdits: true, expected: .cleanUp),
        DeleteRow(label: "hard delete of a trashed item whose trash revision was never read → delete", type: .hardDelete,
                  serverRevision: at(5), serverTrashed: true, serverHoldsLatest: true, latestTrashed: true,
                  expected: .apply(pushEdits: false, backupServer: false)),
        DeleteRow(label: "hard delete of a trashed item another device restored (same content) → drop", type: .hardDelete,
                  serverRevision: at(5), serverHoldsLatest: true, latestTrashed: true, expected: .drop(backupLocal: false)),
    ]

    @Test(arguments: deleteRows)
    func deleteDecision(row: DeleteRow) {
        let latest = Self.cipher("local", revision: Self.at(0), deleted: row.latestTrashed, seed: 3)
        let earlier = Self.cipher("local v1", revision: Self.at(0), seed: 6)
        var server = row.serverRevision.map { Self.cipher("server", revision: $0, deleted: row.serverTrashed, seed: 4) }
        if row.serverHoldsLatest { server = server.map { Self.onServer(latest, as: $0) } }
        if row.serverHoldsOwnEarlier { server = server.map { Self.onServer(earlier, as: $0) } }
        // Edits are versions this device encrypted and sent; a trash move without edits is not.
        let own = row.hasEdits ? OwnWrites(sent: [earlier, latest]) : OwnWrites(trashed: [earlier])
        #expect(DeleteDecision.decide(changeType: row.type, latest: latest, base: Self.at(0), hasEdits: row.hasEdits, server: server,
                                      passwordChanges: row.passwordChanges, softConflictThreshold: 4,
                                      own: own, createChain: row.createChain, latestPushed: row.latestPushed) == row.expected)
    }

    // MARK: The merge table: each part changed locally × each part changed on the server

    /// A change of one part of the item, by this device (`local`) or another one (server).
    struct PartChange: Sendable, CustomTestStringConvertible {
        let label: String
        /// The part it belongs to (`CipherMerge` names): two changes of one part overlap.
        let part: String
        let apply: @Sendable (_ local: Bool, inout CipherView) -> Void
        /// Whether `view` holds the value this side's change set.
        let holds: @Sendable (_ local: Bool, CipherView) -> Bool
        var testDescription: String { label }
    }

    static func side(_ local: Bool) -> String { local ? "local" : "server" }

    static let partChanges: [PartChange] = [
        PartChange(label: "name", part: "name", apply: { $1.name = "Bank \(side($0))" }, holds: { $1.name == "Bank \(side($0))" }),
        PartChange(label: "notes", part: "notes", apply: { $1.notes = "notes \(side($0))" }, holds: { $1.notes == "notes \(side($0))" }),
        PartChange(label: "folder", part: "folder", apply: { $1.folderId = "folder-\(side($0))" },
                   holds: { $1.folderId == "folder-\(side($0))" }),
        // Favourite and reprompt are one part: this device stars it, the other asks for the master password.
        PartChange(label: "favourite/reprompt", part: "favorite",
                   apply: { local, view in if local { view.favorite = true } else { view.reprompt = .password } },
                   holds: { local, view in local ? view.favorite == true : view.reprompt == .password }),
        // Username, password and TOTP are one part: the credential.
        PartChange(label: "username", part: "credential", apply: { $1.login?.username = "user-\(side($0))" },
                   holds: { $1.login?.username == "user-\(side($0))" }),
        PartChange(label: "password", part: "credential", apply: { $1.login?.password = "pw-\(side($0))" },
                   holds: { $1.login?.password == "pw-\(side($0))" }),
        PartChange(label: "TOTP", part: "credential", apply: { $1.login?.totp = "totp-\(side($0))" },
                   holds: { $1.login?.totp == "totp-\(side($0))" }),
        PartChange(label: "URIs", part: "uris", apply: { $1.login?.uris = [LoginUriView(uri: "https://\(side($0)).example")] },
                   holds: { $1.login?.uris?.map(\.uri) == ["https://\(side($0)).example"] }),
        // Custom fields by name: two fields are two parts.
        PartChange(label: "field PIN", part: "field:PIN", apply: { local, view in
            view.fields = view.fields?.map { $0.name == "PIN" ? FieldView(type: .hidden, name: "PIN", value: "pin-\(side(local))") : $0 }
        }, holds: { local, view in view.fields?.first { $0.name == "PIN" }?.value == "pin-\(side(local))" }),
        PartChange(label: "field Door", part: "field:Door", apply: { local, view in
            view.fields = view.fields?.map { $0.name == "Door" ? FieldView(type: .text, name: "Door", value: "door-\(side(local))") : $0 }
        }, holds: { local, view in view.fields?.first { $0.name == "Door" }?.value == "door-\(side(local))" }),
    ]

    static let mergeBase: CipherView = {
        var view = CipherView(type: .login, name: "Bank", notes: "notes", login: LoginView(username: "u", password: "p"))
        view.login?.uris = [LoginUriView(uri: "https://bank.example")]
        view.fields = [FieldView(type: .hidden, name: "PIN", value: "1234"), FieldView(type: .text, name: "Door", value: "42")]
        view.revisionDate = at(0)
        return view
    }()

    /// For every part changed here, against every part changed on the server (the server newer
    /// and older than the local edit): disjoint parts → `merged`, no backup, the merged item
    /// holds both sides' values (and the base's for the rest); the same part → the matrix as
    /// without merging (the newer side wins, the other is backed up).
    @Test(arguments: partChanges)
    func mergeTable(local change: PartChange) throws {
        for serverChange in Self.partChanges {
            for serverNewer in [false, true] {
                var local = Self.mergeBase, theirs = Self.mergeBase
                change.apply(true, &local)
                serverChange.apply(false, &theirs)
                theirs.revisionDate = serverNewer ? Self.at(20) : Self.at(5)
                let merge = local.merged(base: Self.mergeBase, current: theirs, parts: .resolution)
                let parts = merge.conflicts.isEmpty ? MergedParts(local: merge.changedHere, server: merge.takenFromCurrent) : nil
                let latest = try local.encrypt(userKey: Self.key, random: SeededRandomSource(seed: 11))
                let server = try theirs.encrypt(userKey: Self.key, random: SeededRandomSource(seed: 12))
                let decide = { (merge: MergedParts?) in
                    UpdateDecision.decide(latest: latest, base: Self.at(0), localUpdatedAt: Self.at(10), passwordChanges: 0,
                                          server: server, softConflictThreshold: 4, merge: merge)
                }
                let matrix = decide(nil)
                let context = "local \(change.label) × server \(serverChange.label), server \(serverNewer ? "newer" : "older")"
                #expect(matrix == (serverNewer ? .keepServer(reason: Self.reason(of: matrix)) : .pushLocal(backupServer: true, reason: Self.reason(of: matrix))),
                        "\(context)")
                if change.part == serverChange.part {
                    #expect(merge.conflicts == [change.part], "\(context)")
                    #expect(decide(parts) == matrix, "\(context): the matrix, as without merging")
                } else {
                    #expect(merge.conflicts.isEmpty, "\(context)")
                    guard case .merged(let taken, let backupServer, _) = decide(parts) else {
                        Issue.record("\(context): not merged: \(decide(parts))")
                        continue
                    }
                    #expect(!backupServer, "\(context)")
                    #expect(taken.local == [change.part] && taken.server == [serverChange.part], "\(context): \(taken)")
                    #expect(change.holds(true, merge.merged), "\(context): the local value is in the merged item")
                    #expect(serverChange.holds(false, merge.merged), "\(context): the server's value is in the merged item")
                    #expect(merge.merged.revisionDate == theirs.revisionDate, "\(context)")
                    for untouched in Self.partChanges where untouched.part != change.part && untouched.part != serverChange.part {
                        #expect(!untouched.holds(true, merge.merged) && !untouched.holds(false, merge.merged),
                                "\(context): \(untouched.label) keeps the base's value")
                    }
                }
            }
        }
    }

    static func reason(of decision: UpdateDecision) -> String {
        switch decision {
        case .alreadyApplied: ""
        case .pushLocal(_, let reason), .keepServer(let reason), .merged(_, _, let reason): reason
        }
    }

    /// A soft conflict (four offline password changes) merged with another device's change of
    /// other parts still backs up the server copy first, as when the server is unchanged; a
    /// create chain never does.
    @Test func merged_withFourPasswordChanges_keepsTheSoftConflictBackup() throws {
        let latest = Self.cipher("local", revision: Self.at(0), seed: 1)
        let server = Self.cipher("server", revision: Self.at(5), seed: 2)
        let parts = MergedParts(local: ["credential"], server: ["name"])
        let decide = { (createChain: Bool) in
            UpdateDecision.decide(latest: latest, base: Self.at(0), localUpdatedAt: Self.at(10), passwordChanges: 4, server: server,
                                  softConflictThreshold: 4, createChain: createChain, merge: parts)
        }
        guard case .merged(parts, backupServer: true, _) = decide(false) else { Issue.record("\(decide(false))"); return }
        guard case .merged(parts, backupServer: false, _) = decide(true) else { Issue.record("\(decide(true))"); return }
    }

    @Test func backupName_usesUTCTimestampOfTheLosingSide() throws {
        let date = try BitwardenDate("2026-02-18T13:55:26.9876543Z")
        #expect(BackupName.conflict("Login", at: date) == "Login - 2026-02-18 13:55:26")
        #expect(BackupName.conflict("", at: date) == "2026-02-18 13:55:26")
        #expect(BackupName.conflict(nil, at: date) == "2026-02-18 13:55:26")
        #expect(BackupName.passwordOverflow("Login", at: date, part: 1, of: 1) == "Login - offline passwords 2026-02-18 13:55:26")
        #expect(BackupName.passwordOverflow("Login", at: date, part: 2, of: 3) == "Login - offline passwords 2026-02-18 13:55:26 (2/3)")
    }

    /// Truncated, never rounded: the last tick of a day is still that day.
    @Test func backupName_truncatesToTheSecond_neverRoundsUp() throws {
        #expect(BackupName.timestamp(try BitwardenDate("2026-12-31T23:59:59.9999999Z")) == "2026-12-31 23:59:59")
        #expect(BackupName.timestamp(try BitwardenDate("2026-03-01T10:00:59.9999999Z")) == "2026-03-01 10:00:59")
        #expect(BackupName.timestamp(try BitwardenDate("1969-12-31T23:59:59.5Z")) == "1969-12-31 23:59:59")
    }
}

@Suite("Create purposes")
struct CreatePurposeTests {
    @Test func storedFormRoundTrips_andUnknownFormsAreRefused() throws {
        let all: [CreatePurpose] = [.create, .recreate, .backup, .passwordOverflow(part: 1), .passwordOverflow(part: 40)]
        let encoded = try JSONEncoder().encode(all)
        #expect(String(decoding: encoded, as: UTF8.self)
            == #"["create","recreate","backup","passwordOverflow-1","passwordOverflow-40"]"#)
        #expect(try JSONDecoder().decode([CreatePurpose].self, from: encoded) == all)
        for bad in ["passwordOverflow", "passwordOverflow-0", "passwordOverflow-01", "passwordOverflow-x", "Create", ""] {
            #expect(CreatePurpose(bad) == nil, "\(bad)")
            #expect(throws: DecodingError.self) { try JSONDecoder().decode(CreatePurpose.self, from: Data("\"\(bad)\"".utf8)) }
        }
    }
}
