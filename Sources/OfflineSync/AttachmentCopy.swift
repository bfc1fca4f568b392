import Foundation
import VaultCrypto
import VaultModel

/// One attachment the resolver copies onto a copy of an item it made (a conflict backup, a
/// re-created item), as the bodies of `attachmentPlanned`, `attachmentCopied` and
/// `attachmentUnavailable` record it. The source ids and the target id together name one copy
/// step: a retry never uploads the same attachment to the same copy twice.
public struct AttachmentCopy: Codable, Sendable, Equatable {
    /// The server id of the item whose version holds the attachment.
    public var sourceCipherId: String
    /// The attachment's id on that item.
    public var sourceAttachmentId: String
    /// The server id of the copy the attachment goes to (the backup, the re-created item).
    public var targetCipherId: String
    /// The copy's new attachment id (attachmentCopied).
    public var targetAttachmentId: String?

    /// A copy step of attachment `sourceAttachmentId` of item `sourceCipherId` onto `targetCipherId`.
    public init(sourceCipherId: String, sourceAttachmentId: String, targetCipherId: String, targetAttachmentId: String? = nil) {
        self.sourceCipherId = sourceCipherId
        self.sourceAttachmentId = sourceAttachmentId
        self.targetCipherId = targetCipherId
        self.targetAttachmentId = targetAttachmentId
    }

    /// Whether `other` is the same step (same attachment, same copy), whatever its outcome.
    func sameStep(as other: AttachmentCopy) -> Bool {
        sourceCipherId == other.sourceCipherId && sourceAttachmentId == other.sourceAttachmentId
            && targetCipherId == other.targetCipherId
    }
}

/// An attachment the resolver could not copy now (its download or its upload failed): the item
/// stays pending with this error as its `resolutionFailed` reason, and the copy is retried. The
/// classification is the underlying failure's, so a server out of reach is not counted as an
/// attempt and a refusal is.
public struct AttachmentCopyFailure: ClassifiedServerError, CustomStringConvertible {
    /// The attachment's file name (decrypted; kept in the log's sealed bodies only).
    public let fileName: String
    /// The attachment's id on the item it comes from.
    public let attachmentId: String
    /// The server id of the copy it was going to.
    public let targetCipherId: String
    /// What failed: `download` or `upload`.
    public let step: String
    /// The failure underneath.
    public let underlying: any Error

    /// The underlying failure's kind.
    public var serverErrorKind: ServerErrorKind { underlying.serverErrorKind }
    /// The underlying failure's answer to whether the request may have arrived.
    public var requestMayHaveArrived: Bool { underlying.requestMayHaveArrived }
    /// Whether the server answered: as the underlying failure (so an unreachable server is not an attempt).
    public var serverAnswered: Bool { underlying.countsAsAttempt }

    /// E.g. `attachment "scan.pdf" (id abc) could not be copied to item 123 (upload failed: …); …`.
    public var description: String {
        "attachment \"\(fileName)\" (id \(attachmentId)) could not be copied to item \(targetCipherId) (\(step) failed: \(underlying)); "
            + "the item stays pending and the copy is retried"
    }
}

extension UnreachableServer {
    /// Always throws a ``ServerFailure`` of kind ``ServerErrorKind/unavailable`` that was never sent.
    public func downloadAttachment(cipherId: String, attachmentId: String) async throws -> [UInt8] {
        throw ServerFailure(.unavailable, "the server is not reachable (offline mode)", mayHaveArrived: false)
    }

    /// Always throws a ``ServerFailure`` of kind ``ServerErrorKind/unavailable`` that was never sent.
    public func createAttachment(cipherId: String, fileName: EncString, key: EncString, encryptedData: [UInt8]) async throws -> Cipher {
        throw ServerFailure(.unavailable, "the server is not reachable (offline mode)", mayHaveArrived: false)
    }

    /// Always throws a ``ServerFailure`` of kind ``ServerErrorKind/unavailable`` that was never sent.
    public func deleteAttachment(cipherId: String, attachmentId: String) async throws {
        throw ServerFailure(.unavailable, "the server is not reachable (offline mode)", mayHaveArrived: false)
    }
}
