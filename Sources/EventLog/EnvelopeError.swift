import Crypto
import _CryptoExtras
import Foundation
import LMDB
import VaultCrypto

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
