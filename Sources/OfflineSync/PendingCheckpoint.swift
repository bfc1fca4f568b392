import EventLog
import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultModel

/// The stored form of a user's ``HeaderProjection``: only what the plaintext headers already
/// show (cipher ids and change types), so it is kept unsealed and read while locked.
/// `[version 1][lastSequence u64 BE][count u32 BE]` then per item `[idLength u8][id][type u8]`;
/// the type byte's high bit marks a create that may have reached the server.
enum PendingCheckpoint {
    /// The stored code of each change type. Fixed values: reordering the enum's cases must not
    /// change what stored checkpoints mean.
    static func code(_ type: PendingChangeType) -> UInt8 {
        switch type {
        case .create: 0
        case .update: 1
        case .softDelete: 2
        case .hardDelete: 3
        }
    }

    /// The change type of a stored code; nil for a code this build does not know.
    static func type(code: UInt8) -> PendingChangeType? {
        switch code {
        case 0: .create
        case 1: .update
        case 2: .softDelete
        case 3: .hardDelete
        default: nil
        }
    }

    static func encode(_ projection: HeaderProjection) -> [UInt8] {
        var out: [UInt8] = [1]
        withUnsafeBytes(of: projection.lastSequence.bigEndian) { out.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(projection.pending.count).bigEndian) { out.append(contentsOf: $0) }
        for (id, type) in projection.pending.sorted(by: { $0.key < $1.key }) {
            let bytes = Array(id.utf8.prefix(255))
            out.append(UInt8(bytes.count))
            out.append(contentsOf: bytes)
            // The high bit marks a create that may have reached the server.
            out.append(code(type) | (projection.uncertainCreates.contains(id) ? 0x80 : 0))
        }
        return out
    }

    /// Nil when the bytes are not a checkpoint this build reads (then the fold starts over).
    static func decode(_ bytes: [UInt8]?) -> HeaderProjection? {
        guard let bytes, bytes.count >= 13, bytes[0] == 1 else { return nil }
        func be(_ range: Range<Int>) -> UInt64 { bytes[range].reduce(0) { $0 << 8 | UInt64($1) } }
        var projection = HeaderProjection()
        projection.lastSequence = be(1..<9)
        let count = Int(be(9..<13))
        var offset = 13
        for _ in 0..<count {
            guard offset < bytes.count else { return nil }
            let length = Int(bytes[offset])
            offset += 1
            guard offset + length < bytes.count, let id = String(validating: bytes[offset..<offset + length], as: UTF8.self) else { return nil }
            offset += length
            guard let type = type(code: bytes[offset] & 0x7F) else { return nil }
            if bytes[offset] & 0x80 != 0 { projection.uncertainCreates.insert(id) }
            offset += 1
            projection.pending[id] = type
        }
        return offset == bytes.count ? projection : nil
    }
}
