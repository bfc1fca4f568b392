@testable import EventLog
import Foundation
import Testing
import VaultCrypto
import VaultLogTestSupport

/// The fold's id table: a header reuses a known id only when its bytes are that id's, however
/// alike the two are (same length, one the other's prefix, a hash that lands in the same slot).
@Suite struct KnownIdsTests {
    private static let uuid = "3f2a9c1e-7b4d-4e8a-9f0c-2d5b6a7e8f90"

    static func table(_ ids: [String]) -> KnownIds {
        var table = KnownIds(capacity: ids.count)
        for id in ids { table.insert(id) }
        return table
    }

    /// Ids that differ only in their last characters (as generated ids do) spread over the
    /// table's slots: the index is the hash's low bits, which a hash without a final mix left
    /// alike for them (1,000 such ids fell into 4 runs, and a lookup probed hundreds of slots).
    @Test func idsDifferingAtTheirEnd_spreadOverTheSlots() {
        let ids = (0..<1000).map { String(format: "c0ffee00-0000-4000-8000-%012d", $0) }
        let slots = Set(ids.map { id in Array(id.utf8).withUnsafeBytes { KnownIds.hash($0) & 2047 } })
        #expect(slots.count > 700, "\(slots.count) distinct slots of 2,048 for 1,000 ids")
    }

    /// A table given more ids than its room keeps the first ones and finds no other.
    @Test func aFullTable_keepsItsFirstIds() {
        var table = KnownIds(capacity: 4)  // 16 slots, room for 8
        let ids = (0..<20).map { "id-\($0)" }
        for id in ids { table.insert(id) }
        let found = ids.filter { id in Array(id.utf8).withUnsafeBytes { table.id(matching: $0) } == id }
        #expect(found == Array(ids.prefix(8)))
    }

    @Test func anIdIsFoundOnlyByItsOwnBytes() {
        let near = [Self.uuid, String(Self.uuid.dropLast()) + "1", String(Self.uuid.dropLast()), "c", "cipher-1", "cipher-10"]
        let table = Self.table(near + near)  // duplicates kept once
        for id in near {
            #expect(Array(id.utf8).withUnsafeBytes { table.id(matching: $0) } == id)
        }
        for absent in [String(Self.uuid.dropFirst()) + "3", "cipher-2", "cipher-", "cipher-100", "d"] {
            #expect(Array(absent.utf8).withUnsafeBytes { table.id(matching: $0) } == nil, "\(absent)")
        }
        #expect([UInt8]().withUnsafeBytes { table.id(matching: $0) } == nil)
    }

    /// A table fuller than one probe per id (ids in neighbouring slots): every id still found, none confused.
    @Test func aCrowdedTable_findsEveryIdAndNoOther() {
        let ids = (0..<5000).map { String(format: "%08d-0000-4000-8000-000000000000", $0) }
        let table = Self.table(ids)
        #expect(ids.allSatisfy { id in Array(id.utf8).withUnsafeBytes { table.id(matching: $0) } == id })
        let others = (5000..<6000).map { String(format: "%08d-0000-4000-8000-000000000000", $0) }
        #expect(others.allSatisfy { id in Array(id.utf8).withUnsafeBytes { table.id(matching: $0) } == nil })
    }

    /// Events read in place with a table of ids alike theirs keep their own ids; the headers are
    /// the ones read without a table.
    @Test(arguments: [256, 1])
    func headersReadWithATable_areTheHeadersReadWithout(threshold: Int) throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        try store.append((1...40).map { event($0, cipher: "cipher-\($0 % 11)") }, key: keyA)
        let table = Self.table((0..<30).map { "cipher-\($0 % 13 + 2)" } + ["cipher-0x", "cipher-"])
        let read = { (knownIds: KnownIds?) in
            try store.read { reader in
                try reader.mapEventsInPlace(userId: "user-a", after: 0, limit: 100, key: keyA, parallelThreshold: threshold,
                                            knownIds: knownIds) { event, _ in try? event.header.get() }
            }
        }
        let without = try read(nil), with = try read(table)
        #expect(without.count == 40)
        #expect(with == without)
        #expect(with.map { $0?.cipherId } == (1...40).map { "cipher-\($0 % 11)" })
    }
}
