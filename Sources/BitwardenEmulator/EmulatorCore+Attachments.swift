import Crypto
import Foundation
import VaultCrypto
import VaultJSON
import VaultModel

extension EmulatorCore {
    // MARK: Attachments

    /// How far an uploaded file may differ from the size its announcement gave (both servers
    /// allow 1 MiB either way and then keep the real size).
    static let attachmentSizeLeeway = 1 << 20
    /// How long a download URL stays valid (Vaultwarden's download tokens last 5 minutes).
    static let downloadLifetimeSeconds: Int64 = 300

    /// A new attachment id in the flavour's form: 32 lowercase letters and digits (Bitwarden),
    /// 20 hex digits (Vaultwarden).
    func newAttachmentID() -> String {
        switch flavor {
        case .bitwarden:
            let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
            return String(configuration.random.bytes(32).map { alphabet[Int($0) % alphabet.count] })
        case .vaultwarden:
            return configuration.random.bytes(10).map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
                .joined()
        }
    }

    /// The human-readable size each server writes in `sizeName`.
    func sizeName(_ size: Int) -> String {
        switch flavor {
        case .bitwarden:
            // CoreHelpers.ReadableBytesSize: "N Bytes", then one decimal at most ("2.9 KB", "1 MB").
            guard size >= 1024 else { return "\(size) Bytes" }
            var value = Double(size) / 1024
            var unit = 0
            let units = ["KB", "MB", "GB", "TB"]
            while value >= 1024, unit < units.count - 1 {
                value /= 1024
                unit += 1
            }
            let rounded = (value * 10).rounded() / 10
            let text = rounded == rounded.rounded(.down) ? String(Int(rounded)) : String(format: "%.1f", rounded)
            return "\(text) \(units[unit])"
        case .vaultwarden:
            // get_display_size: two decimals, "bytes" below 1 KiB.
            var value = Double(size)
            var unit = 0
            let units = ["bytes", "KB", "MB", "GB", "TB", "PB"]
            while value > 1024, unit < units.count - 1 {
                value /= 1024
                unit += 1
            }
            return String(format: "%.2f", value) + " " + units[unit]
        }
    }

    /// The attachments of a stored cipher as responses carry them: each with `object` and, if it
    /// has none of its own, the path of its file route (the download URL with its signed query
    /// comes from `GET …/attachment/{id}`). Null when there are none, as on both servers.
    func renderedAttachments(_ cipher: StoredCipher) -> JSONValue {
        guard case .array(let items)? = cipher.attachments, !items.isEmpty else { return cipher.attachments ?? .null }
        return .array(items.map { item in
            guard case .object(var object) = item else { return item }
            if object["object"] == nil { object["object"] = .string("attachment") }
            if object["url"] == nil, case .string(let id)? = object["id"] {
                object["url"] = .string("/attachments/\(cipher.id)/\(id)")
            }
            return .object(object)
        })
    }

    /// The stored attachment objects of a cipher.
    func attachmentList(_ cipher: StoredCipher) -> [JSONObject] {
        guard case .array(let items)? = cipher.attachments else { return [] }
        return items.compactMap { if case .object(let object) = $0 { object } else { nil } }
    }

    func attachmentIndex(_ attachmentId: String, in cipher: StoredCipher) -> Int? {
        attachmentList(cipher).firstIndex { $0["id"] == .string(attachmentId) }
    }

    func setAttachments(_ list: [JSONObject], on cipher: inout StoredCipher) {
        cipher.attachments = list.isEmpty ? nil : .array(list.map(JSONValue.object))
    }

    /// An attachment id the cipher does not have: Bitwarden's 404, Vaultwarden's 400.
    func missingAttachment() -> EmulatorResponse { missing("Attachment doesn't exist") }

    func attachmentObject(id: String, fileName: String, key: String, size: Int) -> JSONObject {
        ["id": .string(id), "fileName": .string(fileName), "key": .string(key), "size": .string(String(size)),
         "sizeName": .string(sizeName(size)), "object": .string("attachment")]
    }

    /// `POST /api/ciphers/{id}/attachment/v2`: announces an attachment (metadata now, the file
    /// later at the returned `url`). Bumps the cipher's revision date.
    func createAttachment(_ id: String, _ request: EmulatorRequest, userId: String) -> EmulatorResponse {
        guard case .object(let body)? = try? JSONValue(parsing: request.body) else {
            var errors = ValidationErrors()
            errors.add("$", "The request body must be a JSON object with key, fileName and fileSize.")
            return flavor == .bitwarden ? ErrorBodies.invalidModel(flavor, errors)
                : ErrorBodies.error(flavor, status: 422, message: "The request body must be a JSON object with key, fileName and fileSize.")
        }
        var errors = ValidationErrors()
        func encString(_ field: String, _ label: String) -> String? {
            guard case .string(let text)? = body[field], !text.isEmpty else {
                errors.add(label, "The \(label) field is required.")
                return nil
            }
            if flavor == .bitwarden, !EncStringRules.isValid(text) { errors.add(label, "\(label) is not a valid encrypted string.") }
            return text
        }
        let key = encString("key", "Key")
        let fileName = encString("fileName", "FileName")
        var fileSize: Int?
        if case .integer(let size)? = body["fileSize"] {
            fileSize = Int(exactly: size)
        } else {
            errors.add("FileSize", "The FileSize field is required and must be a whole number of bytes.")
        }
        guard errors.isEmpty, let key, let fileName, let fileSize else { return ErrorBodies.invalidModel(flavor, errors) }
        guard fileSize >= 0 else { return ErrorBodies.error(flavor, status: 400, message: "Attachment size can't be negative") }
        if fileSize > configuration.maximumAttachmentBytes { return tooLargeAnnouncement() }
        return withLock { state in
            var cipher: StoredCipher
            switch lookup(id, userId: userId, state: state, foreignMessage: "Cipher is not write accessible") {
            case .failure(let response): return response
            case .success(let c): cipher = c
            }
            let attachmentId = newAttachmentID()
            setAttachments(attachmentList(cipher) + [attachmentObject(id: attachmentId, fileName: fileName, key: key, size: fileSize)],
                           on: &cipher)
            cipher.revisionTicks = bumped(after: cipher.revisionTicks)
            state.ciphers[cipher.id] = cipher
            touchAccount(userId, in: &state)
            logger.debug("emulator: announced attachment", metadata: ["cipher": "\(cipher.id)", "attachment": "\(attachmentId)"])
            return .json(200, [
                "object": .string("attachment-fileUpload"),
                "attachmentId": .string(attachmentId),
                "url": .string("/ciphers/\(cipher.id)/attachment/\(attachmentId)"),
                "fileUploadType": .integer(0),   // Direct (Azure is 1)
                "cipherResponse": .object(cipherJSON(cipher, object: singleObject)),
                "cipherMiniResponse": .null,
            ])
        }
    }

    func tooLargeAnnouncement() -> EmulatorResponse {
        let limit = configuration.maximumAttachmentBytes
        let readable = limit % (1 << 20) == 0 ? "\(limit >> 20) MB" : "\(limit) bytes"
        return ErrorBodies.error(flavor, status: 400, message: "Max file size is \(readable).")
    }

    func tooLargeUpload(_ size: Int) -> EmulatorResponse {
        ErrorBodies.error(flavor, status: 413, message:
            "The attachment file is \(size) bytes; this server accepts at most \(configuration.maximumAttachmentBytes).")
    }

    /// The form of an upload, or the 400 that names what is wrong with it.
    func multipart(_ request: EmulatorRequest) -> Result<MultipartForm, EmulatorResponse> {
        do {
            return .success(try MultipartForm(body: request.body, contentType: request.header("Content-Type")))
        } catch let failure as MultipartForm.Failure {
            return .failure(ErrorBodies.error(flavor, status: 400, message: "Invalid content: \(failure.message)."))
        } catch {
            return .failure(ErrorBodies.error(flavor, status: 400, message: "Invalid content: \(error)."))
        }
    }

    /// The form of an upload and its `data` part (the file), or the 400 that names what is missing.
    func multipartFile(_ request: EmulatorRequest) -> Result<(MultipartForm, MultipartForm.Part), EmulatorResponse> {
        multipart(request).flatMap { form in
            guard let data = form.part("data") else {
                return .failure(ErrorBodies.error(flavor, status: 400, message: "Invalid content: the multipart body has no 'data' part (the file)."))
            }
            return .success((form, data))
        }
    }

    /// `POST /api/ciphers/{id}/attachment/{attachmentId}`: the file of an announced attachment
    /// (field `data`). No further revision bump: the announcement made it.
    func uploadAttachment(_ id: String, attachmentId: String, _ request: EmulatorRequest, userId: String) -> EmulatorResponse {
        let data: MultipartForm.Part
        switch multipartFile(request) {
        case .success(let upload): data = upload.1
        case .failure(let response): return response
        }
        if data.body.count > configuration.maximumAttachmentBytes { return tooLargeUpload(data.body.count) }
        return withLock { state in
            var cipher: StoredCipher
            switch lookup(id, userId: userId, state: state, foreignMessage: "Cipher is not write accessible") {
            case .failure(let response): return response
            case .success(let c): cipher = c
            }
            var list = attachmentList(cipher)
            guard let index = attachmentIndex(attachmentId, in: cipher) else { return missingAttachment() }
            let fileKey = EmulatorState.attachmentFileKey(cipherId: cipher.id, attachmentId: attachmentId)
            guard state.attachmentFiles[fileKey] == nil else {
                return ErrorBodies.error(flavor, status: 400, message: "Attachment \(attachmentId) has already been uploaded.")
            }
            let declared: Int
            if case .string(let text)? = list[index]["size"], let size = Int(text) { declared = size } else { declared = data.body.count }
            guard abs(declared - data.body.count) <= Self.attachmentSizeLeeway else {
                // Both servers drop the announcement when the file does not match it.
                list.remove(at: index)
                setAttachments(list, on: &cipher)
                state.ciphers[cipher.id] = cipher
                return ErrorBodies.error(flavor, status: 400, message: flavor == .bitwarden
                    ? "File received does not match expected file length." : "Attachment size mismatch")
            }
            list[index]["size"] = .string(String(data.body.count))
            list[index]["sizeName"] = .string(sizeName(data.body.count))
            setAttachments(list, on: &cipher)
            state.ciphers[cipher.id] = cipher
            state.attachmentFiles[fileKey] = Data(data.body)
            logger.debug("emulator: stored attachment file", metadata: ["cipher": "\(cipher.id)", "attachment": "\(attachmentId)"])
            return .empty()
        }
    }

    /// `POST /api/ciphers/{id}/attachment`: the older one-step upload (`key` and `data`, the
    /// encrypted file name as `data`'s file name). Answers the cipher.
    func createAttachmentLegacy(_ id: String, _ request: EmulatorRequest, userId: String) -> EmulatorResponse {
        let form: MultipartForm, data: MultipartForm.Part
        switch multipartFile(request) {
        case .success(let upload): (form, data) = upload
        case .failure(let response): return response
        }
        guard let fileName = data.fileName, !fileName.isEmpty else {
            return ErrorBodies.error(flavor, status: 400, message: "Invalid content: the 'data' part has no filename (the encrypted file name).")
        }
        guard let keyPart = form.part("key"), let key = String(validating: keyPart.body, as: UTF8.self), !key.isEmpty else {
            return ErrorBodies.error(flavor, status: 400, message: "Invalid content: the multipart body has no 'key' part (the attachment key).")
        }
        if data.body.count > configuration.maximumAttachmentBytes { return tooLargeUpload(data.body.count) }
        return withLock { state in
            var cipher: StoredCipher
            switch lookup(id, userId: userId, state: state, foreignMessage: "Cipher is not write accessible") {
            case .failure(let response): return response
            case .success(let c): cipher = c
            }
            let attachmentId = newAttachmentID()
            setAttachments(attachmentList(cipher) + [attachmentObject(id: attachmentId, fileName: fileName, key: key, size: data.body.count)],
                           on: &cipher)
            cipher.revisionTicks = bumped(after: cipher.revisionTicks)
            state.ciphers[cipher.id] = cipher
            state.attachmentFiles[EmulatorState.attachmentFileKey(cipherId: cipher.id, attachmentId: attachmentId)] = Data(data.body)
            touchAccount(userId, in: &state)
            return .json(200, cipherJSON(cipher, object: singleObject))
        }
    }

    /// `GET /api/ciphers/{id}/attachment/{attachmentId}`: the metadata with a download URL that
    /// carries a signed, short-lived token (absolute when the request named its `Host`).
    func attachmentMetadata(_ id: String, attachmentId: String, request: EmulatorRequest, userId: String) -> EmulatorResponse {
        withLock { state in
            let cipher: StoredCipher
            switch lookup(id, userId: userId, state: state, foreignMessage: "Cipher is not owned by user") {
            case .failure(let response): return response
            case .success(let c): cipher = c
            }
            guard let index = attachmentIndex(attachmentId, in: cipher) else { return missingAttachment() }
            var object = attachmentList(cipher)[index]
            object["object"] = .string("attachment")
            let expires = Int64(configuration.now().timeIntervalSince1970.rounded(.down)) + Self.downloadLifetimeSeconds
            let path = "/attachments/\(cipher.id)/\(attachmentId)?token="
                + downloadToken(cipherId: cipher.id, attachmentId: attachmentId, expires: expires, signingKey: state.signingKey)
            object["url"] = .string(request.header("Host").map { "http://\($0)\(path)" } ?? path)
            return .json(200, object)
        }
    }

    /// `DELETE /api/ciphers/{id}/attachment/{attachmentId}`: removes the metadata and the file
    /// and bumps the cipher's revision date.
    func deleteAttachment(_ id: String, attachmentId: String, userId: String) -> EmulatorResponse {
        withLock { state in
            var cipher: StoredCipher
            switch lookup(id, userId: userId, state: state, foreignMessage: "Cipher can't be deleted by user") {
            case .failure(let response): return response
            case .success(let c): cipher = c
            }
            guard let index = attachmentIndex(attachmentId, in: cipher) else { return missingAttachment() }
            var list = attachmentList(cipher)
            list.remove(at: index)
            setAttachments(list, on: &cipher)
            cipher.revisionTicks = bumped(after: cipher.revisionTicks)
            state.ciphers[cipher.id] = cipher
            state.attachmentFiles[EmulatorState.attachmentFileKey(cipherId: cipher.id, attachmentId: attachmentId)] = nil
            touchAccount(userId, in: &state)
            return .empty()
        }
    }

    /// `GET /attachments/{cipherId}/{attachmentId}?token=…`: the encrypted file. The token is
    /// `EXPIRY.SIGNATURE`, an HMAC of the ids and the expiry under the state's signing key.
    func attachmentFile(cipherId: String, attachmentId: String, request: EmulatorRequest) -> EmulatorResponse {
        let now = Int64(configuration.now().timeIntervalSince1970.rounded(.down))
        let token = request.query["token"] ?? ""
        return withLock { state in
            let parts = token.split(separator: ".", maxSplits: 1)
            guard parts.count == 2, let expires = Int64(parts[0]),
                  constantTimeEquals(Array(downloadToken(cipherId: cipherId, attachmentId: attachmentId, expires: expires,
                                                         signingKey: state.signingKey).utf8), Array(token.utf8)) else {
                return ErrorBodies.unauthorized(flavor, reason: "The download token is missing or invalid; get a new URL from the attachment metadata route")
            }
            guard expires > now else {
                return ErrorBodies.unauthorized(flavor, reason: "The download token expired; get a new URL from the attachment metadata route")
            }
            guard let file = state.attachmentFiles[EmulatorState.attachmentFileKey(cipherId: cipherId, attachmentId: attachmentId)] else {
                return ErrorBodies.error(flavor, status: 404, message: "Attachment \(attachmentId) of cipher \(cipherId) has no file.")
            }
            return EmulatorResponse(status: 200, headers: [("Content-Type", "application/octet-stream")], body: Array(file))
        }
    }

    func downloadToken(cipherId: String, attachmentId: String, expires: Int64, signingKey: String) -> String {
        let message = Array("attachment:\(cipherId.lowercased())/\(attachmentId):\(expires)".utf8)
        let mac = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: Base64.decode(signingKey) ?? []))
        return "\(expires)." + Base64.encode(Array(mac)).base64URL
    }
}
