import CLMDB
import Foundation
import Synchronization

/// The store's commit journal, `vaultlog.journal` beside `data.mdb`: how a ``Durability/full``
/// commit is made durable with **one** flush instead of LMDB's two (its data pages, then its
/// meta page).
///
/// A commit appends one record, the transaction's changes as operations
/// (``JournalRecorder``), flushes the journal, and only then commits in LMDB without a flush
/// (`MDB_NOSYNC`): what it acknowledged is on disk in the journal. Every 1,024 records (the
/// environment's `journalCheckpointInterval`), at 4 MiB, and whenever the journal cannot take
/// a commit, a **checkpoint** flushes `data.mdb` (data and meta pages) and starts the journal
/// again. The checkpoint's transaction is the point a recovery restarts from, so its pages
/// must stay as they are on disk: its writer keeps a read transaction open on it (the
/// **pin**), and LMDB never reuses a page a reader may still see.
/// So between checkpoints every commit writes fresh pages (about 10 per save), and a
/// checkpoint flushes them all at once: tens of milliseconds once per 1,024 commits, and up to
/// about 40 MiB of `data.mdb` that is reused after the next checkpoint.
/// Its two meta pages are copied into the journal's header, because later commits overwrite
/// them.
///
/// After an OS crash or power loss (the machine's boot id differs from the header's), an open
/// finds the records written after the checkpoint, puts the checkpoint's meta pages back (its
/// tree is intact, whatever of the later unflushed pages reached the disk) and replays the
/// records. A process crash needs none of this: its commits are in the kernel's page cache.
///
/// File layout (integers little-endian):
/// - bytes 0 and 512: two header slots (``JournalHeader``); the valid one with the higher
///   sequence counts, so a torn header write leaves the other;
/// - from byte 4096: records, each `magic "VLJR"`, body length (`UInt32`), the header's
///   generation (`UInt64`), the transaction id (`UInt64`), the body, CRC-32 of all before it.
///   Records after a checkpoint carry its generation and consecutive transaction ids from the
///   checkpoint's + 1; the first that does not (a stale record, a torn one, one whose commit
///   never happened) ends them.
final class Journal {
    static let fileName = "vaultlog.journal"
    static let recordsStart: Int64 = 4096
    static let recordHeaderSize = 24
    /// A checkpoint is made before a commit when the records would pass this, or when
    /// ``EnvironmentOptions/journalCheckpointInterval`` records follow the last checkpoint.
    static let capacity: Int64 = 4 << 20
    /// Larger transactions get no record: they are committed and flushed by LMDB (a bulk
    /// write pays for its flushes once, not for a copy of everything it wrote). A save's record
    /// is about 2 KiB, a group commit's of 8 saves about 16.
    static let largestRecord = 256 << 10
    /// Written (zero) room kept past the records' end, so an append never extends the file.
    static let writtenSlack: Int64 = 1 << 20
    static let writtenLowWater: Int64 = 256 << 10

    let path: String
    let fd: Int32
    /// What this process knows of the records: valid while the header's generation is
    /// ``generation`` and LMDB's last transaction is ``lastTxn``.
    var generation: UInt64 = 0
    var end: Int64 = recordsStart
    var lastTxn: UInt64 = 0
    var records = 0
    /// The write transaction in progress must make a checkpoint before its record.
    var checkpointDue = false
    /// This process's pin: a read transaction on its checkpoint, and that checkpoint's generation.
    var pin: OpaquePointer?
    var pinGeneration: UInt64 = 0

    /// Opens (creating) the journal of the store in `directory`.
    init(directory: String) throws {
        path = (directory as NSString).appendingPathComponent(Self.fileName)
        let created = access(path, F_OK) != 0
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw LMDBError(code: errno, operation: "open the store's journal \(path) (check the directory's permissions)")
        }
        if created {
            // The new file's name must survive a crash before any commit relies on it.
            _ = fsync(fd)
            let dir = open(directory, O_RDONLY | O_CLOEXEC)
            if dir >= 0 {
                _ = fsync(dir)
                closeFile(dir)
            }
        }
    }

    deinit { closeFile(fd) }

    /// The header as on disk, read by each write transaction: decoded again only when its
    /// bytes changed since the last read (another writer made a checkpoint).
    func currentHeader() -> JournalHeader? {
        let count = headerBytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count == headerBytes.count else { return Self.readHeader(fd: fd) }
        if let cached = decodedHeader, headerBytes == cached.bytes { return cached.header }
        let header = Self.decodeHeader(headerBytes, count: count)
        decodedHeader = (headerBytes, header)
        return header
    }

    private var headerBytes = [UInt8](repeating: 0, count: 2 * JournalHeader.slotSize)
    private var decodedHeader: (bytes: [UInt8], header: JournalHeader?)?

    /// The newest valid header slot, nil when there is none (a new journal).
    static func readHeader(fd: Int32) -> JournalHeader? {
        var slots = [UInt8](repeating: 0, count: 2 * JournalHeader.slotSize)
        let count = slots.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        return decodeHeader(slots, count: count)
    }

    static func decodeHeader(_ slots: [UInt8], count: Int) -> JournalHeader? {
        guard count > 0 else { return nil }
        return slots.withUnsafeBytes { bytes in
            let candidates = (0..<2).compactMap { slot -> JournalHeader? in
                guard (slot + 1) * JournalHeader.slotSize <= count else { return nil }
                return JournalHeader(decoding: UnsafeRawBufferPointer(rebasing: bytes[slot * JournalHeader.slotSize..<(slot + 1) * JournalHeader.slotSize]))
            }
            return candidates.max { $0.sequence < $1.sequence }
        }
    }

    /// Writes `header` into the slot its sequence names and flushes it.
    func writeHeader(_ header: JournalHeader) throws {
        let bytes = header.encoded()
        let offset = off_t(Int(header.sequence % 2) * JournalHeader.slotSize)
        let written = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, offset) }
        guard written == bytes.count, fdatasync(fd) == 0 else {
            throw LMDBError(code: errno, operation: "write the header of the store's journal \(path)")
        }
    }

    /// The records of `header`'s checkpoint, from `start` (the first record after it, or a known
    /// record's end with the id of its transaction as `previous`), stopping before a record of
    /// transaction `limit` or later. Calls `body` with each record's transaction id and body.
    static func scan(fd: Int32, header: JournalHeader, from start: Int64 = recordsStart, previous: UInt64? = nil,
                     before limit: UInt64 = .max,
                     _ body: (UInt64, UnsafeRawBufferPointer) throws -> Void = { _, _ in }) rethrows -> (end: Int64, last: UInt64, count: Int) {
        var offset = start
        var last = previous ?? header.checkpointTxn
        var count = 0
        var fixed = [UInt8](repeating: 0, count: recordHeaderSize)
        while true {
            let got = fixed.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(offset)) }
            guard got == recordHeaderSize else { break }
            let (magic, length, generation, txn) = fixed.withUnsafeBytes {
                (UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)),
                 UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 4, as: UInt32.self)),
                 UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self)),
                 UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: 16, as: UInt64.self)))
            }
            guard magic == recordMagic, generation == header.generation, txn == last &+ 1, txn < limit,
                  Int(length) <= largestRecord else { break }
            var record = [UInt8](repeating: 0, count: recordHeaderSize + Int(length) + 4)
            let read = record.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(offset)) }
            guard read == record.count else { break }
            let valid = record.withUnsafeBytes { bytes in
                CRC32.checksum(UnsafeRawBufferPointer(rebasing: bytes[..<(bytes.count - 4)]))
                    == UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: bytes.count - 4, as: UInt32.self))
            }
            guard valid else { break }
            try record.withUnsafeBytes { try body(txn, UnsafeRawBufferPointer(rebasing: $0[recordHeaderSize..<$0.count - 4])) }
            offset += Int64(record.count)
            last = txn
            count += 1
        }
        return (offset, last, count)
    }

    static let recordMagic: UInt32 = 0x524A_4C56  // "VLJR"

    /// Appends the record of transaction `txn` at ``end`` and flushes it: once this returns,
    /// the commit it stands for survives an OS crash.
    func append(txn: UInt64, body: [UInt8]) throws {
        var record = [UInt8]()
        record.reserveCapacity(Self.recordHeaderSize + body.count + 4)
        func word<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { record.append(contentsOf: $0) } }
        word(Self.recordMagic)
        word(UInt32(body.count))
        word(generation)
        word(txn)
        record.append(contentsOf: body)
        word(record.withUnsafeBytes { CRC32.checksum($0) })
        keepWrittenAhead(of: end + Int64(record.count))
        let written = record.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(end)) }
        guard written == record.count, fdatasync(fd) == 0 else {
            let code = errno
            generation = 0  // what is on disk is unknown: read it again
            throw LMDBError(code: code, operation: "write a commit to the store's journal \(path) (nothing was committed)")
        }
        end += Int64(record.count)
        lastTxn = txn
        records += 1
    }

    /// Writes zeros past `offset` when less than ``writtenLowWater`` of written room is left,
    /// so that a record lands in blocks the file already has (its flush then commits no file
    /// system metadata). No flush of its own; best effort.
    func keepWrittenAhead(of offset: Int64) {
        var file = stat()
        guard fstat(fd, &file) == 0, Int64(file.st_size) < offset + Self.writtenLowWater else { return }
        Environment.writeZeros(fd: fd, from: Int64(file.st_size), to: offset + Self.writtenSlack)
    }

    /// The machine's boot: a journal whose header names another one may have lost pages of
    /// `data.mdb` that were never flushed. Empty where the system does not say.
    static func bootIdentity(of directory: String) -> String {
        if let override = bootOverrides.withLock({ $0[canonical(directory)] }) { return override }
        #if os(Linux)
        return (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        #else
        var time = timeval()
        var size = MemoryLayout<timeval>.size
        guard sysctlbyname("kern.boottime", &time, &size, nil, 0) == 0 else { return "" }
        return "\(time.tv_sec).\(time.tv_usec)"
        #endif
    }

    /// Tests stand for a reboot of one store's machine by naming another boot for its
    /// directory (canonical path): ``nameAnotherBoot(for:)``.
    package static let bootOverrides = Mutex<[String: String]>([:])

    /// Test hook: the machine of the store in `directory` counts as rebooted since (its next
    /// writable open recovers the journal).
    package static func nameAnotherBoot(for directory: String) {
        bootOverrides.withLock { $0[canonical(directory)] = "another boot \(UUID())" }
    }

    private static func canonical(_ directory: String) -> String {
        URL(fileURLWithPath: directory).standardizedFileURL.resolvingSymlinksInPath().path
    }
}

/// One header slot of the journal (512 bytes): the last checkpoint.
package struct JournalHeader: Equatable {
    static let slotSize = 512
    static let metaBytes = 160
    static let magic: UInt64 = 0x3130_4C4E_524A_4C56  // "VLJRNL01"

    /// Larger in each header written; the slot is `sequence % 2`.
    var sequence: UInt64
    /// Random per checkpoint; records carry it.
    var generation: UInt64
    /// The checkpoint's transaction: flushed, pinned, its meta pages below.
    var checkpointTxn: UInt64
    /// `data.mdb`'s inode when the checkpoint was made (a rewritten file is another).
    var dataInode: UInt64
    var pageSize: UInt32
    /// The process holding the pin (0: none, the store was closed).
    var pinPID: Int32
    var boot: String
    /// The first ``metaBytes`` of `data.mdb`'s two meta pages at the checkpoint.
    var meta0: [UInt8]
    var meta1: [UInt8]

    init(sequence: UInt64, generation: UInt64, checkpointTxn: UInt64, dataInode: UInt64, pageSize: UInt32,
         pinPID: Int32, boot: String, meta0: [UInt8], meta1: [UInt8]) {
        self.sequence = sequence
        self.generation = generation
        self.checkpointTxn = checkpointTxn
        self.dataInode = dataInode
        self.pageSize = pageSize
        self.pinPID = pinPID
        self.boot = boot
        self.meta0 = meta0
        self.meta1 = meta1
    }

    /// The first ``metaBytes`` of meta page `index` (0 or 1) of the `data.mdb` open as `fd`.
    static func metaPage(_ index: Int, of fd: Int32, pageSize: UInt32) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: metaBytes)
        _ = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(index * Int(pageSize))) }
        return bytes
    }

    init?(decoding slot: UnsafeRawBufferPointer) {
        let crcOffset = Self.slotSize - 4
        guard slot.count == Self.slotSize,
              UInt64(littleEndian: slot.loadUnaligned(as: UInt64.self)) == Self.magic,
              CRC32.checksum(UnsafeRawBufferPointer(rebasing: slot[..<crcOffset]))
                == UInt32(littleEndian: slot.loadUnaligned(fromByteOffset: crcOffset, as: UInt32.self)) else { return nil }
        func u64(_ at: Int) -> UInt64 { UInt64(littleEndian: slot.loadUnaligned(fromByteOffset: at, as: UInt64.self)) }
        sequence = u64(8)
        generation = u64(16)
        checkpointTxn = u64(24)
        dataInode = u64(32)
        pageSize = UInt32(littleEndian: slot.loadUnaligned(fromByteOffset: 40, as: UInt32.self))
        pinPID = Int32(littleEndian: slot.loadUnaligned(fromByteOffset: 44, as: Int32.self))
        let bootLength = min(Int(slot[48]), 63)
        boot = String(decoding: slot[49..<49 + bootLength], as: UTF8.self)
        meta0 = Array(slot[112..<112 + Self.metaBytes])
        meta1 = Array(slot[272..<272 + Self.metaBytes])
    }

    func encoded() -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: Self.slotSize)
        func put<T: FixedWidthInteger>(_ value: T, at offset: Int) {
            withUnsafeBytes(of: value.littleEndian) { bytes.replaceSubrange(offset..<offset + $0.count, with: $0) }
        }
        put(Self.magic, at: 0)
        put(sequence, at: 8)
        put(generation, at: 16)
        put(checkpointTxn, at: 24)
        put(dataInode, at: 32)
        put(pageSize, at: 40)
        put(pinPID, at: 44)
        let bootBytes = Array(boot.utf8.prefix(63))
        bytes[48] = UInt8(bootBytes.count)
        bytes.replaceSubrange(49..<49 + bootBytes.count, with: bootBytes)
        bytes.replaceSubrange(112..<112 + Self.metaBytes, with: meta0.prefix(Self.metaBytes))
        bytes.replaceSubrange(272..<272 + Self.metaBytes, with: meta1.prefix(Self.metaBytes))
        put(bytes.withUnsafeBytes { CRC32.checksum(UnsafeRawBufferPointer(rebasing: $0[..<(Self.slotSize - 4)])) }, at: Self.slotSize - 4)
        return bytes
    }
}

/// CRC-32 (IEEE 802.3, reflected, as zlib computes it), eight bytes at a time.
enum CRC32 {
    /// `tables[k][b]`: the CRC of byte `b` followed by `k` zero bytes.
    static let tables: [UInt32] = {
        var tables = [UInt32](repeating: 0, count: 8 * 256)
        for index in 0..<256 {
            var crc = UInt32(index)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
            tables[index] = crc
        }
        for k in 1..<8 {
            for index in 0..<256 {
                let previous = tables[(k - 1) * 256 + index]
                tables[k * 256 + index] = (previous >> 8) ^ tables[Int(previous & 0xFF)]
            }
        }
        return tables
    }()

    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        tables.withUnsafeBufferPointer { t in
            var offset = 0
            while offset + 8 <= bytes.count {
                let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) ^ UInt64(crc)
                crc = t[7 * 256 + Int(word & 0xFF)] ^ t[6 * 256 + Int((word >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((word >> 16) & 0xFF)] ^ t[4 * 256 + Int((word >> 24) & 0xFF)]
                    ^ t[3 * 256 + Int((word >> 32) & 0xFF)] ^ t[2 * 256 + Int((word >> 40) & 0xFF)]
                    ^ t[1 * 256 + Int((word >> 48) & 0xFF)] ^ t[Int(word >> 56)]
                offset += 8
            }
            while offset < bytes.count {
                crc = t[Int((crc ^ UInt32(bytes[offset])) & 0xFF)] ^ (crc >> 8)
                offset += 1
            }
        }
        return crc ^ 0xFFFF_FFFF
    }
}
