import Crypto
import _CryptoExtras
import Foundation
import LMDB
import VaultCrypto

/// A stored event where LMDB maps it, found in a read transaction (``LogReader/mappedEvents(userId:after:limit:)``):
/// its bytes are valid only until that transaction ends, so it must not outlive the closure
/// given to ``EventLogStore/read(_:)``. Reading events this way costs no copy and no allocation
/// per event; a fold opens each where it lies.
package struct MappedEvent: @unchecked Sendable {
    /// The sequence its key (and index entry) names.
    package let sequence: UInt64
    let raw: UnsafeRawBufferPointer

    /// Starts loading the event into the cache without waiting for it (while the event before it
    /// is opened: its first reads otherwise wait for memory).
    package func prefetch() {
        if let base = raw.baseAddress { LMDB.prefetch(base, bytes: raw.count) }
    }

    /// Checks the event as a read of `userId`'s events does (its header, its key, its user, its
    /// body's framing: any of those wrong throws, as ``LogReader/envelopes(userId:after:limit:)``
    /// does), then checks its MAC and decrypts its body: that part's failure is returned, not
    /// thrown (one unreadable event quarantines its item; it does not stop a fold).
    package func open(userId: String, key: SealingKey) throws -> (header: EventHeader, plaintext: Result<[UInt8], EnvelopeError>) {
        let (header, body) = try authenticate(userId: userId, key: key)
        return (header, body.flatMap { $0.plaintext() })
    }

    /// ``open(userId:key:)`` up to the MAC: the body is then decrypted whole or only at its
    /// two ends (``AuthenticatedBody``).
    package func authenticate(userId: String, key: SealingKey) throws -> (header: EventHeader, body: Result<AuthenticatedBody, EnvelopeError>) {
        let (header, headerLength) = try Envelope.parseHeader(raw: raw, userId: userId)
        try LogReader.checkIndexed(header, sequence: sequence, userId: userId)
        try Envelope.checkBody(count: raw.count, headerLength: headerLength, sequence: sequence)
        guard Envelope.macMatches(raw: raw, headerLength: headerLength, key: key.events) else {
            return (header, .failure(.authenticationFailed(sequence: sequence)))
        }
        return (header, .success(AuthenticatedBody(raw: raw, headerLength: headerLength, cbc: key.events.cbc, sequence: sequence)))
    }
}

/// The sealed body of a ``MappedEvent`` whose MAC matched: valid, like it, only inside the read
/// transaction that found it, and only while the ``SealingKey`` it was authenticated with is
/// alive (it does not keep the key).
package struct AuthenticatedBody {
    let raw: UnsafeRawBufferPointer
    let headerLength: Int
    /// The key's AES context, not retained: the body lives only while its opener holds the
    /// key it was authenticated with. (A reference count taken and dropped per event, both
    /// cores writing the one shared count, was a tenth of a fold's profile samples; the fold ran
    /// about 3% faster without it.)
    unowned(unsafe) let cbc: KeyedAESCBC
    let sequence: UInt64

    /// The whole plaintext; ``EnvelopeError/undecryptable(sequence:)`` for malformed padding.
    package func plaintext() -> Result<[UInt8], EnvelopeError> {
        do {
            return .success(try Envelope.decryptBody(raw: raw, headerLength: headerLength, cbc: cbc, sequence: sequence))
        } catch {
            return .failure(.undecryptable(sequence: sequence))
        }
    }

    /// Decrypts only the first `headBlocks` and the last `tailBlocks` AES blocks of the body into
    /// `head` and `tail` (room for that many blocks each), checking
    /// the padding as ``plaintext()`` does (``KeyedAESCBC/decryptEnds(_:iv:headBlocks:tailBlocks:head:tail:)``):
    /// for a reader of a few fields at the ends of a long body. Gives the tail's plaintext length
    /// and the whole plaintext's; nil when the body is too short for that or the platform
    /// decrypts whole messages only (then decrypt it whole).
    ///
    /// `decryptor`: the block context to use, kept by the caller for its next body (one per
    /// thread); made from the body's key when nil or another key's.
    package func decryptEnds(headBlocks: Int, tailBlocks: Int, head: UnsafeMutableRawBufferPointer,
                             tail: UnsafeMutableRawBufferPointer,
                             decryptor: inout KeyedAESCBC.BlockDecryptor?) -> Result<(tail: Int, plaintext: Int), EnvelopeError>? {
        let ivStart = headerLength, ctStart = headerLength + Envelope.ivBytes + Envelope.macBytes
        if decryptor?.belongs(to: cbc) != true { decryptor = cbc.blockDecryptor() }
        guard let decryptor else { return nil }
        do {
            return try decryptor.decryptEnds(UnsafeRawBufferPointer(rebasing: raw[ctStart...]),
                                       iv: UnsafeRawBufferPointer(rebasing: raw[ivStart..<ivStart + Envelope.ivBytes]),
                                       headBlocks: headBlocks, tailBlocks: tailBlocks, head: head, tail: tail).map { .success($0) }
        } catch {
            return .failure(.undecryptable(sequence: sequence))
        }
    }
}
