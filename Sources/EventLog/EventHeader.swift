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
    package var chainMAC: ChainMAC?

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
package enum ChainMAC: Sendable, Hashable {
    case inline(UInt64, UInt64, UInt64, UInt64)
    case other([UInt8])

    package init(_ bytes: [UInt8]) {
        if bytes.count == 32 {
            self = bytes.withUnsafeBytes { ChainMAC(raw: $0) }
        } else {
            self = .other(bytes)
        }
    }

    /// The first 32 bytes of `raw` (at least 32).
    package init(raw: UnsafeRawBufferPointer) {
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
