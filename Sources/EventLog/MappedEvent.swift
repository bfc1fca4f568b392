import Crypto
import _CryptoExtras
import Foundation
import LMDB
import VaultCrypto

/// A stored event where LMDB maps it, found in a read transaction (``LogReader/mappedEvents(userId:after:limit:)``):
/// its bytes are valid only until that transaction ends. Internal to EventLog: the domain reads
/// events in place only through ``LogReader/mapEventsInPlace(userId:after:limit:key:parallelThreshold:_:)``,
/// which lends each one to a closure (as ``EventInPlace``) inside the transaction and keeps what
/// the closure returns, owned values. Reading events this way costs no copy and no allocation
/// per event; a fold opens each where it lies.
struct MappedEvent: @unchecked Sendable {
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

    /// ``open(userId:key:)`` up to the event MAC: the body is then decrypted whole or only at
    /// its two ends (``AuthenticatedBody``, which checks format 3's body MAC when a read goes
    /// beyond the ends the event MAC covers).
    package func authenticate(userId: String, key: SealingKey) throws -> (header: EventHeader, body: Result<AuthenticatedBody, EnvelopeError>) {
        let (header, _, body) = try authenticateWithMAC(userId: userId, key: key)
        return (header, body)
    }

    /// ``authenticate(userId:key:)`` with the stored MAC, the value the user's next event chains onto.
    /// `knownIds`: cipher ids the header may reuse (``KnownIds``).
    func authenticateWithMAC(userId: String, key: SealingKey, knownIds: KnownIds? = nil) throws
        -> (header: EventHeader, mac: ChainMAC, body: Result<AuthenticatedBody, EnvelopeError>) {
        let (header, headerLength) = try Envelope.parseHeader(raw: raw, userId: userId, knownIds: knownIds)
        try LogReader.checkIndexed(header, sequence: sequence, userId: userId)
        try Envelope.checkBody(count: raw.count, headerLength: headerLength, version: header.formatVersion, sequence: sequence)
        let mac = Envelope.storedMAC(raw: raw, headerLength: headerLength)
        guard Envelope.eventMACMatches(raw: raw, headerLength: headerLength, version: header.formatVersion, key: key) else {
            return (header, mac, .failure(.authenticationFailed(sequence: sequence)))
        }
        return (header, mac, .success(AuthenticatedBody(raw: raw, headerLength: headerLength, version: header.formatVersion,
                                                        key: key, sequence: sequence)))
    }
}

/// The sealed body of a ``MappedEvent`` whose (event) MAC matched: valid, like it, only inside
/// the read transaction that found it, and only while the ``SealingKey`` it was authenticated
/// with is alive (it does not keep the key). In format 3 the event MAC covers only the
/// ciphertext's two ends: a read of anything else checks the body MAC first.
struct AuthenticatedBody {
    let raw: UnsafeRawBufferPointer
    let headerLength: Int
    let version: UInt8
    /// The key's AES context, not retained: the body lives only while its opener holds the
    /// key it was authenticated with. (A reference count taken and dropped per event, both
    /// cores writing the one shared count, was a tenth of a fold's profile samples; the fold ran
    /// about 3% faster without it.) Unmanaged rather than `unowned(unsafe)`: passing an unowned
    /// reference to a call retains it for the call.
    let cbc: Unmanaged<KeyedAESCBC>
    /// The body-MAC key (format 3), not retained either.
    let bodies: Unmanaged<SealingKey.SubKey>
    let sequence: UInt64

    init(raw: UnsafeRawBufferPointer, headerLength: Int, version: UInt8, key: SealingKey, sequence: UInt64) {
        self.raw = raw
        self.headerLength = headerLength
        self.version = version
        self.cbc = Unmanaged.passUnretained(key.events.cbc)
        self.bodies = Unmanaged.passUnretained(key.bodies)
        self.sequence = sequence
    }

    /// Whether a read of the ciphertext beyond the covered ends is authenticated: always up to
    /// format 2 (one MAC over everything, already checked), from format 3 when the event MAC
    /// covers the whole ciphertext or the body MAC matches.
    private func wholeBodyAuthenticated() -> Bool {
        guard version >= Envelope.bodyMACFormatVersion else { return true }
        let count = raw.count - Envelope.ciphertextStart(headerLength: headerLength, version: version)
        return Envelope.eventMACCoversWhole(ciphertextCount: count)
            || Envelope.bodyMACMatches(raw: raw, headerLength: headerLength, key: bodies.takeUnretainedValue())
    }

    /// The whole plaintext (format 3's body MAC checked first);
    /// ``EnvelopeError/authenticationFailed(sequence:)`` when it does not match,
    /// ``EnvelopeError/undecryptable(sequence:)`` for malformed padding.
    package func plaintext() -> Result<[UInt8], EnvelopeError> {
        guard wholeBodyAuthenticated() else { return .failure(.authenticationFailed(sequence: sequence)) }
        do {
            return .success(try Envelope.decryptBody(raw: raw, headerLength: headerLength, version: version,
                                                     cbc: cbc.takeUnretainedValue(), sequence: sequence))
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
        let ivStart = headerLength, ctStart = Envelope.ciphertextStart(headerLength: headerLength, version: version)
        if decryptor?.belongs(toUnretained: cbc) != true { decryptor = cbc.takeUnretainedValue().blockDecryptor() }
        guard let decryptor else { return nil }
        // Ends wider than the event MAC covers (no reader asks for those today) need the body MAC.
        if !Envelope.eventMACCovers(headBlocks: headBlocks, tailBlocks: tailBlocks), !wholeBodyAuthenticated() {
            return .failure(.authenticationFailed(sequence: sequence))
        }
        do {
            return try decryptor.decryptEnds(UnsafeRawBufferPointer(rebasing: raw[ctStart...]),
                                       iv: UnsafeRawBufferPointer(rebasing: raw[ivStart..<ivStart + Envelope.ivBytes]),
                                       headBlocks: headBlocks, tailBlocks: tailBlocks, head: head, tail: tail).map { .success($0) }
        } catch {
            return .failure(.undecryptable(sequence: sequence))
        }
    }
}

/// One event lent by ``LogReader/mapEventsInPlace(userId:after:limit:key:parallelThreshold:_:)``
/// to its closure, where LMDB maps it: its header and its body, already authenticated. It is
/// not copyable and is only borrowed, so it cannot leave the closure (nor, with it, a view of
/// the map or of the key's context); every read of it returns owned values or lends bytes to
/// a closure of its own.
package struct EventInPlace: ~Copyable {
    /// The sequence its key (and index entry) names.
    package let sequence: UInt64
    /// Its header, checked as ``LogReader/envelopes(userId:after:limit:)`` checks it (its
    /// framing, its key, its user), or what such a read throws: the stored bytes are not the
    /// event the index names.
    package let header: Result<EventHeader, any Error>
    /// Its stored MAC, the value the user's next event names as its previous (nil when the
    /// header is not readable).
    package let chainValue: ChainMAC?
    /// The authenticated body, or why not (nil when the header is not readable).
    private let body: Result<AuthenticatedBody, EnvelopeError>?

    init(_ mapped: MappedEvent, userId: String, key: SealingKey, knownIds: KnownIds?) {
        sequence = mapped.sequence
        do {
            let (header, mac, body) = try mapped.authenticateWithMAC(userId: userId, key: key, knownIds: knownIds)
            self.header = .success(header)
            chainValue = mac
            self.body = body
        } catch {
            header = .failure(error)
            chainValue = nil
            body = nil
        }
    }

    /// Whether the body's MAC matched (false also when the header is not readable).
    package var isAuthenticated: Bool {
        if case .success? = body { return true }
        return false
    }

    /// The body's whole plaintext, or why it cannot be read (its MAC did not match, its
    /// padding is malformed, or the header is not readable).
    package func plaintext() -> Result<[UInt8], any Error> {
        switch body {
        case .success(let body): body.plaintext().mapError { $0 }
        case .failure(let error): .failure(error)
        case nil: .failure(header.failure ?? EnvelopeError.malformed(sequence: sequence, reason: "no header"))
        }
    }

    /// Decrypts only the first `headBlocks` and the last `tailBlocks` AES blocks of the body
    /// (the event MAC, which covers them, has matched) and lends them to `read` with the plaintext's
    /// whole length, for a reader of a few fields at the ends of a long body. Nil when the body
    /// is too short for that or the platform decrypts whole messages only (read it whole);
    /// throws why the body cannot be read.
    ///
    /// `decryptor`: the block context to use, kept by the caller for its next event (one per
    /// thread, as the closure of ``LogReader/mapEventsInPlace(userId:after:limit:key:parallelThreshold:_:)`` gets).
    package func withDecryptedEnds<R>(headBlocks: Int, tailBlocks: Int, decryptor: inout KeyedAESCBC.BlockDecryptor?,
                                      _ read: (_ head: UnsafeRawBufferPointer, _ tail: UnsafeRawBufferPointer, _ count: Int) -> R?) throws -> R? {
        var result: R?
        _ = try readDecryptedEnds(headBlocks: headBlocks, tailBlocks: tailBlocks, decryptor: &decryptor) { result = read($0, $1, $2) }
        return result
    }

    /// ``withDecryptedEnds(headBlocks:tailBlocks:decryptor:_:)`` without a result type: the
    /// form the fold calls for every operation. Not generic, so nothing is looked up at run
    /// time per event (the generic form, called from another module, instantiated the
    /// temporary buffers' result type's metadata for every call: 2% of a fold). False when the
    /// body is too short for its ends to be read alone (`read` is not called).
    package func readDecryptedEnds(headBlocks: Int, tailBlocks: Int, decryptor: inout KeyedAESCBC.BlockDecryptor?,
                                   _ read: (_ head: UnsafeRawBufferPointer, _ tail: UnsafeRawBufferPointer, _ count: Int) -> Void) throws -> Bool {
        let authenticated: AuthenticatedBody
        switch body {
        case .success(let body): authenticated = body
        case .failure(let error): throw error
        case nil: throw header.failure ?? EnvelopeError.malformed(sequence: sequence, reason: "no header")
        }
        return try withUnsafeTemporaryAllocation(byteCount: headBlocks * 16, alignment: 16) { head -> Bool in
            try withUnsafeTemporaryAllocation(byteCount: tailBlocks * 16, alignment: 16) { tail -> Bool in
                guard let (tailCount, count) = try authenticated.decryptEnds(headBlocks: headBlocks, tailBlocks: tailBlocks, head: head,
                                                                             tail: tail, decryptor: &decryptor)?.get() else {
                    return false
                }
                read(UnsafeRawBufferPointer(head), UnsafeRawBufferPointer(rebasing: tail[..<tailCount]), count)
                return true
            }
        }
    }
}

extension Result {
    /// The error, or nil on success.
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

extension LogReader {
    /// Reads the user's next events after `after` (at most `limit`) where LMDB maps them, inside
    /// this read transaction, and lends each to `transform` as an ``EventInPlace`` (its header
    /// checked, its MAC verified): what `transform` returns, in sequence order, is all that
    /// leaves the call, so no view into the map outlives it. Batches of `parallelThreshold`
    /// events or more are spread over the cores; each thread keeps one block decryptor for its
    /// events (`transform`'s inout argument). The next event is prefetched while one is opened.
    /// `knownIds`: cipher ids the headers reuse instead of making their own strings (a fold
    /// passes its previous batch's).
    ///
    /// ```swift
    /// let sizes = try store.read { reader in
    ///     try reader.mapEventsInPlace(userId: user, after: 0, limit: 100, key: key, parallelThreshold: 256) { event, _ in
    ///         (try? event.plaintext().get())?.count
    ///     }
    /// }
    /// ```
    package func mapEventsInPlace<T: Sendable>(userId: String, after: UInt64, limit: Int, key: SealingKey, parallelThreshold: Int,
                                               knownIds: KnownIds? = nil,
                                               _ transform: @Sendable (borrowing EventInPlace, inout KeyedAESCBC.BlockDecryptor?) -> T) throws -> [T] {
        let mapped = try mappedEvents(userId: userId, after: after, limit: limit)
        return parallelMap(count: mapped.count, threshold: parallelThreshold, state: { KeyedAESCBC.BlockDecryptor?.none }) { i, decryptor in
            // The next event loads while this one's MAC is computed.
            if i + 1 < mapped.count { mapped[i + 1].prefetch() }
            return transform(EventInPlace(mapped[i], userId: userId, key: key, knownIds: knownIds), &decryptor)
        }
    }
}
