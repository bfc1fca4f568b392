import Foundation

/// A store's files as a machine stop (an OS crash, a power cut) may leave them, for the tests
/// of the commit journal: between two flushes the disk holds, page by page, either the page as
/// flushed or as later written into the page cache, meta pages included. A test copies
/// `data.mdb` right after a flush (`flushed`) and after later commits (`cached`), writes a mix
/// of the two (``disk(flushed:cached:pick:)``) and the journal back in place with
/// ``write(into:journalFile:flushed:cached:journal:pick:)``, once for each of ``picks(using:)``,
/// and names another boot for the directory before opening it.
public enum MachineStop {
    /// `data.mdb`'s page size in these tests.
    public static let pageSize = 4096

    /// `data.mdb` after the stop: page `n` from `cached` where `pick(n)`, else from `flushed`;
    /// a page neither copy holds whole comes from `flushed` when it has it, else is zeros.
    public static func disk(flushed: [UInt8], cached: [UInt8], pick: (Int) -> Bool) -> [UInt8] {
        var disk = [UInt8]()
        let pages = (max(flushed.count, cached.count) + pageSize - 1) / pageSize
        for page in 0..<pages {
            let range = page * pageSize..<(page + 1) * pageSize
            let source = pick(page) ? cached : flushed
            if range.upperBound <= source.count {
                disk += source[range]
            } else if range.upperBound <= flushed.count {
                disk += flushed[range]
            } else {
                disk += [UInt8](repeating: 0, count: pageSize)
            }
        }
        return disk
    }

    /// Writes `bytes` over the file at `path` in place and cuts it there: the file keeps its
    /// inode, which the journal's header names.
    public static func overwrite(_ path: String, with bytes: [UInt8]) throws {
        let fd = open(path, O_WRONLY)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO, userInfo: ["path": path]) }
        defer { close(fd) }
        let written = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        guard written == bytes.count, ftruncate(fd, off_t(bytes.count)) == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO, userInfo: ["path": path])
        }
    }

    /// The file's bytes.
    public static func read(_ path: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path))) }

    /// Writes the disk after the stop into the store in `directory` in place: `data.mdb` mixed
    /// from `flushed` and `cached` as `pick` says (``disk(flushed:cached:pick:)``), and the
    /// journal (`journalFile`) as `journal`. The caller then names another boot for it.
    public static func write(into directory: String, journalFile: String, flushed: [UInt8], cached: [UInt8], journal: [UInt8],
                             pick: (Int) -> Bool) throws {
        try overwrite(directory + "/data.mdb", with: disk(flushed: flushed, cached: cached, pick: pick))
        try overwrite(directory + "/" + journalFile, with: journal)
    }

    /// The trials every machine-stop test runs: none of the later pages reached the disk, all
    /// of them, only the two meta pages, all but the meta pages, and four random mixes drawn
    /// from `rng` (a seeded generator, so a failing mix can be built again).
    public static func picks(using rng: inout some RandomNumberGenerator) -> [(name: String, pick: @Sendable (Int) -> Bool)] {
        let fixed: [(name: String, pick: @Sendable (Int) -> Bool)] = [
            ("nothing", { _ in false }), ("everything", { _ in true }), ("only the meta pages", { $0 < 2 }), ("all but the meta pages", { $0 >= 2 }),
        ]
        var masks: [[Bool]] = []
        for _ in 0..<4 { masks.append((0..<4096).map { _ in rng.next() % 2 == 0 }) }
        return fixed + masks.enumerated().map { trial, mask in ("random mix \(trial)", { mask[$0 % mask.count] }) }
    }
}
