import BitwardenAPI
import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto
import VaultModel

extension Run {
    // MARK: Attachments

    /// `anotherDeviceAttach`: another device adds an attachment to the server copy, sealed as a
    /// Bitwarden client does (a fresh attachment key wrapped by the item's key, the file name
    /// under the item's key, the file under the attachment key). Journaled before the request
    /// (a lost answer may still have applied it), marked `applied` once the server answered.
    func anotherDeviceAttach(_ step: ScenarioStep, index: Int) async throws {
        let ref = try self.ref(step, index)
        guard let attachment = step.attachment else {
            throw ReplayError.badStep(index: index, reason: "'anotherDeviceAttach' needs 'attachment' ({\"fileName\": …, \"contents\": …})")
        }
        let (user, id) = try currentId(ref, step: index)
        let current = try await user.onOtherDevice { try await $0.getCipher(id: id) }
        let sealed = SealedAttachment.seal(fileName: attachment.fileName, contents: Array(attachment.contents.utf8),
                                           itemKey: try current.fieldKey(userKey: user.userKey), random: random(UInt64(index) &+ 7000))
        var entry = ScenarioJournalEntry(step: index, ref: ref, action: .anotherDeviceAttach,
                                         content: content(try current.decrypt(userKey: user.userKey)), offline: false,
                                         pendingBefore: isPending(ref), user: user.ref)
        entry.attachment = attachment
        if current.deletedDate != nil { entry.sawTrashed = true }
        journal.append(entry)
        let position = journal.count - 1
        let answer = try await user.onOtherDevice {
            try await $0.createAttachment(cipherId: id, fileName: sealed.fileName, key: sealed.wrappedKey, encryptedData: sealed.encryptedData)
        }
        journal[position].applied = true
        journal[position].attachedRevision = answer.revisionDate
    }

    /// The attachments of a server item, decrypted: each file name with the contents of its
    /// file, downloaded by another device's client and opened with the attachment's key (nil
    /// when the item has none). A file that cannot be read shows as its error, so a mismatch
    /// says what is wrong.
    func serverAttachments(of cipher: Cipher, user: User) async throws -> [ScenarioAttachment]? {
        guard let attachments = cipher.attachments, !attachments.isEmpty, let id = cipher.id else { return nil }
        let itemKey = try cipher.fieldKey(userKey: user.userKey)
        var files: [ScenarioAttachment] = []
        for attachment in attachments {
            let name = (try? attachment.fileName?.decryptString(key: itemKey)) ?? "<file name unreadable>"
            let contents: String
            do {
                guard let attachmentId = attachment.id, let key = attachment.key else { throw ReplayError.badStep(index: -1, reason: "no id or key") }
                let bytes = try await user.onOtherDevice { try await $0.downloadAttachment(cipherId: id, attachmentId: attachmentId) }
                contents = String(decoding: try SealedAttachment.open(encryptedData: bytes, wrappedKey: key, itemKey: itemKey), as: UTF8.self)
            } catch {
                contents = "<unreadable: \(error)>"
            }
            files.append(ScenarioAttachment(fileName: name, contents: contents))
        }
        return files.sorted()
    }
}
