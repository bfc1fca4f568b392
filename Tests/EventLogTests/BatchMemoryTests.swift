import Testing
import Foundation
import VaultCrypto
@testable import EventLog
import VaultLogTestSupport

/// Batches of 64 events or more are sealed on all cores into a temporary buffer; the buffer's
/// envelopes must be released after they are copied out (they were not: about 2 KB per event
/// stayed allocated, 256 MB over 120,000 events).
@Suite struct BatchMemoryTests {
    /// Anonymous resident memory of this process (heap and private mappings, not the store's
    /// file pages that LMDB's map brings in when the log is read), in bytes: `RssAnon` of
    /// Linux's `/proc/self/status`.
    static func residentBytes() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("RssAnon:") }),
              let kib = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return nil }
        return kib << 10
    }

    @Test(.enabled(if: residentBytes() != nil))
    func largeBatches_keepResidentMemoryFlat() throws {
        let dir = TemporaryDirectory()
        var options = EventLogOptions()
        options.environment.mapSize = 1 << 31
        options.environment.durability = .noSync
        let store = try EventLogStore(path: dir.path, options: options)
        let batch = (0..<256).map { event($0, bodySize: 4096) }
        func appendRounds(_ rounds: Int) throws { for _ in 0..<rounds { try store.append(batch, key: keyA) } }
        try appendRounds(10)   // warm-up: allocator pools, LMDB's dirty-page lists
        let before = try #require(Self.residentBytes())
        // 30,720 events of 4 KB: a leak of the sealed copies keeps about 135 MiB. The bound
        // leaves room for what tests running beside this one allocate (resident memory is the
        // whole process's).
        try appendRounds(120)
        let grown = try #require(Self.residentBytes()) - before
        #expect(grown < 48 << 20, "resident memory grew \(grown >> 20) MiB over 30,720 appended events")
    }
}
