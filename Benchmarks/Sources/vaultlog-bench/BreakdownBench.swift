import EventLog
import Foundation
import LMDB
import VaultCrypto

/// `vaultlog-bench breakdown [--events N]`: where the sealed append's time goes, one thread:
/// sealing alone, the event puts (`MDB_APPEND`) alone, and the whole append with index entries.
func runBreakdownBench(arguments: [String]) throws {
    let total = arguments.firstIndex(of: "--events").flatMap { Int(arguments[$0 + 1]) } ?? 200_000
    let key = SealingKey(userKey: SymmetricCryptoKey.generate())
    let body = [UInt8](repeating: 0x7B, count: 600)
    let ivs = SystemRandomSource().bytes(16 * total)

    // Headers are built before the clock starts (String formatting is not what is measured).
    let headers = (0..<total).map { i in
        EventHeader(sequence: UInt64(i + 1), userId: "8a1b3c4d-0000-4000-8000-00000000000\(i % 10)",
                    cipherId: "c0ffee00-0000-4000-8000-\(String(format: "%012d", i % 1000))", eventType: 2,
                    recordedAtMillis: 1_700_000_000_000 + Int64(i))
    }
    var start = ContinuousClock.now
    var sealed: [[UInt8]] = []
    sealed.reserveCapacity(total)
    for i in 0..<total {
        sealed.append(try Envelope.seal(header: headers[i], body: body, key: key, iv: ivs[16 * i..<16 * i + 16]))
    }
    let sealSeconds = seconds(ContinuousClock.now - start)

    let dir = NSTemporaryDirectory() + "/vaultlog-breakdown-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: dir) }
    var options = EnvironmentOptions()
    options.mapSize = 1 << 30
    options.maxDatabases = 4
    let environment = try Environment(path: dir, options: options)
    let db = try environment.openDatabase("raw")
    start = ContinuousClock.now
    try environment.write { txn in
        for (i, bytes) in sealed.enumerated() {
            var k = UInt64(i + 1).bigEndian
            try withUnsafeBytes(of: &k) { k in try bytes.withUnsafeBytes { v in try txn.put(db, key: k, value: v, flags: .append) } }
        }
    }
    let putSeconds = seconds(ContinuousClock.now - start)
    environment.close()

    let dir2 = NSTemporaryDirectory() + "/vaultlog-breakdown-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: dir2) }
    var logOptions = EventLogOptions()
    logOptions.environment.mapSize = 1 << 30
    let store = try EventLogStore(path: dir2, options: logOptions)
    let envelopes = try sealed.map { try Envelope(bytes: $0) }
    start = ContinuousClock.now
    try store.write { txn in for envelope in envelopes { try txn.appendSealed(envelope) } }
    let appendSeconds = seconds(ContinuousClock.now - start)

    func perSecond(_ s: Double) -> Int { Int(Double(total) / s) }
    print("""
    {"bench": "breakdown_seal_one_thread", "unit": "events/s", "value": \(perSecond(sealSeconds)), "events": \(total)}
    {"bench": "breakdown_event_puts_only", "unit": "events/s", "value": \(perSecond(putSeconds)), "events": \(total)}
    {"bench": "breakdown_puts_with_index", "unit": "events/s", "value": \(perSecond(appendSeconds)), "events": \(total)}
    """)
}
