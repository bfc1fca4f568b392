import EventLog
import Foundation
import VaultCrypto

/// An export file on disk, checked line by line before anything is imported from it.
///
/// Opening one reads the whole file once: the metadata line, then every envelope line (JSON
/// shape, base64, envelope structure, header fields agreeing with the envelope, strictly
/// increasing sequences) and the event count the metadata announces. The envelopes are not kept
/// in memory; ``forEachEnvelope(_:)`` reads them again, so an export of any size imports in
/// constant memory.
///
/// ```swift
/// let file = try ExportFile(path: "device.vaultlog.jsonl")
/// try store.importEvents(from: file)      // a store without events
/// ```
public struct ExportFile: Sendable {
    /// A line that is not what an export holds there, or a file that cannot be read.
    public struct Problem: Error, Equatable, Sendable, CustomStringConvertible {
        /// The file.
        public let path: String
        /// The 1-based line, or nil when the whole file is the problem (unreadable).
        public let line: Int?
        /// What is wrong, for a person.
        public let reason: String
        /// "PATH: line N: reason".
        public var description: String { "\(path): \(line.map { "line \($0): " } ?? "")\(reason)" }
    }

    /// Where the file is.
    public let path: String
    /// Its first line.
    public let metadata: ExportFormat.Metadata
    /// Every user with an account or an event in the file, sorted.
    public let users: [String]
    /// The file's size in bytes.
    public let fileSize: Int
    /// Each user's sealed head record from the metadata (user id → bytes).
    public let heads: [String: [UInt8]]
    /// The sealed compaction snapshot and per-item records from the metadata.
    public let snapshots: [[UInt8]]

    /// Reads and checks the whole file. `progress` is called with (envelope lines read, lines
    /// the metadata announces) every 4,096 lines and at the end; an error it throws stops the
    /// scan and is rethrown. Throws a ``Problem`` naming the first bad line.
    ///
    /// With `checkingEveryLine: false` only the metadata line is read, and ``users`` lists the
    /// users of its accounts: enough for ``VaultLogStore/importEvents(from:progress:)``, which
    /// checks every line itself while it writes (one pass over the file instead of two).
    public init(path: String, checkingEveryLine: Bool = true,
                progress: ((_ read: Int, _ announced: Int) throws -> Void)? = nil) throws {
        self.path = path
        fileSize = ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int) ?? 0
        let reader = try Self.open(path)
        guard let metadata = try reader.withNextLine(limit: Self.maximumMetadataLineBytes, path: path, { line in Result { () throws(ExportFormat.LineError) in
            try ExportFormat.metadata(line: String(decoding: line, as: UTF8.self))
        } }) else { throw Problem(path: path, line: 1, reason: "the file is empty") }
        do {
            self.metadata = try metadata.get()
        } catch {
            throw Problem(path: path, line: 1, reason: error.reason)
        }
        for account in self.metadata.accounts {
            do {
                try account.kdf.validate()
            } catch {
                throw Problem(path: path, line: 1, reason: "the stored account \(account.email) has KDF settings no client accepts (\(error))")
            }
        }
        var heads: [String: [UInt8]] = [:]
        for (user, text) in self.metadata.heads ?? [:] {
            guard let bytes = Base64.decode(text) else { throw Problem(path: path, line: 1, reason: "the head record of user \(user) is not base64") }
            heads[user] = bytes
        }
        self.heads = heads
        var snapshots: [[UInt8]] = []
        for (n, text) in (self.metadata.snapshots ?? []).enumerated() {
            guard let bytes = Base64.decode(text) else { throw Problem(path: path, line: 1, reason: "snapshot record \(n + 1) is not base64") }
            snapshots.append(bytes)
        }
        self.snapshots = snapshots

        guard checkingEveryLine else {
            users = Set(self.metadata.accounts.map(\.userId)).sorted()
            return
        }
        let announced = self.metadata.eventCount
        var users = Set(self.metadata.accounts.map(\.userId))
        var count = 0
        try Self.walk(reader, path: path, metadata: self.metadata) { envelope, _ in
            count += 1
            users.insert(envelope.header.userId)
            if count % 4096 == 0 { try progress?(count, announced) }
        }
        try progress?(count, announced)
        self.users = users.sorted()
    }

    /// Every envelope in file order with its line number, each line checked as when the file
    /// was opened (sequences increasing, the announced count and last sequence at the end).
    /// The file is read again, so a file changed since it was opened fails here with the same
    /// kind of ``Problem``, after `body` has seen the lines before the bad one.
    public func forEachEnvelope(_ body: (Envelope, Int) throws -> Void) throws {
        let reader = try Self.open(path)
        _ = try reader.withNextLine(limit: Self.maximumMetadataLineBytes, path: path) { _ in () }
        try Self.walk(reader, path: path, metadata: metadata, body)
    }

    /// The envelope lines after the metadata line, checked one by one and as a whole.
    private static func walk(_ reader: ExportLineReader, path: String, metadata: ExportFormat.Metadata,
                             _ body: (Envelope, Int) throws -> Void) throws {
        var previous: UInt64 = 0
        var count = 0
        try forEachEnvelope(reader, path: path) { envelope, line in
            let sequence = envelope.header.sequence
            guard sequence <= Self.maximumSequence else {
                throw Problem(path: path, line: line, reason: "sequence \(sequence) is beyond \(Self.maximumSequence), more than any store reaches: "
                    + "the file was made by hand or damaged (a store that took it would have no sequence left for new events)")
            }
            guard sequence > previous else {
                throw Problem(path: path, line: line, reason: "sequence \(sequence) is not after the previous line's \(previous)")
            }
            previous = sequence
            count += 1
            try body(envelope, line)
        }
        guard count == metadata.eventCount else {
            throw Problem(path: path, line: reader.lineNumber + 1,
                          reason: "the metadata announces \(metadata.eventCount) event(s) but the file has \(count): it is truncated or was edited")
        }
        guard metadata.lastSequence <= maximumSequence else {
            throw Problem(path: path, line: 1, reason: "the metadata's last sequence \(metadata.lastSequence) is beyond \(maximumSequence), "
                + "more than any store reaches: the file was made by hand or damaged")
        }
        // A compaction may have removed the last events: the metadata's last sequence is then
        // the store's high-water mark, after the last line.
        let compacted = !(metadata.snapshots ?? []).isEmpty
        guard count == 0 || previous == metadata.lastSequence || (compacted && previous < metadata.lastSequence) else {
            throw Problem(path: path, line: reader.lineNumber, reason: "the last sequence is \(previous), the metadata says \(metadata.lastSequence)")
        }
    }

    /// The MAC check of every envelope of one user (a wrong key fails them all).
    public struct Authentication: Sendable {
        /// Envelopes of the user whose MAC the key confirmed.
        public var passed = 0
        /// Envelopes of the user that fail: line and sequence.
        public var failed: [(line: Int, sequence: UInt64)] = []
    }

    /// Checks the MAC of every envelope of `userId` with its sealing key. `progress` is called
    /// with (lines read, lines in the file) every 4,096 lines.
    public func authenticate(userId: String, key: SealingKey, progress: ((_ read: Int, _ total: Int) throws -> Void)? = nil) throws -> Authentication {
        var result = Authentication()
        var seen = 0
        try forEachEnvelope { envelope, line in
            seen += 1
            if seen % 4096 == 0 { try progress?(seen, metadata.eventCount) }
            guard envelope.header.userId == userId else { return }
            if envelope.authenticate(key: key) { result.passed += 1 } else { result.failed.append((line, envelope.header.sequence)) }
        }
        return result
    }

    /// A map size with room for every envelope of the file and its index entries, so an
    /// import's one transaction never has to grow the map and run again.
    public var suggestedMapSize: Int {
        // Base64 makes the file ~4/3 of the envelopes; index entries and B-tree pages add back
        // less than that. Twice the file size, in whole MiB, leaves room.
        (fileSize * 2 / (1 << 20) + 1) << 20
    }

    /// The longest envelope line read (16 MiB): an event holds one item, whose encrypted fields
    /// Bitwarden caps far below this (notes at 10,000 characters). A longer line is refused
    /// before it is held in memory whole.
    public static let maximumEnvelopeLineBytes = 16 << 20
    /// The longest metadata line read (256 MiB): it carries the sealed compaction snapshots,
    /// which grow with the vault.
    public static let maximumMetadataLineBytes = 256 << 20
    /// The highest sequence an import takes (2^53): a store writing a million events a second
    /// would take 285 years to get there, and a sequence near 2^64 − 1 would leave the store
    /// no room for a new event.
    public static let maximumSequence: UInt64 = 1 << 53

    private static func open(_ path: String) throws(Problem) -> ExportLineReader {
        guard let reader = ExportLineReader(path: path) else {
            throw Problem(path: path, line: nil, reason: "cannot read the file (\(String(cString: strerror(errno))))")
        }
        return reader
    }

    private static func forEachEnvelope(_ reader: ExportLineReader, path: String, _ body: (Envelope, Int) throws -> Void) throws {
        while let parsed = try reader.withNextLine(limit: maximumEnvelopeLineBytes, path: path, { line in
            Result { () throws(ExportFormat.LineError) in try ExportFormat.envelope(lineBytes: line) }
        }) {
            switch parsed {
            case .success(let envelope): try body(envelope, reader.lineNumber)
            case .failure(let error): throw Problem(path: path, line: reader.lineNumber, reason: error.reason)
            }
        }
    }
}

/// Lines of a file read in blocks, handed out as bytes without the line end; a line longer than
/// its limit is refused after reading at most the limit, never held whole.
final class ExportLineReader {
    private let file: UnsafeMutablePointer<FILE>
    /// Bytes read from the file and not yet handed out: `buffer[start..<end]`.
    private var buffer: [UInt8] = []
    private var start = 0
    private var atEnd = false
    /// 1-based number of the line last read.
    private(set) var lineNumber = 0

    /// Bytes read from the file at a time.
    private static let blockSize = 1 << 16

    init?(path: String) {
        guard let file = fopen(path, "r") else { return nil }
        self.file = file
    }

    deinit { fclose(file) }

    /// `body` over the next line's bytes (valid only inside `body`), or nil at the end. A line
    /// of more than `limit` bytes is a ``ExportFile/Problem`` naming it.
    func withNextLine<T>(limit: Int, path: String, _ body: (UnsafeRawBufferPointer) -> T) throws(ExportFile.Problem) -> T? {
        var searched = 0 // bytes after `start` known to hold no line end
        while true {
            if let newline = newlineIndex(from: start + searched) {
                return try hand(start..<newline, next: newline + 1, limit: limit, path: path, body)
            }
            searched = buffer.count - start
            guard searched <= limit else { throw tooLong(limit: limit, path: path) }
            guard !atEnd, fill() else {
                guard start < buffer.count else { return nil }
                return try hand(start..<buffer.count, next: buffer.count, limit: limit, path: path, body)
            }
        }
    }

    private func newlineIndex(from index: Int) -> Int? {
        guard index < buffer.count else { return nil }
        return buffer.withUnsafeBytes { bytes in
            memchr(bytes.baseAddress! + index, Int32(UInt8(ascii: "\n")), bytes.count - index)
                .map { UnsafeRawPointer($0) - bytes.baseAddress! }
        }
    }

    private func hand<T>(_ range: Range<Int>, next: Int, limit: Int, path: String,
                         _ body: (UnsafeRawBufferPointer) -> T) throws(ExportFile.Problem) -> T {
        var range = range
        if range.count > 0, buffer[range.upperBound - 1] == UInt8(ascii: "\r") { range = range.lowerBound..<range.upperBound - 1 }
        guard range.count <= limit else { throw tooLong(limit: limit, path: path) }
        lineNumber += 1
        start = next
        return buffer.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    private func tooLong(limit: Int, path: String) -> ExportFile.Problem {
        ExportFile.Problem(path: path, line: lineNumber + 1,
                           reason: "the line is longer than \(limit >> 20) MiB, more than an export writes there: the file was made by hand or damaged")
    }

    /// Reads the next block behind what is left; false at the end of the file.
    private func fill() -> Bool {
        if start > 0 {
            buffer.removeSubrange(0..<start)
            start = 0
        }
        let old = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: Self.blockSize))
        let read = buffer.withUnsafeMutableBytes { fread($0.baseAddress! + old, 1, Self.blockSize, file) }
        buffer.removeLast(Self.blockSize - read)
        if read == 0 { atEnd = true }
        return read > 0
    }
}
