#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes files that hold secrets (passwords, key material, recorded vaults): readable and
/// writable by the owner only (0600) from the moment they exist, whatever the umask, and
/// replaced atomically (a reader sees the old file or the new one, never half of one).
public enum SecretFile {
    /// The permission bits of a secret file.
    public static let mode: mode_t = 0o600

    /// Writes `bytes` to `path`: a new file created 0600 next to it, flushed to disk, then
    /// renamed over `path`. An existing file at `path` keeps its content if anything fails.
    public static func write(_ bytes: [UInt8], to path: String) throws(SecretFileError) {
        let temporary = path + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw SecretFileError(path: path, operation: "create", code: errno) }
        var failed: (String, Int32)?
        // open() applies the umask to the mode; set the bits explicitly (0600 is never wider).
        if fchmod(fd, mode) != 0 { failed = ("set permissions of", errno) }
        var offset = 0
        while failed == nil, offset < bytes.count {
            let written = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return writeChunk(fd, base + offset, raw.count - offset)
            }
            if written < 0 {
                if errno == EINTR { continue }
                failed = ("write", errno)
            } else {
                offset += written
            }
        }
        if failed == nil, fsync(fd) != 0 { failed = ("flush", errno) }
        close(fd)
        if failed == nil, rename(temporary, path) != 0 { failed = ("replace", errno) }
        if let (operation, code) = failed {
            unlink(temporary)
            throw SecretFileError(path: path, operation: operation, code: code)
        }
    }
}

/// write(2), under a name that does not clash with ``SecretFile/write(_:to:)``.
private func writeChunk(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, buffer, count)
}

/// A secret file could not be written; nothing at the path was changed.
public struct SecretFileError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The file that was to be written.
    public let path: String
    /// The system call that failed (`open`, `write`, `fsync`, `rename`...).
    public let operation: String
    /// Its `errno`.
    public let code: Int32

    /// The failed operation, the path, the system's error text and `errno`, and a reminder
    /// that nothing at the path was changed.
    public var description: String {
        "cannot \(operation) \(path): \(String(cString: strerror(code))) (errno \(code)); nothing at that path was changed"
    }
}
