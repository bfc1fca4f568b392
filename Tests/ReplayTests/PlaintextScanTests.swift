import Foundation
import Testing
@testable import Replay

/// The plaintext scan of invariant 6 (no typed password in any file of the store) finds a
/// password wherever it lies in the file, and only a whole one.
@Suite struct PlaintextScanTests {
    private func found(_ needle: String, in haystack: String) -> Bool {
        Simulation.contains(Data(haystack.utf8), Data(needle.utf8))
    }

    @Test func findsAPasswordAtTheStartInTheMiddleAndAtTheEnd() {
        #expect(found("pw-1", in: "pw-1........"))
        #expect(found("pw-1", in: "....pw-1...."))
        #expect(found("pw-1", in: "........pw-1"))
        #expect(found("pw-1", in: "pw-1"))
    }

    @Test func findsAPasswordAfterPartialMatchesOfItsFirstBytes() {
        #expect(found("ppw", in: "pppppw"))
        #expect(found("pw-12", in: "pw-1 pw-1pw-12"))
    }

    @Test func missesWhatIsNotThere() {
        #expect(!found("pw-1", in: ""))
        #expect(!found("pw-1", in: "pw-"))
        #expect(!found("pw-1", in: "........pw-"))
        #expect(!found("pw-12", in: "pw-1 pw-1"))
    }

    /// A password planted in a store's file is reported by the whole invariant-6 check.
    @Test func aPasswordPlantedInAStoreFile_isAViolation() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("plaintext-scan-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try Simulation.storeViolations(path: dir.path, users: [], typedPasswords: ["sentinel-pw-7"]).isEmpty)
        var bytes = Data(count: 3 << 20)
        bytes.replaceSubrange(2_000_000..<2_000_013, with: Data("sentinel-pw-7".utf8))
        try bytes.write(to: dir.appendingPathComponent("data.mdb-copy"))
        let violations = try Simulation.storeViolations(path: dir.path, users: [], typedPasswords: ["sentinel-pw-7", "sentinel-pw-8"])
        #expect(violations == ["invariant 6: plaintext password sentinel-pw-7 found in data.mdb-copy"])
    }
}
