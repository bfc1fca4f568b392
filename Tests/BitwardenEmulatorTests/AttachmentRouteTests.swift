import BitwardenAPI
import BitwardenEmulator
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import VaultCrypto
import VaultLogTesting
import VaultModel

/// The emulator's attachment routes over loopback HTTP, spoken raw (the request shapes of
/// Bitwarden's clients, built here without the typed client's encoder).
@Suite("Attachment routes: announce, upload, metadata, download, delete")
struct AttachmentRouteTests {
    /// A multipart/form-data body written out by hand.
    static func multipart(_ parts: [(name: String, fileName: String?, bytes: [UInt8])], boundary: String = "test-boundary-7f3a")
        -> (body: Data, contentType: String) {
        var body = Data()
        for part in parts {
            body.append(contentsOf: Array("--\(boundary)\r\n".utf8))
            let file = part.fileName.map { "; filename=\"\($0)\"" } ?? ""
            body.append(contentsOf: Array("Content-Disposition: form-data; name=\"\(part.name)\"\(file)\r\n".utf8))
            if part.fileName != nil { body.append(contentsOf: Array("Content-Type: application/octet-stream\r\n".utf8)) }
            body.append(contentsOf: Array("\r\n".utf8))
            body.append(contentsOf: part.bytes)
            body.append(contentsOf: Array("\r\n".utf8))
        }
        body.append(contentsOf: Array("--\(boundary)--\r\n".utf8))
        return (body, "multipart/form-data; boundary=\(boundary)")
    }

    static func announcement(_ sealed: SealedAttachment, size: Int? = nil) throws -> Data {
        try JSONSerialization.data(withJSONObject: [
            "key": sealed.wrappedKey.serialized, "fileName": sealed.fileName.serialized,
            "fileSize": size ?? sealed.encryptedData.count,
        ])
    }

    static func message(_ data: Data) -> String? { (try? RawHTTP.json(data))?["message"] as? String }

    func seal(_ h: Harness, count: Int = 5000) -> (contents: [UInt8], sealed: SealedAttachment) {
        let contents = h.random.bytes(count)
        return (contents, SealedAttachment.seal(fileName: "scan.pdf", contents: contents, itemKey: h.account.userKey, random: h.random))
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func announceUploadDownloadDelete(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let cipher = try await h.client.createCipher(h.loginCipher())
            let id = try #require(cipher.id)
            let (contents, sealed) = seal(h)
            h.clock.advance(by: 2)
            let announced = try await h.raw("POST", "/api/ciphers/\(id)/attachment/v2", body: try Self.announcement(sealed))
            #expect(announced.status == 200)
            let reply = try RawHTTP.json(announced.body)
            #expect(reply["object"] as? String == "attachment-fileUpload")
            #expect(reply["fileUploadType"] as? Int == 0)   // Direct
            let attachmentId = try #require(reply["attachmentId"] as? String)
            #expect(attachmentId.count == (flavor == .bitwarden ? 32 : 20))
            #expect(reply["url"] as? String == "/ciphers/\(id)/attachment/\(attachmentId)")
            let inReply = try #require(reply["cipherResponse"] as? [String: Any])
            #expect((inReply["attachments"] as? [[String: Any]])?.first?["id"] as? String == attachmentId)
            let replied = try JSONDecoder().decode(Cipher.self, from: try JSONSerialization.data(withJSONObject: inReply))
            #expect(replied.revisionDate == BitwardenDate(Harness.start.addingTimeInterval(2)))   // the announcement bumps it

            let (body, contentType) = Self.multipart([("data", sealed.fileName.serialized, sealed.encryptedData)])
            let upload = try await h.raw("POST", "/api/ciphers/\(id)/attachment/\(attachmentId)", body: body, contentType: contentType)
            #expect(upload.status == 200)

            // Sync and the item's own route show it with its size and encrypted name and key.
            let synced = try await h.client.sync().ciphers.first { $0.id == id }
            let attachment = try #require(synced?.attachment(id: attachmentId))
            #expect(attachment.size == String(sealed.encryptedData.count))
            #expect(attachment.fileName == sealed.fileName)
            #expect(attachment.key == sealed.wrappedKey)
            #expect(try await h.client.getCipher(id: id).attachment(id: attachmentId) != nil)

            let metadata = try RawHTTP.json(try await h.raw("GET", "/api/ciphers/\(id)/attachment/\(attachmentId)").body)
            #expect(metadata["object"] as? String == "attachment")
            let url = try #require((metadata["url"] as? String).flatMap(URL.init(string:)))
            #expect(url.path == "/attachments/\(id)/\(attachmentId)")
            let file = try await RawHTTP.send("GET", url)
            #expect(file.status == 200)
            #expect(Array(file.body) == sealed.encryptedData)
            #expect(try SealedAttachment.open(encryptedData: Array(file.body), wrappedKey: attachment.key!, itemKey: h.account.userKey)
                    == contents)

            h.clock.advance(by: 2)
            #expect(try await h.raw("DELETE", "/api/ciphers/\(id)/attachment/\(attachmentId)").status == 200)
            let after = try await h.client.getCipher(id: id)
            #expect(after.attachments == nil)
            #expect(after.revisionDate == BitwardenDate(Harness.start.addingTimeInterval(4)))
            #expect(try await h.raw("GET", "/api/ciphers/\(id)/attachment/\(attachmentId)").status == (flavor == .bitwarden ? 404 : 400))
            #expect(try await RawHTTP.send("GET", url).status == 404)
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func aMissingAttachment_getsTheFlavoursError(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let id = try #require(try await h.client.createCipher(h.loginCipher()).id)
            for (method, suffix) in [("GET", ""), ("DELETE", ""), ("POST", "/delete")] {
                let reply = try await h.raw(method, "/api/ciphers/\(id)/attachment/nosuchattachment\(suffix)")
                switch flavor {
                case .bitwarden:
                    #expect(reply.status == 404, "\(method)")
                    #expect(Self.message(reply.body) == "Resource not found.")
                case .vaultwarden:
                    #expect(reply.status == 400, "\(method)")
                    #expect(Self.message(reply.body) == "Attachment doesn't exist")
                }
            }
            let unknownCipher = try await h.raw("GET", "/api/ciphers/11111111-2222-4333-8444-555555555555/attachment/x")
            #expect(unknownCipher.status == (flavor == .bitwarden ? 404 : 400))
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func anAnnouncementOverTheLimit_isRefused(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let id = try #require(try await h.client.createCipher(h.loginCipher()).id)
            let (_, sealed) = seal(h)
            let reply = try await h.raw("POST", "/api/ciphers/\(id)/attachment/v2",
                                        body: try Self.announcement(sealed, size: 100 * 1024 * 1024 + 1))
            #expect(reply.status == 400)
            #expect(Self.message(reply.body) == "Max file size is 100 MB.")
            #expect(try await h.client.getCipher(id: id).attachments == nil)
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func anUploadOverTheLimit_gets413(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor, configure: { $0.maximumAttachmentBytes = 4096 }) { h in
            let id = try #require(try await h.client.createCipher(h.loginCipher()).id)
            let (_, sealed) = seal(h, count: 5000)
            // Announced within the limit, uploaded larger than it.
            let announced = try await h.raw("POST", "/api/ciphers/\(id)/attachment/v2", body: try Self.announcement(sealed, size: 4000))
            let attachmentId = try #require(try RawHTTP.json(announced.body)["attachmentId"] as? String)
            let (body, contentType) = Self.multipart([("data", "f", sealed.encryptedData)])
            let upload = try await h.raw("POST", "/api/ciphers/\(id)/attachment/\(attachmentId)", body: body, contentType: contentType)
            #expect(upload.status == 413)
            #expect(Self.message(upload.body)?.contains("at most 4096") == true)
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func malformedUploads_areRefusedNamingTheProblem(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let id = try #require(try await h.client.createCipher(h.loginCipher()).id)
            let (_, sealed) = seal(h)
            let announced = try await h.raw("POST", "/api/ciphers/\(id)/attachment/v2", body: try Self.announcement(sealed))
            let attachmentId = try #require(try RawHTTP.json(announced.body)["attachmentId"] as? String)
            let path = "/api/ciphers/\(id)/attachment/\(attachmentId)"

            let notMultipart = try await h.raw("POST", path, body: Data(sealed.encryptedData), contentType: "application/octet-stream")
            #expect(notMultipart.status == 400)
            #expect(Self.message(notMultipart.body)?.contains("not multipart/form-data") == true)

            let noBoundary = try await h.raw("POST", path, body: Data("x".utf8), contentType: "multipart/form-data")
            #expect(Self.message(noBoundary.body)?.contains("no boundary") == true)

            var truncated = Self.multipart([("data", "f", sealed.encryptedData)]).body
            truncated.removeLast(30)
            let cut = try await h.raw("POST", path, body: truncated, contentType: "multipart/form-data; boundary=test-boundary-7f3a")
            #expect(cut.status == 400)
            #expect(Self.message(cut.body)?.contains("no closing boundary") == true)

            let (wrongField, contentType) = Self.multipart([("file", "f", sealed.encryptedData)])
            let noData = try await h.raw("POST", path, body: wrongField, contentType: contentType)
            #expect(Self.message(noData.body)?.contains("no 'data' part") == true)

            let (small, smallType) = Self.multipart([("data", "f", Array(sealed.encryptedData.prefix(10)))])
            let declaredSize = try await h.raw("POST", "/api/ciphers/\(id)/attachment/v2",
                                               body: try Self.announcement(sealed, size: 3 << 20))
            let mismatchId = try #require(try RawHTTP.json(declaredSize.body)["attachmentId"] as? String)
            let mismatch = try await h.raw("POST", "/api/ciphers/\(id)/attachment/\(mismatchId)", body: small, contentType: smallType)
            #expect(mismatch.status == 400)
            #expect(Self.message(mismatch.body) == (flavor == .bitwarden ? "File received does not match expected file length."
                                                                         : "Attachment size mismatch"))
            // The mismatched announcement is dropped; the first one stays, still without a file.
            #expect(try await h.client.getCipher(id: id).attachments?.map(\.id) == [attachmentId])
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func theLegacyOneStepUpload_storesKeyNameAndFile(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let id = try #require(try await h.client.createCipher(h.loginCipher()).id)
            let (contents, sealed) = seal(h)
            let (body, contentType) = Self.multipart([
                ("key", nil, Array(sealed.wrappedKey.serialized.utf8)),
                ("data", sealed.fileName.serialized, sealed.encryptedData),
            ])
            let reply = try await h.raw("POST", "/api/ciphers/\(id)/attachment", body: body, contentType: contentType)
            #expect(reply.status == 200)
            let attachment = try #require(try await h.client.getCipher(id: id).attachments?.first)
            #expect(attachment.fileName == sealed.fileName)
            #expect(attachment.key == sealed.wrappedKey)
            let metadata = try RawHTTP.json(try await h.raw("GET", "/api/ciphers/\(id)/attachment/\(attachment.id!)").body)
            let url = try #require((metadata["url"] as? String).flatMap(URL.init(string:)))
            let file = try await RawHTTP.send("GET", url)
            #expect(try SealedAttachment.open(encryptedData: Array(file.body), wrappedKey: sealed.wrappedKey, itemKey: h.account.userKey)
                    == contents)
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func theDownloadURL_needsItsValidToken(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let id = try #require(try await h.client.createCipher(h.loginCipher()).id)
            let (_, sealed) = seal(h)
            let legacy = Self.multipart([("key", nil, Array(sealed.wrappedKey.serialized.utf8)), ("data", sealed.fileName.serialized, sealed.encryptedData)])
            _ = try await h.raw("POST", "/api/ciphers/\(id)/attachment", body: legacy.body, contentType: legacy.contentType)
            let attachmentId = try #require(try await h.client.getCipher(id: id).attachments?.first?.id)
            let metadata = try RawHTTP.json(try await h.raw("GET", "/api/ciphers/\(id)/attachment/\(attachmentId)").body)
            let url = try #require((metadata["url"] as? String).flatMap(URL.init(string:)))
            let bare = try #require(URL(string: h.baseURL.absoluteString + "/attachments/\(id)/\(attachmentId)"))
            #expect(try await RawHTTP.send("GET", bare).status == 401)
            let forged = try #require(URL(string: String(url.absoluteString.dropLast(2)) + "AA"))
            #expect(try await RawHTTP.send("GET", forged).status == 401)
            #expect(try await RawHTTP.send("GET", url).status == 200)
            h.clock.advance(by: 301)   // past the 5-minute lifetime
            #expect(try await RawHTTP.send("GET", url).status == 401)
        }
    }

    @Test(arguments: EmulatorFlavor.allCases)
    func theTrashKeepsAttachments_aPermanentDeleteRemovesThem(flavor: EmulatorFlavor) async throws {
        try await Harness.with(flavor) { h in
            let id = try #require(try await h.client.createCipher(h.loginCipher()).id)
            let (_, sealed) = seal(h)
            let legacy = Self.multipart([("key", nil, Array(sealed.wrappedKey.serialized.utf8)), ("data", sealed.fileName.serialized, sealed.encryptedData)])
            _ = try await h.raw("POST", "/api/ciphers/\(id)/attachment", body: legacy.body, contentType: legacy.contentType)
            let attachmentId = try #require(try await h.client.getCipher(id: id).attachments?.first?.id)
            try await h.client.softDeleteCipher(id: id)
            let metadata = try RawHTTP.json(try await h.raw("GET", "/api/ciphers/\(id)/attachment/\(attachmentId)").body)
            let url = try #require((metadata["url"] as? String).flatMap(URL.init(string:)))
            #expect(try await RawHTTP.send("GET", url).status == 200)
            #expect(try await h.client.sync().ciphers.first?.attachments?.map(\.id) == [attachmentId])
            try await h.client.deleteCipher(id: id)
            #expect(try await RawHTTP.send("GET", url).status == 404)
        }
    }
}
