import Testing
import Foundation
import VaultCrypto
@testable import EventLog
import VaultLogTestSupport

/// Bytes of the environment files, and positions of envelopes inside `data.mdb`.
func findAll(_ needle: [UInt8], in haystack: [UInt8]) -> [Int] {
    guard !needle.isEmpty, haystack.count >= needle.count else { return [] }
    var hits: [Int] = []
    let first = needle[0]
    var i = 0
    while i <= haystack.count - needle.count {
        if haystack[i] == first && haystack[i..<i + needle.count].elementsEqual(needle) { hits.append(i) }
        i += 1
    }
    return hits
}

@Suite struct TamperAndPlaintextTests {
    /// Header positions: version, sequence, recordedAt, event type, user id, cipher id;
    /// body positions: IV, event MAC, body MAC, first and last ciphertext byte (format 3).
    static let positions: [(String, @Sendable (Int, Int) -> Int)] = [
        ("sequence", { _, _ in 9 }), ("recordedAt", { _, _ in 15 }), ("eventType", { _, _ in 19 }),
        ("userId", { _, _ in 22 }), ("cipherId", { h, _ in h - 2 }),
        ("iv", { h, _ in h + 3 }), ("mac", { h, _ in h + 16 + 5 }), ("bodyMAC", { h, _ in h + 48 + 5 }),
        ("ciphertext.first", { h, _ in h + 64 }),
        ("ciphertext.last", { _, n in n - 1 }), ("version", { _, _ in 0 }), ("headerLength", { _, _ in 1 }),
    ]

    @Test(arguments: 0..<12)
    func flippedByte_isReportedByVerify_andReadFailsClearly(position: Int) throws {
        let (name, offsetOf) = Self.positions[position]
        let dir = TemporaryDirectory()
        let target: UInt64 = 13
        var original: [UInt8] = []
        var headerLength = 0
        do {
            let store = try openStore(dir)
            try store.append((0..<30).map { event($0, user: "user-a", cipher: "cipher-\($0)") }, key: keyA)
            let envelope = try #require(try store.envelope(at: target))
            original = envelope.bytes
            headerLength = envelope.headerLength
            store.environment.close()
        }
        let url = URL(fileURLWithPath: dir.path + "/data.mdb")
        var file = [UInt8](try Data(contentsOf: url))
        let hits = findAll(original, in: file)
        try #require(hits.count >= 1, "envelope bytes found in data.mdb")
        let offset = offsetOf(headerLength, original.count)
        for hit in hits { file[hit + offset] ^= 0x5A }
        try Data(file).write(to: url)

        let store = try openStore(dir)
        let report = try store.verify(keys: ["user-a": keyA])
        #expect(report.problemSequences.contains(target), "verify names event \(target) after flipping \(name): \(report.problems)")
        #expect(report.problemSequences == [target], "only the tampered event is reported: \(report.problems)")
        #expect {
            let envelope = try store.envelope(at: target)
            _ = try envelope?.open(key: keyA)
        } throws: { error in
            guard let error = error as? EnvelopeError else { return false }
            switch error {
            case .authenticationFailed(let seq), .undecryptable(let seq), .unsupportedVersion(let seq, _): return seq != 0
            case .malformed: return "\(error)".contains("vaultlog verify")
            // A flipped sequence byte: the envelope now claims another sequence than its key.
            case .keyMismatch(let key, _): return key == target
            case .idTooLong: return false
            }
        }
        // Untouched neighbours still read.
        #expect(try store.envelope(at: target + 1)?.open(key: keyA) == event(Int(target), cipher: "cipher-\(target)").body)
    }

    @Test func cleanStore_verifiesClean() throws {
        let dir = TemporaryDirectory()
        let store = try openStore(dir)
        try store.append((0..<300).map { event($0) }, key: keyA)
        try store.saveCheckpoint(userId: "user-a", sequence: 300, payload: [1], key: keyA)
        var progressCalls = 0
        let report = try store.verify(keys: ["user-a": keyA], batchSize: 100) { _, _ in progressCalls += 1 }
        #expect(report.isClean)
        #expect(report.eventsChecked == 300 && report.eventsAuthenticated == 300 && report.checkpointsChecked == 1)
        #expect(progressCalls >= 3)
    }

    @Test func sentinelPlaintext_neverReachesAnyFile() throws {
        let dir = TemporaryDirectory()
        let sentinelPassword = "Sentinel-Password-\(UUID().uuidString)"
        let sentinelName = "Sentinel Bank Login \(UUID().uuidString)"
        do {
            let store = try openStore(dir)
            let events = (0..<500).map { n in
                NewEvent(userId: "user-a", cipherId: "cipher-\(n)", eventType: 2, recordedAtMillis: Int64(n),
                         body: Array("{\"name\":\"\(sentinelName)\",\"login\":{\"password\":\"\(sentinelPassword)\"}}".utf8))
            }
            try store.append(events, key: keyA)
            try store.saveCheckpoint(userId: "user-a", sequence: 500,
                                     payload: Array("{\"pending\":\"\(sentinelPassword)\"}".utf8), key: keyA)
            // The plaintext is really there under the key.
            #expect(try String(decoding: store.envelope(at: 1)!.open(key: keyA), as: UTF8.self).contains(sentinelPassword))
            store.environment.close()
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path)
        #expect(files.contains("data.mdb"))
        for file in files {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dir.path + "/" + file)))
            #expect(findAll(Array(sentinelPassword.utf8), in: bytes).isEmpty, "\(file) contains the password")
            #expect(findAll(Array(sentinelName.utf8), in: bytes).isEmpty, "\(file) contains the item name")
            #expect(findAll(Array("Sentinel".utf8), in: bytes).isEmpty, "\(file) contains a sentinel fragment")
        }
    }
}
