import Foundation
import VaultCrypto

/// Envelope format 3: two MACs, so that a reader of a body's two ends authenticates only what it
/// reads.
///
/// A fold reads a few fields at the start and the end of each operation's body (its date and
/// base revision before the cipher's JSON, the password flag after it) and decrypts only those
/// AES blocks, but up to format 2 it had to run HMAC-SHA256 over the whole event first: about
/// 1.4 kB per event, most of a fold's time. From format 3:
///
/// - the **body MAC** (HMAC-SHA256 under its own key, ``SealingKey/bodies``, truncated to its
///   first 16 bytes as AES-CBC-HMAC-SHA-256 in JOSE does) covers `IV ‖ ciphertext`;
/// - the **event MAC** (under ``SealingKey/events``) covers `header ‖ IV ‖ length ‖ bodyMAC ‖
///   head ‖ tail`, where `length` is the ciphertext's byte count (u64 big-endian), `head` its
///   first ``coveredHeadBytes`` bytes and `tail` its last ``coveredTailBytes`` bytes not
///   already in `head` (so a ciphertext of 192 bytes or fewer is covered whole, once).
///
/// The event MAC is the chain value (the next event's previous MAC) and binds the whole event:
/// it covers the body MAC, which covers every ciphertext byte. A reader that decrypts only
/// blocks inside the covered ends (CBC decrypts a block from it and the block before it)
/// checks the event MAC alone; any other read of the body checks the body MAC as well, and
/// `verify` checks both for every event. The body MAC runs over each event independently, so a
/// batch computes them on all cores; only the short event MACs run in chain order.
extension Envelope {
    /// The first version with a body MAC.
    public static let bodyMACFormatVersion: UInt8 = 3
    /// Ciphertext bytes at its start that the event MAC of format 3 covers: the IV and these
    /// decrypt the first 8 AES blocks.
    public static let coveredHeadBytes = 128
    /// Ciphertext bytes at its end that the event MAC of format 3 covers: these decrypt the
    /// last 3 AES blocks (and the padding).
    public static let coveredTailBytes = 64

    /// Bytes of format 3's body MAC: HMAC-SHA256 truncated to 128 bits (a forgery is one
    /// chance in 2^128; 16 bytes less per event than the whole MAC).
    static let bodyMACLength = 16

    /// Bytes of the body MAC in an envelope of `version` (none before format 3).
    @inline(__always)
    static func bodyMACBytes(version: UInt8) -> Int { version >= bodyMACFormatVersion ? bodyMACLength : 0 }

    /// Where the ciphertext starts in an envelope of `version` whose header is `headerLength` bytes.
    @inline(__always)
    static func ciphertextStart(headerLength: Int, version: UInt8) -> Int {
        headerLength + ivBytes + macBytes + bodyMACBytes(version: version)
    }

    /// Whether the event MAC of format 3 covers every byte of a ciphertext of `count` bytes.
    @inline(__always)
    static func eventMACCoversWhole(ciphertextCount count: Int) -> Bool { count <= coveredHeadBytes + coveredTailBytes }

    /// Whether the event MAC covers what decrypting the first `headBlocks` and last
    /// `tailBlocks` AES blocks of a ciphertext reads (the tail needs the block before it).
    @inline(__always)
    static func eventMACCovers(headBlocks: Int, tailBlocks: Int) -> Bool {
        headBlocks * 16 <= coveredHeadBytes && (tailBlocks + 1) * 16 <= coveredTailBytes
    }

    /// Everything an envelope of any version authenticates: its one MAC (formats 1 and 2), or
    /// its event MAC and body MAC (format 3). `raw`'s framing must have been checked
    /// (``checkBody(count:headerLength:version:sequence:)``).
    static func eventMatches(raw: UnsafeRawBufferPointer, headerLength: Int, version: UInt8, key: SealingKey) -> Bool {
        eventMACMatches(raw: raw, headerLength: headerLength, version: version, key: key)
            && (version < bodyMACFormatVersion || bodyMACMatches(raw: raw, headerLength: headerLength, key: key.bodies))
    }

    /// What a reader of the body's covered ends relies on: the one MAC (formats 1 and 2), or the
    /// event MAC alone (format 3).
    static func eventMACMatches(raw: UnsafeRawBufferPointer, headerLength: Int, version: UInt8, key: SealingKey) -> Bool {
        guard version >= bodyMACFormatVersion else { return macMatches(raw: raw, headerLength: headerLength, key: key.events) }
        return eventMACMatches(raw: raw, headerLength: headerLength, key: key.events)
    }

    /// Format 3's event MAC of `envelope`, checked.
    static func eventMACMatches(raw: UnsafeRawBufferPointer, headerLength: Int, key: SealingKey.SubKey) -> Bool {
        let macStart = headerLength + ivBytes
        return withUnsafeTemporaryAllocation(byteCount: macBytes, alignment: 1) { expected in
            eventMAC(envelope: raw, headerLength: headerLength, key: key, into: expected)
            return constantTimeEquals(UnsafeRawBufferPointer(expected), UnsafeRawBufferPointer(rebasing: raw[macStart..<macStart + macBytes]))
        }
    }

    /// Format 3's body MAC of `envelope`, checked.
    static func bodyMACMatches(raw: UnsafeRawBufferPointer, headerLength: Int, key: SealingKey.SubKey) -> Bool {
        let bodyMACStart = headerLength + ivBytes + macBytes
        return withUnsafeTemporaryAllocation(byteCount: macBytes, alignment: 1) { expected in
            bodyMAC(envelope: raw, headerLength: headerLength, key: key, into: expected)
            return constantTimeEquals(UnsafeRawBufferPointer(rebasing: expected[..<bodyMACLength]),
                                      UnsafeRawBufferPointer(rebasing: raw[bodyMACStart..<bodyMACStart + bodyMACLength]))
        }
    }

    /// Writes format 3's body MAC into its slot of `envelope` (IV and ciphertext in place).
    static func writeBodyMAC(envelope: UnsafeMutableRawBufferPointer, headerLength: Int, key: SealingKey.SubKey) {
        let bodyMACStart = headerLength + ivBytes + macBytes
        withUnsafeTemporaryAllocation(byteCount: macBytes, alignment: 1) { mac in
            bodyMAC(envelope: UnsafeRawBufferPointer(envelope), headerLength: headerLength, key: key, into: mac)
            UnsafeMutableRawBufferPointer(rebasing: envelope[bodyMACStart..<bodyMACStart + bodyMACLength])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: mac[..<bodyMACLength]))
        }
    }

    /// Writes format 3's event MAC into its slot of `envelope` (header with its previous MAC,
    /// IV, body MAC and ciphertext in place).
    static func writeEventMAC(envelope: UnsafeMutableRawBufferPointer, headerLength: Int, key: SealingKey.SubKey) {
        let macStart = headerLength + ivBytes
        eventMAC(envelope: UnsafeRawBufferPointer(envelope), headerLength: headerLength, key: key,
                 into: UnsafeMutableRawBufferPointer(rebasing: envelope[macStart..<macStart + macBytes]))
    }

    /// HMAC-SHA256(`IV ‖ ciphertext`) under the body key, all 32 bytes (the envelope keeps the first 16).
    private static func bodyMAC(envelope e: UnsafeRawBufferPointer, headerLength: Int, key: SealingKey.SubKey,
                                into out: UnsafeMutableRawBufferPointer) {
        let ivStart = headerLength, ctStart = ciphertextStart(headerLength: headerLength, version: bodyMACFormatVersion)
        var hmac = key.hmac
        hmac.update(data: UnsafeRawBufferPointer(rebasing: e[ivStart..<ivStart + ivBytes]))
        hmac.update(data: UnsafeRawBufferPointer(rebasing: e[ctStart...]))
        hmac.finalize(into: out)
    }

    /// HMAC-SHA256(`header ‖ IV ‖ length ‖ bodyMAC ‖ head ‖ tail`) under the event key.
    private static func eventMAC(envelope e: UnsafeRawBufferPointer, headerLength: Int, key: SealingKey.SubKey,
                                 into out: UnsafeMutableRawBufferPointer) {
        let macStart = headerLength + ivBytes, bodyMACStart = macStart + macBytes, ctStart = bodyMACStart + bodyMACLength
        let count = e.count - ctStart
        let headEnd = ctStart + Swift.min(count, coveredHeadBytes)
        let tailStart = Swift.max(headEnd, e.count - coveredTailBytes)
        var hmac = key.hmac
        hmac.update(data: UnsafeRawBufferPointer(rebasing: e[0..<macStart]))
        withUnsafeBytes(of: UInt64(count).bigEndian) { hmac.update(data: $0) }
        hmac.update(data: UnsafeRawBufferPointer(rebasing: e[bodyMACStart..<ctStart]))
        hmac.update(data: UnsafeRawBufferPointer(rebasing: e[ctStart..<headEnd]))
        hmac.update(data: UnsafeRawBufferPointer(rebasing: e[tailStart...]))
        hmac.finalize(into: out)
    }
}
