import Crypto
import _CryptoExtras
import Foundation
import LMDB
import VaultCrypto

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
    /// Key for the body MACs of envelope format 3 (MAC only; the body is encrypted under ``events``).
    var bodies: SubKey { storage.bodies }

    /// The five keys behind one reference: a `SealingKey` is passed to every event's sealing
    /// and opening, and copying four keys with their HMAC states (about a kilobyte, eight
    /// references) was 4% of a fold's time.
    private final class Storage: Sendable {
        let events: SubKey, checkpoints: SubKey, heads: SubKey, snapshots: SubKey, bodies: SubKey

        init(_ userKey: SymmetricCryptoKey) {
            events = SubKey(userKey.derive(info: SealingKey.eventInfo))
            checkpoints = SubKey(userKey.derive(info: SealingKey.checkpointInfo))
            heads = SubKey(userKey.derive(info: SealingKey.headInfo))
            snapshots = SubKey(userKey.derive(info: SealingKey.snapshotInfo))
            bodies = SubKey(userKey.derive(info: SealingKey.bodyInfo))
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
    /// HKDF info for the body-MAC keys of envelope format 3 (part of the format; never change it).
    public static let bodyInfo = "vaultlog.envelope-body.v3"

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
