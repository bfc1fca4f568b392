import Foundation

/// Reads a text file line by line with bounded memory (`getline`): how `import` and `replay`
/// read an export (`OfflineSync.ExportFormat` parses each line).
final class LineReader {
    private let file: UnsafeMutablePointer<FILE>
    private var buffer: UnsafeMutablePointer<CChar>?
    private var capacity = 0
    /// 1-based number of the line last returned.
    private(set) var lineNumber = 0

    init(path: String) throws {
        guard let file = fopen(path, "r") else {
            throw CLIError.storage("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        self.file = file
    }

    deinit {
        free(buffer)
        fclose(file)
    }

    /// The next line without its newline, or nil at the end of the file.
    func next() -> String? {
        let length = getline(&buffer, &capacity, file)
        guard length >= 0, let buffer else { return nil }
        lineNumber += 1
        var bytes = UnsafeRawBufferPointer(start: buffer, count: length)
        if bytes.last == UInt8(ascii: "\n") { bytes = UnsafeRawBufferPointer(rebasing: bytes.dropLast()) }
        if bytes.last == UInt8(ascii: "\r") { bytes = UnsafeRawBufferPointer(rebasing: bytes.dropLast()) }
        return String(decoding: bytes, as: UTF8.self)
    }
}
