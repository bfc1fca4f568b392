import BitwardenAPI
import BitwardenEmulator
import Foundation
import Synchronization
import Testing
import VaultCrypto
import VaultModel
@_spi(Tools) @testable import OfflineSync
import VaultLogTesting
import VaultLogTestSupport

/// The copies the resolver makes keep the attachments of the version they preserve: a backup of
/// either side, and an item re-created after the server lost it. Files are downloaded, their
/// keys wrapped again for the copy, uploaded once (crashes and lost answers included); a file
/// that cannot be copied now keeps the item pending, one that is nowhere any more is named.
@Suite struct AttachmentCopyTests {
    typealias H = ResolverHarness

    /// An item on the server and in the local store with one attachment (as after a sync).
    static func seedWithAttachment(_ h: H, _ name: String, file: String = "scan.pdf", contents: String = "the scanned contract")
        async throws -> CipherView {
        let view = try await h.seedSynced(name)
        let cipher = try #require(h.emulator.cipher(id: view.id!))
        let sealed = SealedAttachment.seal(fileName: file, contents: Array(contents.utf8), itemKey: try cipher.fieldKey(userKey: h.userKey),
                                           random: SeededRandomSource(seed: h.seed &+ 77))
        h.clock.advance(by: 1)
        _ = try await h.client.createAttachment(cipherId: view.id!, fileName: sealed.fileName, key: sealed.wrappedKey,
                                                encryptedData: sealed.encryptedData)
        _ = try await h.syncService().fetchSync(userId: h.userId, forceSync: true)
        return try #require(try h.local(view.id!))
    }

    /// Each server item's attachments as (file name, decrypted contents), read over HTTP.
    static func attachments(_ h: H, of id: String) async throws -> [String] {
        let cipher = try #require(h.emulator.cipher(id: id))
        let itemKey = try cipher.fieldKey(userKey: h.userKey)
        var files: [String] = []
        for attachment in cipher.attachments ?? [] {
            let name = try #require(attachment.fileName).decryptString(key: itemKey)
            let bytes = try await h.client.downloadAttachment(cipherId: id, attachmentId: attachment.id!)
            let plain = try SealedAttachment.open(encryptedData: bytes, wrappedKey: try #require(attachment.key), itemKey: itemKey)
            files.append("\(name): \(String(decoding: plain, as: UTF8.self))")
        }
        return files.sorted()
    }

    static func backup(_ h: H, of id: String) throws -> CipherView {
        try #require(try h.serverItems(named: "Bank").first { $0.id != id })
    }

    @Test func backupOfTheServerCopy_keepsItsAttachment() async throws {
        let h = try await H.make()
        let view = try await Self.seedWithAttachment(h, "Bank")
        try h.anotherDeviceEdits(view.id!) { $0.login?.password = "other" }
        try await h.editOffline(view, password: "mine")   // later: local newer, the server copy is backed up
        let report = try await h.resolver().processPendingChanges(userId: h.userId)
        #expect(report.items.map(\.outcome) == [.localKept])
        let backup = try Self.backup(h, of: view.id!)
        #expect(backup.login?.password == "other")
        #expect(try await Self.attachments(h, of: backup.id!) == ["scan.pdf: the scanned contract"])
        #expect(try await Self.attachments(h, of: view.id!) == ["scan.pdf: the scanned contract"])
        #expect(try h.events(view.id!).filter { $0 == .attachmentCopied }.count == 1)
        await h.stop()
    }

    @Test func backupOfTheLocalVersion_keepsTheAttachmentItHad() async throws {
        let h = try await H.make()
        let view = try await Self.seedWithAttachment(h, "Bank")
        try await h.editOffline(view, password: "mine")
        try h.anotherDeviceEdits(view.id!) { $0.login?.password = "other" }   // later: the server copy wins
        let report = try await h.resolver().processPendingChanges(userId: h.userId)
        #expect(report.items.map(\.outcome) == [.serverKept])
        let backup = try Self.backup(h, of: view.id!)
        #expect(backup.login?.password == "mine")
        #expect(try await Self.attachments(h, of: backup.id!) == ["scan.pdf: the scanned contract"])
        await h.stop()
    }

    @Test func recreateAfter404_namesTheAttachmentWhoseFileIsGone() async throws {
        let h = try await H.make()
        let view = try await Self.seedWithAttachment(h, "Bank")
        try await h.editOffline(view, password: "mine")
        try await h.client.deleteCipher(id: view.id!)   // another device deletes it, files and all
        let report = try await h.resolver().processPendingChanges(userId: h.userId)
        #expect(report.items.map(\.outcome) == [.recreated])
        #expect(report.items.first?.attachmentsNotCopied == ["scan.pdf"])
        let recreated = try #require(try h.serverItems(named: "Bank").first)
        #expect(recreated.login?.password == "mine")
        #expect(recreated.attachments ?? [] == [])
        #expect(try h.pendingCount() == 0)
        let records = try h.store.resolutionRecords(userId: h.userId, after: 0)
        let lost = try #require(records.first { $0.kind == .attachmentNotCopied })
        #expect(lost.reason?.contains("\"scan.pdf\"") == true)
        #expect(lost.reason?.contains("deleted the item") == true)
        #expect(lost.isConflict)
        await h.stop()
    }

    /// A soft-conflict backup copied the attachment, then the push failed and another device
    /// deleted the item: the re-created item takes the file from the backup.
    @Test func recreateAfter404_takesTheFileFromAnEarlierBackup() async throws {
        let h = try await H.make()
        var view = try await Self.seedWithAttachment(h, "Bank")
        for n in 1...4 { view = try await h.editOffline(view, password: "pw-\(n)") }
        h.failNext(1, "PUT", "/api/ciphers/\(view.id!)")
        #expect(try await h.resolver().processPendingChanges(userId: h.userId).items.map(\.outcome) == [.failed])
        try await h.client.deleteCipher(id: view.id!)
        h.clock.advance(by: 3600)
        #expect(try await h.resolver().processPendingChanges(userId: h.userId).items.map(\.outcome) == [.recreated])
        let items = try h.serverItems(named: "Bank")
        #expect(items.count == 2)
        for item in items { #expect(try await Self.attachments(h, of: item.id!) == ["scan.pdf: the scanned contract"], "\(item.name ?? "")") }
        #expect(try h.pendingCount() == 0)
        await h.stop()
    }

    /// A soft-conflict backup was made, the push failed, then another device added an
    /// attachment (a new revision, every field the same): the retry adds the attachment to the
    /// backup already made instead of backing up the same content twice.
    @Test func serverCopyChangedOnlyByAnAttachment_isNotBackedUpTwice() async throws {
        let h = try await H.make()
        var view = try await h.seedSynced("Bank")
        for n in 1...4 { view = try await h.editOffline(view, password: "pw-\(n)") }
        h.failNext(1, "PUT", "/api/ciphers/\(view.id!)")
        #expect(try await h.resolver().processPendingChanges(userId: h.userId).items.map(\.outcome) == [.failed])
        let cipher = try #require(h.emulator.cipher(id: view.id!))
        let sealed = SealedAttachment.seal(fileName: "scan.pdf", contents: Array("the scanned contract".utf8),
                                           itemKey: try cipher.fieldKey(userKey: h.userKey), random: SeededRandomSource(seed: 78))
        h.clock.advance(by: 60)
        _ = try await h.client.createAttachment(cipherId: view.id!, fileName: sealed.fileName, key: sealed.wrappedKey,
                                                encryptedData: sealed.encryptedData)
        h.clock.advance(by: 3600)
        #expect(try await h.resolver().processPendingChanges(userId: h.userId).items.map(\.outcome) != [.failed])
        let items = try h.serverItems(named: "Bank")
        #expect(items.count == 2, "\(items.map { $0.name ?? "" })")
        let backup = try Self.backup(h, of: view.id!)
        #expect(backup.login?.password == "pw-0")
        #expect(try await Self.attachments(h, of: backup.id!) == ["scan.pdf: the scanned contract"])
        #expect(try h.pendingCount() == 0)
        await h.stop()
    }

    /// Another device added an attachment after the user permanently deleted the item offline:
    /// the server copy is not the version the user deleted (every field is, the file is not),
    /// so the delete is dropped and the item, with its attachment, comes back.
    @Test func pendingPermanentDelete_meetsAnAttachmentAddedElsewhere_isDropped() async throws {
        let h = try await H.make()
        let view = try await h.seedSynced("Bank")
        h.clock.advance(by: 60)
        h.goOffline()
        _ = try await h.repository().deleteCipher(id: view.id!)
        h.goOnline()
        let cipher = try #require(h.emulator.cipher(id: view.id!))
        let sealed = SealedAttachment.seal(fileName: "scan.pdf", contents: Array("the scanned contract".utf8),
                                           itemKey: try cipher.fieldKey(userKey: h.userKey), random: SeededRandomSource(seed: 79))
        h.clock.advance(by: 60)
        _ = try await h.client.createAttachment(cipherId: view.id!, fileName: sealed.fileName, key: sealed.wrappedKey,
                                                encryptedData: sealed.encryptedData)
        #expect(try await h.resolver().processPendingChanges(userId: h.userId).items.map(\.outcome) == [.deleteDropped])
        #expect(try await Self.attachments(h, of: view.id!) == ["scan.pdf: the scanned contract"])
        #expect(try h.local(view.id!)?.attachments?.count == 1)
        await h.stop()
    }

    @Test func uploadFailure_keepsTheItemPendingAndNamesTheFile_retryCompletes() async throws {
        let h = try await H.make()
        let view = try await Self.seedWithAttachment(h, "Bank")
        try h.anotherDeviceEdits(view.id!) { $0.login?.password = "other" }
        try await h.editOffline(view, password: "mine")
        h.failNext(1, "POST", "/api/ciphers/*/attachment/v2", status: 500)
        let failed = try await h.resolver().processPendingChanges(userId: h.userId)
        #expect(failed.items.map(\.outcome) == [.failed])
        let error = try #require(failed.items.first?.error)
        #expect(error.contains("attachment \"scan.pdf\""), "\(error)")
        #expect(error.contains("stays pending"), "\(error)")
        #expect(try h.pending(view.id!)?.lastError?.contains("scan.pdf") == true)
        // Not pushed yet: the backup comes first, and it is not complete.
        #expect(try h.serverItems(named: "Bank").first { $0.id == view.id }?.login?.password == "other")
        h.clock.advance(by: 3600)
        #expect(try await h.resolver().processPendingChanges(userId: h.userId).items.map(\.outcome) == [.localKept])
        let backup = try Self.backup(h, of: view.id!)
        #expect(try await Self.attachments(h, of: backup.id!) == ["scan.pdf: the scanned contract"])
        #expect(try h.serverItems(named: "Bank").count == 2)
        await h.stop()
    }

    @Test func announcementAnswerLost_noSecondAttachment() async throws {
        let h = try await H.make()
        let view = try await Self.seedWithAttachment(h, "Bank")
        try h.anotherDeviceEdits(view.id!) { $0.login?.password = "other" }
        try await h.editOffline(view, password: "mine")
        h.dropResponseAfterApply(1, "POST", "/api/ciphers/*/attachment/v2")
        #expect(try await h.resolver().processPendingChanges(userId: h.userId).items.map(\.outcome) == [.failed])
        h.clock.advance(by: 3600)
        #expect(try await h.resolver().processPendingChanges(userId: h.userId).items.map(\.outcome) == [.localKept])
        let backup = try Self.backup(h, of: view.id!)
        #expect(try await Self.attachments(h, of: backup.id!) == ["scan.pdf: the scanned contract"])
        await h.stop()
    }

    /// Crash right after every server effect (the backup's POST, the attachment's upload, the
    /// PUT), reopen, resolve again: one backup, holding the attachment once.
    @Test func crashAfterEveryEffect_copiesTheAttachmentOnce() async throws {
        var crashPoint = 0
        while true {
            let h = try await H.make(seed: UInt64(crashPoint + 1))
            let view = try await Self.seedWithAttachment(h, "Bank")
            try h.anotherDeviceEdits(view.id!) { $0.login?.password = "other" }
            try await h.editOffline(view, password: "mine")
            let effects = Mutex(0)
            let target = crashPoint
            var crashed = false
            do {
                try await h.resolver(server: EffectObservingServer(h.client) { _ in
                    let n = effects.withLock { $0 += 1; return $0 }
                    if n == target + 1 { throw SimulatedCrash() }
                }).processPendingChanges(userId: h.userId)
            } catch is SimulatedCrash {
                crashed = true
            }
            try h.reopen()
            let report = try await h.resolver().processPendingChanges(userId: h.userId)
            #expect(report.remainingCount == 0, "crash point \(crashPoint): \(report.items)")
            let items = try h.serverItems(named: "Bank")
            #expect(items.count == 2, "crash point \(crashPoint)")
            let backup = try Self.backup(h, of: view.id!)
            #expect(try await Self.attachments(h, of: backup.id!) == ["scan.pdf: the scanned contract"], "crash point \(crashPoint)")
            #expect(items.first { $0.id == view.id }?.login?.password == "mine", "crash point \(crashPoint)")
            await h.stop()
            if !crashed { break }
            crashPoint += 1
            if crashPoint > 6 { Issue.record("more than 6 server effects"); break }
        }
    }
}
