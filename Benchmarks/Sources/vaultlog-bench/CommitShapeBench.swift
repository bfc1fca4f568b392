import Foundation
import LMDB
import VaultModel

/// The engine's own floor for a durable save: one LMDB write transaction with exactly the
/// records a VaultLog save writes, through the `LMDB` module with no crypto and no encoding
/// (every value made before the clock starts): the sealed event under the next sequence
/// (`events`), the user's index entry (`index`, empty value), the user's head record (`heads`,
/// replaced) and the local copy of the item (`ciphers`, replaced), in a store of the same four
/// databases that already holds the bench's items. What a save costs beyond this is the
/// engine's own work (cipher encryption, body encoding, sealing, the head's MACs, its checks).
///
/// Sizes are those of the save bench's records: the event's sealed size, an index key of the
/// user's prefix and the sequence, a head record of the user id, the sequence and two MACs,
/// the cipher's JSON.
final class CommitShapeFloor {
    private let environment: Environment
    private let events, index, heads, ciphers: Database
    private let userId: [UInt8]
    private let eventValues: [[UInt8]]
    private let cipherRecords: [(key: [UInt8], value: [UInt8])]
    private var sequence: UInt64 = 0
    // Rewritten in place per commit (the sequence at their ends): no allocation while timed.
    private var sequenceKey = [UInt8](repeating: 0, count: 8)
    private var indexKey: [UInt8]
    private var head: [UInt8]

    /// `eventSizes[i]`: the sealed size of save `i`'s event; `items[i]`: an item's id and JSON.
    init(directory: String, userId: String, durability: Durability = .full, eventSizes: [Int],
         items: [(id: String, json: [UInt8])]) throws {
        var options = EnvironmentOptions()
        options.mapSize = 1 << 30
        options.durability = durability
        environment = try Environment(path: directory, options: options)
        events = try environment.openDatabase("events")
        index = try environment.openDatabase("index")
        heads = try environment.openDatabase("heads")
        ciphers = try environment.openDatabase("ciphers")
        let user = Array(userId.utf8)
        let userPrefix = [UInt8(truncatingIfNeeded: user.count)] + user
        self.userId = user
        eventValues = eventSizes.map { [UInt8](repeating: 0x5A, count: $0) }
        cipherRecords = items.map { ([0x02] + userPrefix + Array($0.id.utf8), $0.json) }
        indexKey = [0x01] + userPrefix + sequenceKey
        head = Array("VLHD".utf8) + [1] + userPrefix + sequenceKey + [UInt8](repeating: 0xC3, count: 64)
        // The items are stored before the first commit, as in the save bench's store.
        let records = cipherRecords
        let ciphers = ciphers
        try environment.write { txn in
            for record in records { try txn.put(ciphers, key: record.key, value: record.value) }
        }
    }

    /// One durable commit of save number `n`'s records.
    func commit(_ n: Int) throws {
        sequence += 1
        for i in 0..<8 {
            let byte = UInt8(truncatingIfNeeded: sequence >> (8 * (7 - i)))
            sequenceKey[i] = byte
            indexKey[indexKey.count - 8 + i] = byte
            head[head.count - 72 + i] = byte
        }
        let event = eventValues[n % eventValues.count]
        let cipher = cipherRecords[n % cipherRecords.count]
        let (sequenceKey, indexKey, head) = (sequenceKey, indexKey, head)
        let (events, index, heads, ciphers, userId) = (events, index, heads, ciphers, userId)
        try environment.write { txn in
            try txn.put(events, key: sequenceKey, value: event)
            try txn.put(index, key: indexKey, value: [])
            try txn.put(heads, key: userId, value: head)
            try txn.put(ciphers, key: cipher.key, value: cipher.value)
        }
    }

    func close() { environment.close() }
}
