import EventLog
import Foundation
import VaultJSON
import VaultModel

/// What a sealed projection checkpoint holds (format 3):
///
/// ```
/// "VLC3" ‖ u32 n ‖ n bytes: the projection's JSON with no pending changes
///        ‖ for each pending item, in id order: u16 k ‖ k bytes: cipher id
///                  ‖ u32 c ‖ c bytes: the change's JSON without its `latest`
///                  ‖ u32 m ‖ m bytes: the latest snapshot's JSON
/// ```
/// (lengths big-endian). Each pending change is its own JSON document, so a checkpoint is
/// written and read on all cores, and the snapshots are kept apart so that loading one decodes
/// only the small fields: a snapshot is decoded at the end of the fold that follows, and only if
/// no event of the tail replaced it (`VaultLogStore.materialize`).
///
/// Still read: format 2 (`"VLC2" ‖ u32 n ‖ the projection's JSON, pending changes included
/// without their snapshots ‖ per pending item: u16 k ‖ cipher id ‖ u32 m ‖ snapshot`, read one
/// change after another) and format 1 (the projection's JSON alone, snapshots included). An
/// older build ignores a checkpoint of a newer format (it does not decode) and folds from the
/// start, as it does for any unreadable checkpoint.
enum CheckpointPayload {
    static let magic = Array("VLC3".utf8)
    static let format2Magic = Array("VLC2".utf8)

    /// Pending changes (and snapshots) encoded or decoded per thread at once, at least.
    private static let parallelThreshold = 64

    /// The stored form of `projection`: its pending changes and their snapshots encoded on all
    /// cores.
    static func encode(_ projection: Projection) throws -> [UInt8] {
        let ids = projection.pending.keys.sorted()
        let parts = try parallelMap(count: ids.count, threshold: parallelThreshold) { i -> (change: [UInt8], snapshot: [UInt8]) in
            let change = projection.pending[ids[i]]!
            var encoder = VaultEvent.canonicalEncoder()
            encoder.userInfo[PendingChange.omitsSnapshot] = true
            return (try encoder.encode(change), try VaultEvent.encodeCipher(change.latest))
        }
        var rest = projection
        rest.pending = [:]
        let json = try VaultEvent.canonicalEncoder().encode(rest)
        var out = magic
        out.reserveCapacity(8 + json.count + parts.reduce(0) { $0 + $1.change.count + $1.snapshot.count + 48 })
        append(UInt32(json.count), to: &out)
        out += json
        for (id, part) in zip(ids, parts) {
            let idBytes = Array(id.utf8)
            append(UInt16(idBytes.count), to: &out)
            out += idBytes
            append(UInt32(part.change.count), to: &out)
            out += part.change
            append(UInt32(part.snapshot.count), to: &out)
            out += part.snapshot
        }
        return out
    }

    /// The projection with placeholders for its latest snapshots, and their JSON to decode
    /// later. Format 1 comes back whole (nothing deferred). Throws for anything malformed.
    static func decode(_ payload: [UInt8]) throws -> (Projection, VaultLogStore.DeferredSnapshots) {
        let format3 = payload.starts(with: magic)
        guard format3 || payload.starts(with: format2Magic) else {
            return (try JSONTapeDecoder().decode(Projection.self, from: payload), [:])
        }
        var reader = Reader(payload: payload, offset: magic.count)
        var projection = try JSONTapeDecoder().decode(Projection.self, from: try reader.part(lengthBytes: 4))
        // Each item's id, its change's JSON (format 3; format 2 has them in the projection)
        // and its snapshot.
        var entries: [(id: String, change: ArraySlice<UInt8>, snapshot: ArraySlice<UInt8>)] = []
        while !reader.isAtEnd {
            let id = String(decoding: try reader.part(lengthBytes: 2), as: UTF8.self)
            let change = format3 ? try reader.part(lengthBytes: 4) : []
            entries.append((id, change, try reader.part(lengthBytes: 4)))
        }
        if format3 {
            guard projection.pending.isEmpty else { throw Malformed(reason: "pending changes inside the projection's JSON") }
            let all = entries
            let changes = parallelMap(count: all.count, threshold: parallelThreshold) { i in
                Result { try JSONTapeDecoder().decode(PendingChange.self, from: all[i].change) }
            }
            projection.pending.reserveCapacity(entries.count)
            for (entry, change) in zip(entries, changes) {
                guard projection.pending.updateValue(try change.get(), forKey: entry.id) == nil else {
                    throw Malformed(reason: "pending item \(entry.id) came twice")
                }
            }
        }
        var deferred = VaultLogStore.DeferredSnapshots(minimumCapacity: entries.count)
        for entry in entries {
            guard let last = projection.pending[entry.id]?.versionSequences.last, deferred[entry.id] == nil else {
                throw Malformed(reason: "a snapshot for \(entry.id), which is not pending, has no version or came twice")
            }
            deferred[entry.id] = (last, entry.snapshot)
        }
        guard deferred.count == projection.pending.count else {
            throw Malformed(reason: "\(projection.pending.count - deferred.count) pending items without a snapshot")
        }
        return (projection, deferred)
    }

    /// Reads the length-prefixed parts of a payload in order.
    private struct Reader {
        let payload: [UInt8]
        var offset: Int

        var isAtEnd: Bool { offset >= payload.count }

        mutating func read(_ count: Int) throws -> ArraySlice<UInt8> {
            guard count >= 0, payload.count - offset >= count else { throw Malformed(reason: "cut short at byte \(offset)") }
            defer { offset += count }
            return payload[offset..<offset + count]
        }

        /// A part preceded by its length, a big-endian unsigned integer of `lengthBytes` bytes.
        mutating func part(lengthBytes: Int) throws -> ArraySlice<UInt8> {
            let length = try read(lengthBytes).reduce(0) { $0 << 8 | Int($1) }
            return try read(length)
        }
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
