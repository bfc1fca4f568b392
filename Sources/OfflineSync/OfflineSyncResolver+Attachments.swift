import Foundation
import Logging
import VaultCrypto
import VaultModel

extension OfflineSyncResolver {
    // MARK: Attachments of the copies the resolver makes

    /// Where the files of a preserved version's attachments can be read on the server.
    enum AttachmentSource {
        /// The item is on the server, as this copy (its attachments' keys are wrapped by its key).
        case item(Cipher)
        /// The item with this server id is gone (404): its files went with it.
        case gone(String)

        var cipherId: String {
            switch self {
            case .item(let copy): copy.id ?? ""
            case .gone(let id): id
            }
        }
    }

    /// Copies every attachment of `preserved` (the version a backup or a re-create keeps) onto
    /// `target`, the copy just made of it: the file is downloaded (from the item it comes from
    /// when the server still has it, else from a copy this change made earlier), checked against
    /// its key, the attachment key is wrapped again for the target's key and the file name
    /// encrypted for it, and the same encrypted file is uploaded. Each upload is announced first
    /// (`attachmentPlanned`, its encrypted file name the marker) and confirmed after
    /// (`attachmentCopied`), so a retry never uploads an attachment twice. A file that is
    /// nowhere any more is recorded as `attachmentUnavailable` (named, with the reason); any
    /// other failure throws ``AttachmentCopyFailure`` and the item stays pending.
    ///
    /// Returns the target as the server holds it after the last upload (its attachments and
    /// revision), or `target` when nothing was uploaded.
    func copyAttachments(_ item: inout Item, of preserved: Cipher, from source: AttachmentSource, onto target: Cipher,
                         run: RunContext) async throws -> Cipher {
        let attachments = (preserved.attachments ?? []).filter { $0.id != nil }
        guard !attachments.isEmpty, let targetId = target.id else { return target }
        let preservedKey = try preserved.fieldKey(userKey: run.userKey)
        var latest = target
        for attachment in attachments {
            let step = AttachmentCopy(sourceCipherId: source.cipherId, sourceAttachmentId: attachment.id!, targetCipherId: targetId)
            if item.steps.contains(where: {
                ($0.type == .attachmentCopied || $0.type == .attachmentUnavailable) && $0.outcome.attachment?.sameStep(as: step) == true
            }) { continue }
            let fileName = try attachment.fileName.map { try $0.decryptString(key: preservedKey) } ?? ""
            if try await adoptPlannedAttachment(&item, step, fileName: fileName, latest: &latest, run: run) { continue }
            guard let file = try await attachmentFile(step, fileName: fileName, from: source, item: item, run: run) else {
                let why = switch source {
                case .gone: "the server deleted the item and its files with it, and no copy of the file is on this device"
                case .item: "the server's copy of the item no longer has it (deleted on another device)"
                }
                var body = OutcomeBody(at: now, reason: "attachment \"\(fileName)\" was not copied to item \(targetId): \(why)")
                body.attachment = step
                try await record(&item, .attachmentUnavailable, body, run: run)
                item.report.attachmentsNotCopied.append(fileName)
                logger.notice("attachment not copied: its file is gone", metadata: ["cipher": "\(item.id)", "target": "\(targetId)"])
                continue
            }
            let targetKey = try latest.fieldKey(userKey: run.userKey)
            let random = store.dependencies.random
            let newName = EncString.encrypt(fileName, key: targetKey, random: random)
            let newKey = targetKey.wrap(file.key, random: random)
            var planned = OutcomeBody(at: now, marker: newName.serialized, reason: "about to copy attachment \"\(fileName)\" to item \(targetId)")
            planned.attachment = step
            try await record(&item, .attachmentPlanned, planned, run: run)
            let updated: Cipher
            do {
                updated = try await server.createAttachment(cipherId: targetId, fileName: newName, key: newKey, encryptedData: file.bytes)
            } catch let interruption as any ResolutionInterruption {
                throw interruption
            } catch {
                throw AttachmentCopyFailure(fileName: fileName, attachmentId: step.sourceAttachmentId, targetCipherId: targetId,
                                            step: "upload", underlying: error)
            }
            var done = step
            done.targetAttachmentId = updated.attachments?.first { $0.fileName == newName }?.id
            var body = OutcomeBody(at: now, revisionDate: updated.revisionDate, marker: newName.serialized,
                                   reason: "attachment \"\(fileName)\" copied to item \(targetId)")
            body.attachment = done
            try await record(&item, .attachmentCopied, body, run: run)
            latest = updated
        }
        return latest
    }

    /// An upload planned by an earlier attempt whose answer was lost. Found on the target by
    /// its marker with its file, it is recorded as done (true). Found without its file (the
    /// announcement arrived, the file did not), the announcement is deleted so the copy is made
    /// again; `latest` is then the target as it is now. False when there is nothing to adopt.
    func adoptPlannedAttachment(_ item: inout Item, _ step: AttachmentCopy, fileName: String, latest: inout Cipher,
                                run: RunContext) async throws -> Bool {
        let markers = Set(item.steps.filter { $0.type == .attachmentPlanned && $0.outcome.attachment?.sameStep(as: step) == true }
            .compactMap(\.outcome.marker))
        guard !markers.isEmpty else { return false }
        func failure(_ error: any Error) -> AttachmentCopyFailure {
            AttachmentCopyFailure(fileName: fileName, attachmentId: step.sourceAttachmentId, targetCipherId: step.targetCipherId,
                                  step: "check of an earlier upload", underlying: error)
        }
        do {
            let target = try await server.getCipher(id: step.targetCipherId)
            latest = target
            guard let found = target.attachments?.first(where: { $0.fileName.map { markers.contains($0.serialized) } ?? false }),
                  let foundId = found.id, let wrapped = found.key else { return false }
            do {
                let key = try target.fieldKey(userKey: run.userKey).unwrap(wrapped)
                _ = try EncArrayBuffer(bytes: try await server.downloadAttachment(cipherId: step.targetCipherId, attachmentId: foundId))
                    .decrypt(key: key)
            } catch where error.serverErrorKind == .notFound {
                do {
                    try await server.deleteAttachment(cipherId: step.targetCipherId, attachmentId: foundId)
                } catch where error.serverErrorKind == .notFound {}
                latest = try await server.getCipher(id: step.targetCipherId)
                return false
            }
            var done = step
            done.targetAttachmentId = foundId
            var body = OutcomeBody(at: now, revisionDate: target.revisionDate, marker: found.fileName?.serialized,
                                   reason: "attachment \"\(fileName)\" copied to item \(step.targetCipherId) (an upload whose answer was lost, found on the server)")
            body.attachment = done
            try await record(&item, .attachmentCopied, body, run: run)
            return true
        } catch let interruption as any ResolutionInterruption {
            throw interruption
        } catch let error as AttachmentCopyFailure {
            throw error
        } catch {
            throw failure(error)
        }
    }

    /// The attachment's key and its encrypted file, checked against the key, from the first
    /// place that has it: the item it comes from (while the server has it), then the copies of
    /// it this change already made (a backup made earlier). Nil when no place has it any more.
    func attachmentFile(_ step: AttachmentCopy, fileName: String, from source: AttachmentSource, item: Item,
                        run: RunContext) async throws -> (key: SymmetricCryptoKey, bytes: [UInt8])? {
        var places: [(cipherId: String, attachmentId: String, copy: Cipher?)] = []
        if case .item(let copy) = source, let id = copy.id { places.append((id, step.sourceAttachmentId, copy)) }
        for done in item.steps where done.type == .attachmentCopied {
            guard let copied = done.outcome.attachment, copied.sourceAttachmentId == step.sourceAttachmentId,
                  let copiedId = copied.targetAttachmentId, copied.targetCipherId != step.targetCipherId else { continue }
            places.append((copied.targetCipherId, copiedId, nil))
        }
        for place in places {
            do {
                let holder: Cipher
                if let copy = place.copy { holder = copy } else { holder = try await server.getCipher(id: place.cipherId) }
                guard let wrapped = holder.attachment(id: place.attachmentId)?.key else { continue }
                let key = try holder.fieldKey(userKey: run.userKey).unwrap(wrapped)
                let bytes = try await server.downloadAttachment(cipherId: place.cipherId, attachmentId: place.attachmentId)
                // Checked before it is uploaded anywhere: a damaged download is never a copy.
                _ = try EncArrayBuffer(bytes: bytes).decrypt(key: key)
                return (key, bytes)
            } catch let interruption as any ResolutionInterruption {
                throw interruption
            } catch where error.serverErrorKind == .notFound {
                continue
            } catch {
                throw AttachmentCopyFailure(fileName: fileName, attachmentId: step.sourceAttachmentId, targetCipherId: step.targetCipherId,
                                            step: "download", underlying: error)
            }
        }
        return nil
    }
}
