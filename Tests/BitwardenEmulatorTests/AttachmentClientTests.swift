import BitwardenAPI
import BitwardenEmulator
import Foundation
@_spi(Tools) import OfflineSync
import Testing
import VaultCrypto
import VaultLogTesting
import VaultModel

/// `BitwardenClient`'s attachment calls against the emulator over loopback HTTP, through both
/// transports.
@Suite("Attachments through the client")
struct AttachmentClientTests {
    static let cases: [(EmulatorFlavor, TransportKind)] = EmulatorFlavor.allCases.flatMap { f in TransportKind.allCases.map { (f, $0) } }

    @Test(arguments: cases)
    func upload_sync_download_decrypt_delete(flavor: EmulatorFlavor, transport: TransportKind) async throws {
        try await Harness.with(flavor, transport: transport) { h in
            // An item with its own key, so the attachment key is wrapped by that key, not the user key.
            let cipherKey = SymmetricCryptoKey.generate(using: h.random)
            var item = Cipher(type: .secureNote, name: EncString.encrypt("Scans", key: cipherKey, random: h.random))
            item.secureNote = CipherSecureNote(type: .generic)
            item.key = h.account.userKey.wrap(cipherKey, random: h.random)
            let created = try await h.client.createCipher(item)
            let id = try #require(created.id)
            let itemKey = try created.fieldKey(userKey: h.account.userKey)
            #expect(itemKey == cipherKey)

            // Every byte value, and more than one read's worth.
            let contents = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }
            let sealed = SealedAttachment.seal(fileName: "photo.jpg", contents: contents, itemKey: itemKey, random: h.random)
            h.clock.advance(by: 3)
            let updated = try await h.client.createAttachment(cipherId: id, fileName: sealed.fileName, key: sealed.wrappedKey,
                                                              encryptedData: sealed.encryptedData)
            let attachment = try #require(updated.attachments?.first)
            let attachmentId = try #require(attachment.id)
            #expect(updated.revisionDate == BitwardenDate(Harness.start.addingTimeInterval(3)))

            let synced = try #require(try await h.client.sync().ciphers.first { $0.id == id })
            #expect(synced.attachment(id: attachmentId)?.size == String(sealed.encryptedData.count))
            let view = try synced.decrypt(userKey: h.account.userKey)
            #expect(view.attachments?.first?.fileName == "photo.jpg")
            #expect(view.attachments?.first?.key == sealed.attachmentKey)

            let metadata = try await h.client.attachmentMetadata(cipherId: id, attachmentId: attachmentId)
            #expect(metadata.key == sealed.wrappedKey)
            let downloaded = try await h.client.downloadAttachment(cipherId: id, attachmentId: attachmentId)
            #expect(downloaded == sealed.encryptedData)
            #expect(try SealedAttachment.open(encryptedData: downloaded, wrappedKey: try #require(metadata.key), itemKey: itemKey)
                    == contents)

            h.clock.advance(by: 3)
            try await h.client.deleteAttachment(cipherId: id, attachmentId: attachmentId)
            let after = try await h.client.getCipher(id: id)
            #expect(after.attachments == nil)
            #expect(after.revisionDate == BitwardenDate(Harness.start.addingTimeInterval(6)))
            let gone = await apiError { _ = try await h.client.attachmentMetadata(cipherId: id, attachmentId: attachmentId) }
            #expect(gone?.serverErrorKind == .notFound)
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func aMissingAttachment_isNotFound(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let id = try #require(try await h.client.createCipher(h.loginCipher()).id)
            let metadata = await apiError { _ = try await h.client.attachmentMetadata(cipherId: id, attachmentId: "missing") }
            #expect(metadata?.serverErrorKind == .notFound)
            #expect(metadata?.status == (flavor == .bitwarden ? 404 : 400))
            #expect(metadata?.route == "GET /api/ciphers/\(id)/attachment/missing")
            let download = await apiError { _ = try await h.client.downloadAttachment(cipherId: id, attachmentId: "missing") }
            #expect(download?.serverErrorKind == .notFound)
            let delete = await apiError { try await h.client.deleteAttachment(cipherId: id, attachmentId: "missing") }
            #expect(delete?.serverErrorKind == .notFound)
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func aFileOverTheServersLimit_isRejected_andLeavesNothing(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor, configure: { $0.maximumAttachmentBytes = 1 << 20 }) { h in
            let id = try #require(try await h.client.createCipher(h.loginCipher()).id)
            let sealed = SealedAttachment.seal(fileName: "big.bin", contents: h.random.bytes((1 << 20) + 1), itemKey: h.account.userKey,
                                               random: h.random)
            let error = await apiError {
                _ = try await h.client.createAttachment(cipherId: id, fileName: sealed.fileName, key: sealed.wrappedKey,
                                                        encryptedData: sealed.encryptedData)
            }
            #expect(error?.serverErrorKind == .rejected)
            #expect(error?.status == 400)
            #expect(error?.message == "Max file size is 1 MB.")
            #expect(try #require(h.emulator.cipher(id: id)).attachments == nil)
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func aFailedUpload_takesTheAnnouncementBack(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let id = try #require(try await h.client.createCipher(h.loginCipher()).id)
            let sealed = SealedAttachment.seal(fileName: "a.txt", contents: Array("hello".utf8), itemKey: h.account.userKey, random: h.random)
            // A matcher made from a route takes that route only: the announcement (`…/attachment/v2`)
            // fits the upload's pattern too, but is not the upload.
            #expect(!RouteMatcher(.uploadAttachment).matches(method: "POST", path: "/api/ciphers/\(id)/attachment/v2"))
            #expect(RouteMatcher(.uploadAttachment).matches(method: "POST", path: "/api/ciphers/\(id)/attachment/abc"))
            h.emulator.faults.failNext(matching: RouteMatcher(.uploadAttachment), with: .status(503))
            let error = await apiError {
                _ = try await h.client.createAttachment(cipherId: id, fileName: sealed.fileName, key: sealed.wrappedKey,
                                                        encryptedData: sealed.encryptedData)
            }
            #expect(error?.serverErrorKind == .unavailable)
            #expect(error?.status == 503)
            #expect(try #require(h.emulator.cipher(id: id)).attachments == nil)
            #expect(h.emulator.recentRequests.map { "\($0.method) \($0.status.map(String.init) ?? "-")" }.suffix(3)
                    == ["POST 200", "POST 503", "DELETE 200"])
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func aFaultOnTheDownloadURL_isUnavailable(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let id = try #require(try await h.client.createCipher(h.loginCipher()).id)
            let sealed = SealedAttachment.seal(fileName: "a.txt", contents: Array("hello".utf8), itemKey: h.account.userKey, random: h.random)
            let updated = try await h.client.createAttachment(cipherId: id, fileName: sealed.fileName, key: sealed.wrappedKey,
                                                              encryptedData: sealed.encryptedData)
            let attachmentId = try #require(updated.attachments?.first?.id)
            h.emulator.faults.failNext(matching: RouteMatcher("GET /attachments/**"), with: .status(500))
            let error = await apiError { _ = try await h.client.downloadAttachment(cipherId: id, attachmentId: attachmentId) }
            #expect(error?.serverErrorKind == .unavailable)
            #expect(error?.route == "GET /attachments/\(id)/\(attachmentId)")
            #expect(try await h.client.downloadAttachment(cipherId: id, attachmentId: attachmentId) == sealed.encryptedData)
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func aRestartFromTheStateFile_keepsAttachments(flavor: EmulatorFlavor) async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("emulator-attach-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let clock = ManualClock(Harness.start)
        let (id, attachmentId, sealed) = try await Harness.with(flavor) { h in
            let id = try #require(try await h.client.createCipher(h.loginCipher()).id)
            let sealed = SealedAttachment.seal(fileName: "kept.txt", contents: h.random.bytes(70_000), itemKey: h.account.userKey,
                                               random: h.random)
            let updated = try await h.client.createAttachment(cipherId: id, fileName: sealed.fileName, key: sealed.wrappedKey,
                                                              encryptedData: sealed.encryptedData)
            try h.emulator.save(to: path)
            return (id, try #require(updated.attachments?.first?.id), sealed)
        }
        let emulator = try BitwardenEmulator.load(from: path, configuration: EmulatorConfiguration(flavor: flavor, now: { clock.now }))
        let base = try await emulator.start()
        do {
            let client = BitwardenClient(configuration: Harness.clientConfiguration(base))
            _ = try await client.login(email: Harness.email, password: Harness.password)
            #expect(try await client.getCipher(id: id).attachment(id: attachmentId)?.key == sealed.wrappedKey)
            #expect(try await client.downloadAttachment(cipherId: id, attachmentId: attachmentId) == sealed.encryptedData)
        } catch {
            await emulator.stop()
            throw error
        }
        await emulator.stop()
    }
}
