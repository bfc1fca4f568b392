import EventLog
import Foundation
import VaultModel

/// What a sealed projection checkpoint holds (format 2):
///
/// ```
/// "VLC2" ‖ u32 n ‖ n bytes: the projection's JSON, each pending item's latest snapshot left
///                  out (no `latest` key; older writes have a placeholder there)
///        ‖ for each pending item, in id order: u16 k ‖ k bytes: cipher id ‖ u32 m ‖ m bytes:
///                  the latest snapshot's JSON
/// ```
/// (lengths big-endian). The snapshots are kept apart so that loading a checkpoint decodes only
/// the small fields: a snapshot is decoded at the end of the fold that follows, and only if no
/// event of the tail replaced it (`VaultLogStore.materialize`). Format 1, the projection's JSON
/// alone, is still read. An older build ignores a format-2 checkpoint (it does not decode) and
/// folds from the start, as it does for any unreadable checkpoint.
enum CheckpointPayload {
    static let magic = Array("VLC2".utf8)

    /// The stored form of `projection` (snapshots encoded on all cores).
    static func encode(_ projection: Projection) throws -> [UInt8] {
        let ids = projection.pending.keys.sorted()
        let snapshots = try parallelMap(count: ids.count, threshold: 64) { i in
            try VaultEvent.encodeCipher(projection.pending[ids[i]]!.latest)
        }
        let encoder = VaultEvent.canonicalEncoder()
        encoder.userInfo[PendingChange.omitsSnapshot] = true
        let json = Array(try encoder.encode(projection))
        var out = magic
        out.reserveCapacity(8 + json.count + snapshots.reduce(0) { $0 + $1.count + 48 })
        append(UInt32(json.count), to: &out)
        out += json
        for (id, snapshot) in zip(ids, snapshots) {
            let idBytes = Array(id.utf8)
            append(UInt16(idBytes.count), to: &out)
            out += idBytes
            append(UInt32(snapshot.count), to: &out)
            out += snapshot
        }
        return out
    }

    /// The projection with placeholders for its latest snapshots, and their JSON to decode
    /// later. Format 1 comes back whole (nothing deferred). Throws for anything malformed.
    static func decode(_ payload: [UInt8]) throws -> (Projection, VaultLogStore.DeferredSnapshots) {
        guard payload.starts(with: magic) else {
            return (try JSONTapeDecoder().decode(Projection.self, from: payload), [:])
        }
        var offset = magic.count
        func read(_ count: Int) throws -> ArraySlice<UInt8> {
            guard count >= 0, payload.count - offset >= count else { throw Malformed(reason: "cut short at byte \(offset)") }
            defer { offset += count }
            return payload[offset..<offset + count]
        }
        func integer(_ bytes: Int) throws -> Int {
            try read(bytes).reduce(0) { $0 << 8 | Int($1) }
        }
        let projection = try JSONTapeDecoder().decode(Projection.self, from: try read(integer(4)))
        var deferred = VaultLogStore.DeferredSnapshots()
        while offset < payload.count {
            let id = String(decoding: try read(integer(2)), as: UTF8.self)
            let json = try read(integer(4))
            guard let last = projection.pending[id]?.versionSequences.last, deferred[id] == nil else {
                throw Malformed(reason: "a snapshot for \(id), which is not pending or came twice")
            }
            deferred[id] = (last, json)
        }
        guard deferred.count == projection.pending.count else {
            throw Malformed(reason: "\(projection.pending.count - deferred.count) pending items without a snapshot")
        }
        return (projection, deferred)
    }

    private static func append<T: FixedWidthInteger>(_ value: T, to out: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { out.append(contentsOf: $0) }
    }

    /// A format-2 payload that does not parse.
    struct Malformed: Error, CustomStringConvertible {
        let reason: String
        var description: String { "malformed checkpoint: \(reason)" }
    }
}
