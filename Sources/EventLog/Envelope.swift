import Crypto
import _CryptoExtras
import Foundation
import LMDB
import VaultCrypto

/// The plaintext part of an envelope: what can be read without a key. It is
/// covered by the body's MAC, so it cannot be altered or moved onto another body.
public struct EventHeader: Sendable, Hashable, Codable {
    /// Envelope format version (``Envelope/currentFormatVersion`` for new events).
    public var formatVersion: UInt8
    /// Global sequence number (also the LMDB key).
    public var sequence: UInt64
    /// The vault user the event belongs to; its key seals the body.
    public var userId: String
    /// The vault item the event is about; empty for user-level events (e.g. a sync abort).
    public var cipherId: String
    /// The domain's event type code (EventLog does not interpret it).
    public var eventType: UInt16
    /// When the event was recorded, in milliseconds since 1970 (UTC).
    public var recordedAtMillis: Int64
    /// Format 2 and later: the MAC of the same user's previous event (32 zero bytes for the
    /// user's first event), so each user's events form a chain and a deleted, reordered or
    /// missing event is detected. Nil in format 1. Covered by this event's MAC like every field.
    public var previousMAC: [UInt8]? {
        get { chainMAC?.bytes }
        set { chainMAC = newValue.map(ChainMAC.init) }
    }

    /// ``previousMAC`` as stored: 32 bytes inline, so parsing a header allocates no array for it
    /// (a fold reads a million headers).
    var chainMAC: ChainMAC?

    /// A header; `previousMAC` is filled in by the log when it seals a format 2 event.
    public init(formatVersion: UInt8 = Envelope.currentFormatVersion, sequence: UInt64, userId: String,
                cipherId: String, eventType: UInt16, recordedAtMillis: Int64, previousMAC: [UInt8]? = nil) {
        self.init(formatVersion: formatVersion, sequence: sequence, userId: userId, cipherId: cipherId,
                  eventType: eventType, recordedAtMillis: recordedAtMillis, chainMAC: previousMAC.map(ChainMAC.init))
    }

    init(formatVersion: UInt8, sequence: UInt64, userId: String, cipherId: String, eventType: UInt16,
         recordedAtMillis: Int64, chainMAC: ChainMAC?) {
        self.formatVersion = formatVersion
        self.sequence = sequence
        self.userId = userId
        self.cipherId = cipherId
        self.eventType = eventType
        self.recordedAtMillis = recordedAtMillis
        self.chainMAC = chainMAC
    }

    /// `recordedAtMillis` as a `Date`.
    public var recordedAt: Date { Date(timeIntervalSince1970: Double(recordedAtMillis) / 1000) }

    // Coded as before the inline storage: `previousMAC` as an array of bytes.
    private enum CodingKeys: String, CodingKey {
        case formatVersion, sequence, userId, cipherId, eventType, recordedAtMillis, previousMAC
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(formatVersion: try c.decode(UInt8.self, forKey: .formatVersion), sequence: try c.decode(UInt64.self, forKey: .sequence),
                  userId: try c.decode(String.self, forKey: .userId), cipherId: try c.decode(String.self, forKey: .cipherId),
                  eventType: try c.decode(UInt16.self, forKey: .eventType), recordedAtMillis: try c.decode(Int64.self, forKey: .recordedAtMillis),
                  previousMAC: try c.decodeIfPresent([UInt8].self, forKey: .previousMAC))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(formatVersion, forKey: .formatVersion)
        try c.encode(sequence, forKey: .sequence)
        try c.encode(userId, forKey: .userId)
        try c.encode(cipherId, forKey: .cipherId)
        try c.encode(eventType, forKey: .eventType)
        try c.encode(recordedAtMillis, forKey: .recordedAtMillis)
        try c.encodeIfPresent(previousMAC, forKey: .previousMAC)
    }
}

/// A header's previous MAC: 32 bytes held inline (every stored one), or any other length as
/// given (a caller's mistake that sealing refuses), so `previousMAC` reads back what was set.
enum ChainMAC: Sendable, Hashable {
    case inline(UInt64, UInt64, UInt64, UInt64)
    case other([UInt8])

    init(_ bytes: [UInt8]) {
        if bytes.count == 32 {
            self = bytes.withUnsafeBytes { ChainMAC(raw: $0) }
        } else {
            self = .other(bytes)
        }
    }

    /// The first 32 bytes of `raw` (at least 32).
    init(raw: UnsafeRawBufferPointer) {
        self = .inline(raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self), raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                       raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self), raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
    }

    var count: Int {
        switch self {
        case .inline: return 32
        case .other(let bytes): return bytes.count
        }
    }

    var bytes: [UInt8] {
        switch self {
        case .inline(let a, let b, let c, let d):
            return withUnsafeBytes(of: (a, b, c, d)) { Array($0) }
        case .other(let bytes):
            return bytes
        }
    }

    /// Writes the 32 bytes to the start of `out` (an inline MAC only; the length was checked).
    func write(to out: UnsafeMutableRawBufferPointer) {
        guard case .inline(let a, let b, let c, let d) = self else { preconditionFailure("previous MAC of \(count) bytes") }
        withUnsafeBytes(of: (a, b, c, d)) { out.copyMemory(from: $0) }
    }
}

/// Why stored bytes are not a readable envelope or event.
public enum EnvelopeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bytes do not parse as an envelope.
    case malformed(sequence: UInt64?, reason: String)
    /// The envelope was written by a newer VaultLog.
    case unsupportedVersion(sequence: UInt64, version: UInt8)
    /// The MAC did not verify: wrong key, or the header or body was altered.
    case authenticationFailed(sequence: UInt64)
    /// The body decrypted but is not valid (padding).
    case undecryptable(sequence: UInt64)
    /// A user id or cipher id longer than the header allows.
    case idTooLong(String)
    /// A valid envelope stored under a key other than its own sequence (copied or moved
    /// within the file): its MAC binds it to `headerSequence`, so it is not event `key`.
    case keyMismatch(key: UInt64, headerSequence: UInt64)

    /// What is wrong, with the event's sequence when known, and usually what to do next
    /// (e.g. run `vaultlog verify`).
    public var description: String {
        switch self {
        case .malformed(let seq, let reason):
            return "event \(seq.map(String.init) ?? "?"): malformed envelope (\(reason)); the store may be corrupt: run 'vaultlog verify' for a full report"
        case .unsupportedVersion(let seq, let version):
            return "event \(seq): envelope format v\(version) is newer than this build reads (up to v\(Envelope.currentFormatVersion)); upgrade VaultLog"
        case .authenticationFailed(let seq):
            return "event \(seq) failed authentication (wrong key or tampered file); run 'vaultlog verify' for a full report"
        case .undecryptable(let seq):
            return "event \(seq): body does not decrypt (wrong key or tampered file); run 'vaultlog verify' for a full report"
        case .idTooLong(let id):
            return "id too long for an envelope header (max \(Envelope.maxIdLength) UTF-8 bytes): \(id.prefix(40))…"
        case .keyMismatch(let key, let headerSequence):
            return "the record stored under key \(key) is event \(headerSequence) (an envelope copied or moved within the file); the store is damaged: run 'vaultlog verify' for a full report and restore it from a backup"
        }
    }
}

/// The keys that seal one user's envelopes, derived from the user's Bitwarden user key with
/// HKDF-Expand under VaultLog's own info strings, so they never equal a key Bitwarden uses.
public struct SealingKey: Sendable, CustomStringConvertible {
    /// Key for event bodies.
    var events: SubKey { storage.events }
    /// Key for projection checkpoints.
    var checkpoints: SubKey { storage.checkpoints }
    /// Key for the head records (each user's last sequence and chain value; MAC only).
    var heads: SubKey { storage.heads }
    /// Key for compaction snapshots and their per-item records.
    var snapshots: SubKey { storage.snapshots }

    /// The four keys behind one reference: a `SealingKey` is passed to every event's sealing
    /// and opening, and copying four keys with their HMAC states (about a kilobyte, eight
    /// references) was 4% of a fold's time.
    private final class Storage: Sendable {
        let events: SubKey, checkpoints: SubKey, heads: SubKey, snapshots: SubKey

        init(_ userKey: SymmetricCryptoKey) {
            events = SubKey(userKey.derive(info: SealingKey.eventInfo))
            checkpoints = SubKey(userKey.derive(info: SealingKey.checkpointInfo))
            heads = SubKey(userKey.derive(info: SealingKey.headInfo))
            snapshots = SubKey(userKey.derive(info: SealingKey.snapshotInfo))
        }
    }
    private let storage: Storage

    /// HKDF info for event-body keys (part of the format; never change it).
    public static let eventInfo = "vaultlog.envelope.v1"
    /// HKDF info for checkpoint keys (part of the format; never change it).
    public static let checkpointInfo = "vaultlog.checkpoint.v1"
    /// HKDF info for head-record keys (part of the format; never change it).
    public static let headInfo = "vaultlog.head.v1"
    /// HKDF info for compaction-snapshot keys (part of the format; never change it).
    public static let snapshotInfo = "vaultlog.snapshot.v1"

    /// Derives the sealing keys from a user key.
    public init(userKey: SymmetricCryptoKey) {
        storage = Storage(userKey)
    }

    /// Always `"SealingKey(<redacted>)"`, so the keys never reach a log.
    public var description: String { "SealingKey(<redacted>)" }

    /// One derived key plus an HMAC already keyed with its MAC half (copying the keyed state
    /// saves the two SHA-256 blocks of HMAC key setup on every event) and AES-CBC with its key
    /// schedule done once (``KeyedAESCBC``). A class: reading `key.events` for every event
    /// copied the struct (HMAC states, key and all) and retained each of its references.
    final class SubKey: Sendable {
        let key: SymmetricCryptoKey
        let hmac: KeyedHMACSHA256
        let cbc: KeyedAESCBC

        init(_ key: SymmetricCryptoKey) {
            self.key = key
            self.hmac = KeyedHMACSHA256(key: key.macKey)
            self.cbc = KeyedAESCBC(key: key.encryptionKey)
        }
    }
}

/// A stored event: plaintext header + sealed body (AES-256-CBC + HMAC-SHA256, encrypt-then-MAC,
/// the MAC covering header ‖ IV ‖ ciphertext). Byte layout in `Docs/EventFormat.md`:
///
/// ```
/// [version u8][headerLength u8][sequence u64 BE][recordedAt i64 BE ms][eventType u16 BE]
/// [userIdLength u8][userId][cipherIdLength u8][cipherId]([previousMAC 32] from v2)  |  [iv 16][mac 32][ciphertext 16·n]
/// ```
public struct Envelope: Sendable {
    /// The version new envelopes are written with (2: the header carries the previous MAC of
    /// the user's chain). Version 1 envelopes are still read and imported unchanged.
    public static let currentFormatVersion: UInt8 = 2
    /// The first version whose header carries ``EventHeader/previousMAC``.
    public static let chainedFormatVersion: UInt8 = 2
    /// The chain value before a user's first event.
    public static let chainStart = [UInt8](repeating: 0, count: 32)
    /// Longest user or cipher id (UTF-8 bytes) a header holds.
    public static let maxIdLength = 100
    static let fixedHeaderBytes = 1 + 1 + 8 + 8 + 2
    static let ivBytes = 16
    static let macBytes = 32

    /// The parsed header.
    public let header: EventHeader
    /// The complete stored bytes.
    public let bytes: [UInt8]
    /// Where the sealed body starts in `bytes`.
    let headerLength: Int

    /// Parses stored bytes. Never traps on garbage: anything unexpected throws
    /// ``EnvelopeError/malformed(sequence:reason:)``.
    public init(bytes: [UInt8]) throws {
        try self.init(bytes: bytes, userId: nil)
    }

    /// ``init(bytes:)`` for an event expected to be `userId`'s: its header then holds that
    /// string instead of a new one with the same characters (a reader of one user's events saves
    /// an allocation per event).
    init(bytes: [UInt8], userId expected: String?) throws {
        let parsed = try bytes.withUnsafeBytes { try Self.parseHeader(raw: $0, userId: expected) }
        self.header = parsed.header
        self.headerLength = parsed.length
        self.bytes = bytes
        try Self.checkBody(count: bytes.count, headerLength: headerLength, sequence: header.sequence)
    }

    /// A sealed body is an IV, a MAC and whole AES blocks.
    static func checkBody(count: Int, headerLength: Int, sequence: UInt64) throws {
        let bodyLength = count - headerLength
        guard bodyLength >= ivBytes + macBytes + 16, (bodyLength - ivBytes - macBytes) % 16 == 0 else {
            throw EnvelopeError.malformed(sequence: sequence, reason: "sealed body of \(bodyLength) bytes is not IV + MAC + whole AES blocks")
        }
    }

    /// Parses only the header (no key needed), tolerating any body.
    public static func parseHeader(_ bytes: [UInt8]) throws -> (header: EventHeader, length: Int) {
        try bytes.withUnsafeBytes { try parseHeader(raw: $0) }
    }

    /// Parses only the header from raw bytes.
    public static func parseHeader(raw b: UnsafeRawBufferPointer) throws -> (header: EventHeader, length: Int) {
        try parseHeader(raw: b, userId: nil)
    }

    /// ``parseHeader(raw:)``; a user id equal to `expected` is returned as that string.
    static func parseHeader(raw b: UnsafeRawBufferPointer, userId expected: String?) throws -> (header: EventHeader, length: Int) {
        guard b.count >= fixedHeaderBytes + 2 else {
            throw EnvelopeError.malformed(sequence: nil, reason: "only \(b.count) bytes")
        }
        let sequence = readBE(b, at: 2, as: UInt64.self)
        let version = b[0]
        guard version >= 1 else { throw EnvelopeError.malformed(sequence: sequence, reason: "format version 0") }
        guard version <= currentFormatVersion else {
            throw EnvelopeError.unsupportedVersion(sequence: sequence, version: version)
        }
        let headerLength = Int(b[1])
        guard headerLength >= fixedHeaderBytes + 2, headerLength <= b.count else {
            throw EnvelopeError.malformed(sequence: sequence, reason: "header length \(headerLength) out of range")
        }
        let recordedAt = Int64(bitPattern: readBE(b, at: 10, as: UInt64.self))
        let eventType = readBE(b, at: 18, as: UInt16.self)
        var offset = fixedHeaderBytes
        func readId(_ what: String, expected: String? = nil) throws -> String {
            guard offset < headerLength else { throw EnvelopeError.malformed(sequence: sequence, reason: "\(what) length missing") }
            let length = Int(b[offset])
            offset += 1
            guard length <= maxIdLength, offset + length <= headerLength else {
                throw EnvelopeError.malformed(sequence: sequence, reason: "\(what) of \(length) bytes overruns the header")
            }
            let bytes = UnsafeRawBufferPointer(rebasing: b[offset..<offset + length])
            if let expected, expected.utf8.count == length,
               length > 0, expected.utf8.withContiguousStorageIfAvailable({ memcmp($0.baseAddress!, bytes.baseAddress!, length) == 0 }) == true {
                offset += length
                return expected
            }
            guard let id = utf8String(bytes) else {
                throw EnvelopeError.malformed(sequence: sequence, reason: "\(what) is not UTF-8")
            }
            offset += length
            return id
        }
        let userId = try readId("user id", expected: expected)
        let cipherId = try readId("cipher id")
        var previousMAC: ChainMAC?
        if version >= chainedFormatVersion {
            guard headerLength - offset >= macBytes else {
                throw EnvelopeError.malformed(sequence: sequence, reason: "header of format v\(version) has no room for the previous event's MAC")
            }
            previousMAC = ChainMAC(raw: UnsafeRawBufferPointer(rebasing: b[offset..<offset + macBytes]))
            offset += macBytes
        }
        guard offset == headerLength else {
            throw EnvelopeError.malformed(sequence: sequence, reason: "header length \(headerLength) does not match its fields (\(offset))")
        }
        let header = EventHeader(formatVersion: version, sequence: sequence, userId: userId, cipherId: cipherId,
                                 eventType: eventType, recordedAtMillis: recordedAt, chainMAC: previousMAC)
        return (header, headerLength)
    }

    /// The user id and cipher id bytes of a stored header, without copying them (valid while
    /// `b` is); nil when the header's framing is broken (``parseHeader(raw:)`` says how).
    static func headerIds(raw b: UnsafeRawBufferPointer) -> (user: UnsafeRawBufferPointer, cipher: UnsafeRawBufferPointer)? {
        guard b.count >= fixedHeaderBytes + 2, (1...currentFormatVersion).contains(b[0]) else { return nil }
        let headerLength = Int(b[1])
        guard headerLength >= fixedHeaderBytes + 2, headerLength <= b.count else { return nil }
        let userLength = Int(b[fixedHeaderBytes]), userStart = fixedHeaderBytes + 1
        guard userStart + userLength < headerLength else { return nil }
        let cipherLength = Int(b[userStart + userLength]), cipherStart = userStart + userLength + 1
        guard userLength <= maxIdLength, cipherLength <= maxIdLength, cipherStart + cipherLength <= headerLength else { return nil }
        return (UnsafeRawBufferPointer(rebasing: b[userStart..<userStart + userLength]),
                UnsafeRawBufferPointer(rebasing: b[cipherStart..<cipherStart + cipherLength]))
    }

    /// `bytes` as a string, nil if they are not UTF-8. Ids are nearly always ASCII: those skip
    /// `String(validating:)`, which is generic over the collection and looked up type metadata
    /// on every call (about 2% of a fold).
    @inline(__always)
    static func utf8String(_ bytes: UnsafeRawBufferPointer) -> String? {
        let units = bytes.assumingMemoryBound(to: UInt8.self)
        var any: UInt8 = 0
        for byte in units { any |= byte }
        if any < 0x80 { return String(decoding: units, as: UTF8.self) }
        return String(validating: units, as: UTF8.self)
    }

    /// Serialises a header.
    static func encodeHeader(_ header: EventHeader) throws -> [UInt8] {
        let length = try headerLength(header)
        return [UInt8](unsafeUninitializedCapacity: length) { buffer, count in
            writeHeader(header, length: length, to: UnsafeMutableRawBufferPointer(buffer))
            count = length
        }
    }

    /// The serialised length of `header`; throws for what `writeHeader` cannot store (an id over
    /// ``maxIdLength`` bytes, a previous MAC of the wrong size).
    static func headerLength(_ header: EventHeader) throws -> Int {
        let userCount = header.userId.utf8.count
        let cipherCount = header.cipherId.utf8.count
        guard userCount <= maxIdLength else { throw EnvelopeError.idTooLong(header.userId) }
        guard cipherCount <= maxIdLength else { throw EnvelopeError.idTooLong(header.cipherId) }
        let chained = header.formatVersion >= chainedFormatVersion
        if chained, let previous = header.chainMAC, previous.count != macBytes {
            throw EnvelopeError.malformed(sequence: header.sequence, reason: "previous MAC of \(previous.count) bytes (expected \(macBytes))")
        }
        return fixedHeaderBytes + 2 + userCount + cipherCount + (chained ? macBytes : 0)
    }

    /// Writes `header` (of `length` bytes, from ``headerLength(_:)``) to the start of `out`. A
    /// chained header without a previous MAC gets the chain start (zeros).
    static func writeHeader(_ header: EventHeader, length: Int, to out: UnsafeMutableRawBufferPointer) {
        var o = 0
        func put(_ byte: UInt8) { out[o] = byte; o += 1 }
        func putBE<T: FixedWidthInteger>(_ value: T) {
            withUnsafeBytes(of: value.bigEndian) { UnsafeMutableRawBufferPointer(rebasing: out[o..<o + $0.count]).copyMemory(from: $0) }
            o += MemoryLayout<T>.size
        }
        func putId(_ id: String) {
            var id = id
            id.withUTF8 { bytes in
                put(UInt8(bytes.count))
                UnsafeMutableRawBufferPointer(rebasing: out[o..<o + bytes.count]).copyMemory(from: UnsafeRawBufferPointer(bytes))
                o += bytes.count
            }
        }
        put(header.formatVersion)
        put(UInt8(length))
        putBE(header.sequence)
        putBE(UInt64(bitPattern: header.recordedAtMillis))
        putBE(header.eventType)
        putId(header.userId)
        putId(header.cipherId)
        if header.formatVersion >= chainedFormatVersion {
            let target = UnsafeMutableRawBufferPointer(rebasing: out[o..<o + macBytes])
            if let previous = header.chainMAC { previous.write(to: target) } else { target.initializeMemory(as: UInt8.self, repeating: 0) }
            o += macBytes
        }
        precondition(o == length, "header length \(length) does not match its fields (\(o))")
    }

    /// Seals `body` under `key` with `iv` and returns the stored bytes.
    public static func seal(header: EventHeader, body: [UInt8], key: SealingKey, iv: ArraySlice<UInt8>) throws -> [UInt8] {
        var out = try encodeHeader(header)
        try sealBody(body, appendingTo: &out, key: key.events, iv: iv)
        return out
    }

    /// Appends `iv ‖ mac ‖ ciphertext` for `body` to `out`, which holds the header so far; the
    /// MAC covers everything in `out` before the IV.
    static func sealBody(_ body: [UInt8], appendingTo out: inout [UInt8], key: SealingKey.SubKey, iv: ArraySlice<UInt8>) throws {
        try appendMAC(ciphertext: encrypt(body, key: key, iv: iv), appendingTo: &out, key: key, iv: iv)
    }

    /// The AES-256-CBC ciphertext of `body` (independent per event, so a batch encrypts in parallel).
    static func encrypt(_ body: [UInt8], key: SealingKey.SubKey, iv: ArraySlice<UInt8>) throws -> [UInt8] {
        precondition(iv.count == ivBytes, "envelope IV must be 16 bytes")
        return [UInt8](unsafeUninitializedCapacity: AESCBC.ciphertextCount(plaintextCount: body.count)) { buffer, count in
            count = body.withUnsafeBytes { b in
                iv.withUnsafeBytes { key.cbc.encrypt(b, iv: $0, into: UnsafeMutableRawBufferPointer(buffer)) }
            }
        }
    }

    /// Appends `iv ‖ mac ‖ ciphertext`, the MAC covering `out` (the header) ‖ IV ‖ ciphertext,
    /// and returns the MAC.
    @discardableResult
    static func appendMAC(ciphertext: [UInt8], appendingTo out: inout [UInt8], key: SealingKey.SubKey, iv: ArraySlice<UInt8>) throws -> [UInt8] {
        var hmac = key.hmac
        hmac.update(data: out)
        hmac.update(data: iv)
        hmac.update(data: ciphertext)
        let mac = hmac.finalize()
        out.reserveCapacity(out.count + ivBytes + macBytes + ciphertext.count)
        out.append(contentsOf: iv)
        out.append(contentsOf: mac)
        out.append(contentsOf: ciphertext)
        return Array(mac)
    }

    /// Verifies the MAC over header and body, then decrypts the body.
    public func open(key: SealingKey) throws -> [UInt8] {
        try Self.openBody(bytes, headerLength: headerLength, key: key.events, sequence: header.sequence)
    }

    /// The stored MAC: the chain value the user's next event (format 2) names as its previous.
    public var mac: ArraySlice<UInt8> { bytes[(headerLength + Self.ivBytes)..<(headerLength + Self.ivBytes + Self.macBytes)] }

    /// Verifies only the MAC (what `verify` does with a key).
    public func authenticate(key: SealingKey) -> Bool {
        Self.macMatches(bytes, headerLength: headerLength, key: key.events)
    }

    static func macMatches(_ bytes: [UInt8], headerLength: Int, key: SealingKey.SubKey) -> Bool {
        bytes.withUnsafeBytes { macMatches(raw: $0, headerLength: headerLength, key: key) }
    }

    static func macMatches(raw: UnsafeRawBufferPointer, headerLength: Int, key: SealingKey.SubKey) -> Bool {
        let macStart = headerLength + ivBytes
        var hmac = key.hmac
        hmac.update(data: UnsafeRawBufferPointer(rebasing: raw[0..<macStart]))
        hmac.update(data: UnsafeRawBufferPointer(rebasing: raw[(macStart + macBytes)...]))
        return withUnsafeTemporaryAllocation(byteCount: macBytes, alignment: 1) { expected in
            hmac.finalize(into: expected)
            return constantTimeEquals(UnsafeRawBufferPointer(expected), UnsafeRawBufferPointer(rebasing: raw[macStart..<macStart + macBytes]))
        }
    }

    static func openBody(_ bytes: [UInt8], headerLength: Int, key: SealingKey.SubKey, sequence: UInt64) throws -> [UInt8] {
        try bytes.withUnsafeBytes { try openBody(raw: $0, headerLength: headerLength, key: key, sequence: sequence) }
    }

    /// Checks the MAC of a sealed envelope (or checkpoint) and decrypts its body.
    static func openBody(raw: UnsafeRawBufferPointer, headerLength: Int, key: SealingKey.SubKey, sequence: UInt64) throws -> [UInt8] {
        guard macMatches(raw: raw, headerLength: headerLength, key: key) else {
            throw EnvelopeError.authenticationFailed(sequence: sequence)
        }
        return try decryptBody(raw: raw, headerLength: headerLength, cbc: key.cbc, sequence: sequence)
    }

    /// Decrypts a sealed body whose MAC the caller has checked.
    static func decryptBody(raw: UnsafeRawBufferPointer, headerLength: Int, cbc: KeyedAESCBC, sequence: UInt64) throws -> [UInt8] {
        let ivStart = headerLength
        let ctStart = headerLength + ivBytes + macBytes
        do {
            // The MAC matched above: the padding is checked without the constant-time path. On
            // raw buffers: the `DataProtocol` form is generic across modules, so it looked up
            // type metadata on every call.
            return try cbc.decryptVerified(UnsafeRawBufferPointer(rebasing: raw[ctStart...]),
                                           iv: UnsafeRawBufferPointer(rebasing: raw[ivStart..<ivStart + ivBytes]))
        } catch {
            throw EnvelopeError.undecryptable(sequence: sequence)
        }
    }
}

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

@inline(__always)
func readBE<T: FixedWidthInteger>(_ b: UnsafeRawBufferPointer, at offset: Int, as: T.Type) -> T {
    var value: T = 0
    for i in 0..<MemoryLayout<T>.size { value = (value << 8) | T(b[offset + i]) }
    return value
}

@inline(__always)
func appendBE<T: FixedWidthInteger>(_ value: T, to out: inout [UInt8]) {
    var v = value.bigEndian
    withUnsafeBytes(of: &v) { out.append(contentsOf: $0) }
}

/// The 8-byte big-endian key of a sequence number (memcmp order = numeric order).
@inline(__always)
public func sequenceKey(_ sequence: UInt64) -> [UInt8] {
    var out = [UInt8]()
    out.reserveCapacity(8)
    appendBE(sequence, to: &out)
    return out
}
