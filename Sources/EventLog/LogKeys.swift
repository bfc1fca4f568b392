import Crypto
import Foundation
import LMDB
import Synchronization
import Logging
import VaultCrypto

/// Sealed-checkpoint framing: `"VLCK" ‖ version ‖ userIdLength ‖ userId ‖ sequence` then the
/// sealed body; the MAC covers that header, so a checkpoint cannot be moved to another user or
/// sequence.
enum Checkpoint {
    static func header(userId: String, sequence: UInt64) -> [UInt8] {
        var out = Array("VLCK".utf8)
        out.append(1)
        let user = Array(userId.utf8.prefix(Envelope.maxIdLength))
        out.append(UInt8(user.count))
        out.append(contentsOf: user)
        appendBE(sequence, to: &out)
        return out
    }
}

/// A user's head record: the sequence of the user's last event and its MAC (the chain value),
/// sealed with the user's head key, so deleting the tail of a user's events is detected:
/// `"VLHD" ‖ 0x01 ‖ userIdLength ‖ userId ‖ lastSequence(8, BE) ‖ chain(32) ‖ MAC(32)`, the
/// HMAC-SHA256 covering every byte before it. Updated in the transaction of every append.
struct HeadRecord: Equatable {
    static let magic = Array("VLHD".utf8)
    let userId: String
    let lastSequence: UInt64
    let chain: [UInt8]

    init(userId: String, lastSequence: UInt64, chain: [UInt8]) {
        self.userId = userId
        self.lastSequence = lastSequence
        self.chain = chain
    }

    /// Parses the stored bytes (nil when they are not a head record); the MAC is not checked.
    init?(bytes: [UInt8]) {
        guard bytes.count >= 4 + 1 + 1 + 8 + 32 + 32, bytes.starts(with: Self.magic), bytes[4] == 1 else { return nil }
        let length = Int(bytes[5])
        guard bytes.count == 6 + length + 8 + 32 + 32,
              let user = String(validating: bytes[6..<6 + length], as: UTF8.self) else { return nil }
        userId = user
        lastSequence = bytes[(6 + length)..<(14 + length)].reduce(0) { $0 << 8 | UInt64($1) }
        chain = Array(bytes[(14 + length)..<(46 + length)])
    }

    func unsealed() -> [UInt8] {
        var out = Self.magic + [1]
        let user = Array(userId.utf8.prefix(Envelope.maxIdLength))
        out.append(UInt8(user.count))
        out.append(contentsOf: user)
        appendBE(lastSequence, to: &out)
        out.append(contentsOf: chain)
        return out
    }

    func sealed(key: SealingKey) -> [UInt8] {
        var out = unsealed()
        var hmac = key.heads.hmac
        hmac.update(data: out)
        out.append(contentsOf: hmac.finalize())
        return out
    }

    /// Whether `bytes` (this record as stored) carry a valid MAC under `key`.
    func authenticate(_ bytes: [UInt8], key: SealingKey) -> Bool {
        guard bytes.count > 32 else { return false }
        var hmac = key.heads.hmac
        hmac.update(data: bytes[..<(bytes.count - 32)])
        return constantTimeEquals(Array(hmac.finalize()), bytes.suffix(32))
    }
}

/// A user and item, grouping a batch's index entries.
struct IndexGroup: Hashable {
    let userId: String
    let cipherId: String
}

/// Keys of the `index` and `checkpoints` databases. Ids are length-prefixed, so one id can
/// never be a prefix of another's keys.
enum IndexKey {
    static let userTag: UInt8 = 0x01
    static let cipherTag: UInt8 = 0x02

    static func userPrefix(_ user: String) -> [UInt8] {
        let u = Array(user.utf8)
        return [userTag, UInt8(truncatingIfNeeded: u.count)] + u
    }

    static func user(_ user: String, _ sequence: UInt64) -> [UInt8] {
        userPrefix(user) + sequenceKey(sequence)
    }

    static func cipherUserPrefix(_ user: String) -> [UInt8] {
        let u = Array(user.utf8)
        return [cipherTag, UInt8(truncatingIfNeeded: u.count)] + u
    }

    static func cipherPrefix(_ user: String, _ cipher: String) -> [UInt8] {
        let c = Array(cipher.utf8)
        return cipherUserPrefix(user) + [UInt8(truncatingIfNeeded: c.count)] + c
    }

    static func cipher(_ user: String, _ cipher: String, _ sequence: UInt64) -> [UInt8] {
        cipherPrefix(user, cipher) + sequenceKey(sequence)
    }

    static func checkpointPrefix(_ user: String) -> [UInt8] {
        let u = Array(user.utf8)
        return [UInt8(truncatingIfNeeded: u.count)] + u
    }

    static func checkpoint(_ user: String, _ sequence: UInt64) -> [UInt8] {
        checkpointPrefix(user) + sequenceKey(sequence)
    }
}
