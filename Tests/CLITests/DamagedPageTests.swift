import Foundation
import Testing
import VaultLogTesting
import VaultLogTestSupport

/// `verify` on copies of a store whose LMDB page headers are damaged. LMDB trusts those headers
/// (its pages are 4096 bytes, each starting with pgno 8 bytes, pad 2, flags 2, lower 2, upper 2),
/// so reading such a file can crash the reader inside liblmdb; `verify` must report it instead.
@Suite("vaultlog verify on damaged page headers")
struct DamagedPageTests {
    static let pageSize = 4096
    /// Byte offsets of the header fields that are overwritten: flags, lower, upper.
    static let fieldOffsets = [10, 12, 14]

    /// Copies of the fixture store with one to three page header fields overwritten, one per
    /// seed, with a description of the damage.
    static func damagedCopies(_ seeds: ClosedRange<UInt64>, in dir: TemporaryDirectory) throws -> [(seed: UInt64, path: String, damage: String)] {
        let fixture = StoreFixture.shared
        let original = [UInt8](try Data(contentsOf: URL(fileURLWithPath: (fixture.store as NSString).appendingPathComponent("data.mdb"))))
        let pages = Self.treePages(of: original)
        try #require(pages.count >= 4, "the fixture's data.mdb should have branch and leaf pages")
        return try seeds.map { seed in
            var random = SplitMix64(seed: seed)
            var bytes = original
            var damage: [String] = []
            for _ in 0...(random.next() % 3) {
                let page = pages[Int(random.next() % UInt64(pages.count))]
                let offset = Self.fieldOffsets[Int(random.next() % UInt64(Self.fieldOffsets.count))]
                let value = UInt16(truncatingIfNeeded: random.next())
                bytes[page * Self.pageSize + offset] = UInt8(value & 0xFF)
                bytes[page * Self.pageSize + offset + 1] = UInt8(value >> 8)
                damage.append("page \(page) +\(offset) = \(value)")
            }
            let copy = dir.file("seed-\(seed)")
            try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
            try Data(bytes).write(to: URL(fileURLWithPath: (copy as NSString).appendingPathComponent("data.mdb")))
            return (seed, copy, damage.joined(separator: ", "))
        }
    }

    static func printedACrashReport(_ result: RunResult) -> Bool {
        let output = result.stdout + result.stderr
        return output.contains("Registers:") || output.contains("Program crashed") || output.contains("Backtracing")
    }

    @Test func verify_onDamagedPageHeaders_neverCrashes_andSaysWhatItFound() throws {
        let fixture = StoreFixture.shared
        let dir = TemporaryDirectory("damaged-pages", create: true)
        for (seed, copy, damage) in try Self.damagedCopies(1...30, in: dir) {
            let result = try CLI.run(["verify", copy] + (seed.isMultiple(of: 2) ? fixture.passwordArgs : []))
            let context = "seed \(seed) (\(damage)): \(result)"
            #expect(!result.killedBySignal && [0, 1, 4].contains(result.status), "\(context)")
            let said = switch result.status {
            case 0: result.stdout.contains("OK: no problems found")
            case 1: result.stdout.contains("PROBLEMS:")
            default: result.stderr.contains("error: ") && result.stderr.contains("data.mdb")
            }
            #expect(said, "\(context)")
            #expect(!Self.printedACrashReport(result), "a crash report with memory was printed: \(context)")
        }
    }

    /// The other commands read the store in their own process: one that crashes inside LMDB
    /// says so in one line, with exit code 4 and the way to check the store, and prints no
    /// crash report (it printed the registers and the memory they point at).
    @Test func otherCommands_onDamagedPageHeaders_printNoMemory_andPointToVerify() throws {
        let dir = TemporaryDirectory("damaged-pages-others", create: true)
        var crashed = 0
        for (seed, copy, damage) in try Self.damagedCopies(1...30, in: dir) {
            for command in [["info", copy], ["pending", copy], ["events", copy]] {
                let result = try CLI.run(command)
                let context = "\(command[0]) seed \(seed) (\(damage)): \(result)"
                #expect(!Self.printedACrashReport(result), "a crash report with memory was printed: \(context)")
                #expect(!result.killedBySignal && (0...4).contains(result.status), "\(context)")
                if result.stderr.contains("vaultlog crashed") {
                    crashed += 1
                    #expect(result.status == 4 && result.stderr.contains("vaultlog verify"), "\(context)")
                }
            }
        }
        print("damaged page headers: \(crashed) of 90 runs of info, pending and events crashed inside LMDB and said so")
        #expect(crashed > 0, "no copy crashed a command: the test no longer exercises the crash path")
    }

    /// The pages after the two meta pages that carry their own number and a branch or leaf flag
    /// (P_BRANCH 0x01, P_LEAF 0x02): the B-tree pages in use.
    static func treePages(of bytes: [UInt8]) -> [Int] {
        (2..<(bytes.count / pageSize)).filter { page in
            let start = page * pageSize
            let pgno = (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[start + $1]) << (8 * UInt64($1)) }
            let flags = UInt16(bytes[start + 10]) | UInt16(bytes[start + 11]) << 8
            return pgno == UInt64(page) && flags & 0x03 != 0
        }
    }
}
