import Foundation
import Logging
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultModel

/// `POST /api/ciphers/{id}/attachment/v2`'s reply (`AttachmentUploadDataResponseModel`).
struct AttachmentUploadData: Decodable {
    var attachmentId: String
    var url: String?
    var fileUploadType: Int
    var cipherResponse: Cipher?
}

extension BitwardenClient {
    // MARK: Attachments

    /// Adds an attachment to an item in Bitwarden's two steps: `POST …/attachment/v2` announces
    /// it (`key`, `fileName`, `fileSize`), then `POST …/attachment/{attachmentId}` uploads the
    /// file as multipart/form-data (field `data`). Returns the item as the announcement left it,
    /// the new attachment included, with its new `revisionDate`.
    ///
    /// The arguments are already encrypted (`SealedAttachment.seal` makes all three):
    /// `fileName` under the item key, `key` the attachment's own key wrapped by the item key,
    /// and `encryptedData` the file as a binary `EncArrayBuffer` under the attachment key.
    ///
    /// If the upload fails, the client deletes the announcement, as Bitwarden's clients do, so
    /// that no attachment without a file is left (best effort: if that delete fails too, the
    /// item keeps an attachment whose download fails, which ``deleteAttachment(cipherId:attachmentId:)``
    /// removes), and throws the upload's error.
    ///
    /// - Throws: ``BitwardenAPIError``; `.rejected` for a file over the server's limit or a
    ///   server that asks for an upload to Azure (`fileUploadType` 1), which VaultLog does not do.
    public func createAttachment(cipherId: String, fileName: EncString, key: EncString, encryptedData: [UInt8]) async throws -> Cipher {
        let route = BitwardenEndpoint.createAttachment.route(cipherId)
        let announcement = try JSONSerialization.data(withJSONObject: [
            "key": key.serialized, "fileName": fileName.serialized, "fileSize": encryptedData.count,
        ], options: [.sortedKeys])
        let announced = try decode(AttachmentUploadData.self, try await send(.createAttachment, cipherId, body: announcement), route: route)
        guard announced.fileUploadType == 0, let cipher = announced.cipherResponse else {
            try? await deleteAttachment(cipherId: cipherId, attachmentId: announced.attachmentId)
            if announced.fileUploadType != 0 {
                throw BitwardenAPIError(kind: .rejected, status: 200, message:
                    "the server asks for file upload type \(announced.fileUploadType) (1 is Azure); VaultLog uploads directly (type 0) only",
                    route: route)
            }
            throw malformed(route, "the attachment reply has no cipherResponse")
        }
        var form = MultipartFormData()
        form.addFile(name: "data", fileName: fileName.serialized, bytes: encryptedData)
        let (body, contentType) = form.encoded()
        do {
            _ = try await send(.uploadAttachment, cipherId, announced.attachmentId, body: body, contentType: contentType)
        } catch {
            if !(error is CancellationError) {
                try? await deleteAttachment(cipherId: cipherId, attachmentId: announced.attachmentId)
            }
            throw error
        }
        logger.debug("bitwarden-api: attachment uploaded", metadata: ["cipher": "\(cipherId)", "attachment": "\(announced.attachmentId)"])
        return cipher
    }

    /// `GET /api/ciphers/{id}/attachment/{attachmentId}`: the attachment's metadata with a
    /// download `url` (short-lived on servers that sign it).
    ///
    /// - Throws: ``BitwardenAPIError``, `.notFound` for an unknown item or attachment.
    public func attachmentMetadata(cipherId: String, attachmentId: String) async throws -> CipherAttachment {
        try decode(CipherAttachment.self, try await send(.getAttachment, cipherId, attachmentId),
                   route: BitwardenEndpoint.getAttachment.route(cipherId, attachmentId))
    }

    /// The attachment's file as stored, still encrypted (a binary `EncArrayBuffer`; open it with
    /// `SealedAttachment.open`). Asks for the metadata, then fetches its `url`: resolved against
    /// the server's base URL when relative, sent without the access token (the URL carries its
    /// own authorisation, as the servers' signed download URLs do), and never redirected. A
    /// URL refused with 401 or 403 (expired) is asked for once more.
    ///
    /// - Throws: ``BitwardenAPIError``: `.notFound` for an unknown item or attachment,
    ///   `.rejected` for a download URL the server keeps refusing or one that is plain http to
    ///   another machine.
    public func downloadAttachment(cipherId: String, attachmentId: String) async throws -> [UInt8] {
        for attempt in 0..<2 {
            let metadata = try await attachmentMetadata(cipherId: cipherId, attachmentId: attachmentId)
            let metadataRoute = BitwardenEndpoint.getAttachment.route(cipherId, attachmentId)
            guard let text = metadata.url, !text.isEmpty else { throw malformed(metadataRoute, "the attachment metadata has no url") }
            let url = try downloadURL(text, route: metadataRoute)
            let route = "GET \(url.path)"
            let response = try await fetchUnauthorized(url, route: route)
            if (200..<300).contains(response.status) { return Array(response.body) }
            if [401, 403].contains(response.status) {
                if attempt == 0 { continue }
                throw BitwardenAPIError(kind: .rejected, status: response.status, message:
                    "the server refused its own download URL twice (\(ErrorBody(data: response.body)?.message ?? "no error body"))",
                    route: route)
            }
            throw BitwardenAPIError.fromResponse(status: response.status, body: response.body, route: route)
        }
        preconditionFailure("unreachable: the loop returns or throws")
    }

    /// `DELETE /api/ciphers/{id}/attachment/{attachmentId}`: removes the attachment and its file;
    /// the item's `revisionDate` moves on.
    public func deleteAttachment(cipherId: String, attachmentId: String) async throws {
        _ = try await send(.deleteAttachment, cipherId, attachmentId)
    }

    /// The metadata's `url` as an absolute http(s) URL the configuration allows.
    func downloadURL(_ text: String, route: String) throws -> URL {
        let configuration = state.withLock { $0.configuration }
        var base = switch configuration.endpoints {
        case .selfHosted(let base): base.absoluteString
        case .cloud(let api, _): api.absoluteString
        }
        if !base.hasSuffix("/") { base += "/" }
        guard let url = URL(string: text, relativeTo: URL(string: base))?.absoluteURL,
              let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw malformed(route, "the attachment url '\(text)' is not an http(s) URL")
        }
        guard configuration.permits(url) else {
            throw BitwardenAPIError(kind: .rejected, status: nil, message:
                "refusing plain http to \(url.host ?? text) for an attachment download; use https, or allow it explicitly (allowInsecureHTTP)",
                route: route, requestMayHaveArrived: false)
        }
        return url
    }

    /// One GET without the access token through the transport (which never follows redirects).
    func fetchUnauthorized(_ url: URL, route: String) async throws -> HTTPTransportResponse {
        let configuration = state.withLock { $0.configuration }
        let request = HTTPTransportRequest(method: "GET", url: url, headers: [
            ("Accept", "application/octet-stream, */*"),
            ("Bitwarden-Client-Version", configuration.clientVersion),
            ("Device-Type", String(configuration.deviceType)),
            ("Bitwarden-Client-Name", configuration.clientId),
        ], timeout: configuration.timeout)
        return try await send(request, route: route)
    }
}
