import Crypto
import _CryptoExtras
import Foundation
import LMDB
import VaultCrypto

/// A stored event: plaintext header + sealed body (AES-256-CBC + HMAC-SHA256, encrypt-then-MAC).
/// Byte layout in `Docs/EventFormat.md`:
///
/// ```
/// [version u8][headerLength u8][sequence u64 BE][recordedAt i64 BE ms][eventType u16 BE]
/// [userIdLength u8][userId][cipherIdLength u8][cipherId]([previousMAC 32] from v2)
///   |  [iv 16][mac 32]([bodyMAC 16] from v3)[ciphertext 16·n]
/// ```
///
/// Up to format 2 the MAC covers header ‖ IV ‖ ciphertext. From format 3 a body MAC covers
/// IV ‖ ciphertext and the event MAC covers the header, the IV, the ciphertext's length, the body
/// MAC and the ciphertext's two ends (`Envelope+BodyMAC.swift`): a reader of the ends (the
/// fold) checks the short event MAC only, a reader of the whole body both.
public struct Envelope: Sendable {
    /// The version new envelopes are written with (3: a body MAC, and an event MAC over the
    /// header and the body's ends; 2: the header carries the previous MAC of the user's chain).
    /// Versions 1 and 2 are still read and imported unchanged.
    public static let currentFormatVersion: UInt8 = 3
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
        try Self.checkBody(count: bytes.count, headerLength: headerLength, version: header.formatVersion, sequence: header.sequence)
    }

    /// A sealed body is an IV, a MAC (two from format 3) and whole AES blocks.
    static func checkBody(count: Int, headerLength: Int, version: UInt8, sequence: UInt64) throws {
        let bodyLength = count - headerLength, macs = macBytes + bodyMACBytes(version: version)
        guard bodyLength >= ivBytes + macs + 16, (bodyLength - ivBytes - macs) % 16 == 0 else {
            throw EnvelopeError.malformed(sequence: sequence, reason: "sealed body of \(bodyLength) bytes is not IV + \(macs == macBytes ? "MAC" : "two MACs") + whole AES blocks")
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

    /// ``parseHeader(raw:)``; a user id equal to `expected` is returned as that string, and a
    /// cipher id among `knownIds` as that one (``KnownIds``: no new string).
    static func parseHeader(raw b: UnsafeRawBufferPointer, userId expected: String?,
                            knownIds: KnownIds? = nil) throws -> (header: EventHeader, length: Int) {
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
        func readId(_ what: String, expected: String? = nil, known: KnownIds? = nil) throws -> String {
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
            if let id = known?.id(matching: bytes) {
                offset += length
                return id
            }
            guard let id = utf8String(bytes) else {
                throw EnvelopeError.malformed(sequence: sequence, reason: "\(what) is not UTF-8")
            }
            offset += length
            return id
        }
        let userId = try readId("user id", expected: expected)
        let cipherId = try readId("cipher id", known: knownIds)
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
        // Made in the return: a header bound to a name first was copied and destroyed per call.
        return (EventHeader(formatVersion: version, sequence: sequence, userId: userId, cipherId: cipherId,
                            eventType: eventType, recordedAtMillis: recordedAt, chainMAC: previousMAC), headerLength)
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

    /// Seals `body` under `key` with `iv` and returns the stored bytes, in the layout of
    /// `header.formatVersion` (older versions only for tests and tools that make old logs).
    public static func seal(header: EventHeader, body: [UInt8], key: SealingKey, iv: ArraySlice<UInt8>) throws -> [UInt8] {
        var out = try encodeHeader(header)
        guard header.formatVersion >= bodyMACFormatVersion else {
            try sealBody(body, appendingTo: &out, key: key.events, iv: iv)
            return out
        }
        let headerLength = out.count
        let ciphertext = try encrypt(body, key: key.events, iv: iv)
        let macs = macBytes + bodyMACLength
        out.reserveCapacity(headerLength + ivBytes + macs + ciphertext.count)
        out.append(contentsOf: iv)
        out.append(contentsOf: repeatElement(0, count: macs))
        out.append(contentsOf: ciphertext)
        out.withUnsafeMutableBytes { envelope in
            writeBodyMAC(envelope: envelope, headerLength: headerLength, key: key.bodies)
            writeEventMAC(envelope: envelope, headerLength: headerLength, key: key.events)
        }
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

    /// Verifies the MAC over header and body (both MACs from format 3), then decrypts the body.
    public func open(key: SealingKey) throws -> [UInt8] {
        try bytes.withUnsafeBytes { raw in
            guard Self.eventMatches(raw: raw, headerLength: headerLength, version: header.formatVersion, key: key) else {
                throw EnvelopeError.authenticationFailed(sequence: header.sequence)
            }
            return try Self.decryptBody(raw: raw, headerLength: headerLength, version: header.formatVersion, cbc: key.events.cbc,
                                        sequence: header.sequence)
        }
    }

    /// The stored (event) MAC: the chain value the user's next event (format 2 on) names as its previous.
    public var mac: ArraySlice<UInt8> { bytes[(headerLength + Self.ivBytes)..<(headerLength + Self.ivBytes + Self.macBytes)] }

    /// ``mac`` as a chain value, to compare with the next event's previous MAC.
    package var chainValue: ChainMAC { bytes.withUnsafeBytes { Self.storedMAC(raw: $0, headerLength: headerLength) } }

    /// The stored MAC of the envelope in `raw` whose header is `headerLength` bytes (its body's
    /// framing checked): the chain value the user's next event names as its previous.
    static func storedMAC(raw: UnsafeRawBufferPointer, headerLength: Int) -> ChainMAC {
        ChainMAC(raw: UnsafeRawBufferPointer(rebasing: raw[(headerLength + ivBytes)...]))
    }

    /// Verifies the MAC (from format 3 both MACs) without decrypting: what `verify` does with a key.
    public func authenticate(key: SealingKey) -> Bool {
        bytes.withUnsafeBytes { Self.eventMatches(raw: $0, headerLength: headerLength, version: header.formatVersion, key: key) }
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

    /// Checks the MAC of a sealed checkpoint or snapshot record (or an envelope of format 1 or
    /// 2: one MAC over everything) and decrypts its body.
    static func openBody(raw: UnsafeRawBufferPointer, headerLength: Int, key: SealingKey.SubKey, sequence: UInt64) throws -> [UInt8] {
        guard macMatches(raw: raw, headerLength: headerLength, key: key) else {
            throw EnvelopeError.authenticationFailed(sequence: sequence)
        }
        return try decryptBody(raw: raw, headerLength: headerLength, version: 1, cbc: key.cbc, sequence: sequence)
    }

    /// Decrypts a sealed body whose MACs the caller has checked; `version` places the
    /// ciphertext (after a body MAC from format 3; checkpoints and snapshots pass 1).
    static func decryptBody(raw: UnsafeRawBufferPointer, headerLength: Int, version: UInt8, cbc: KeyedAESCBC, sequence: UInt64) throws -> [UInt8] {
        let ivStart = headerLength
        let ctStart = ciphertextStart(headerLength: headerLength, version: version)
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
