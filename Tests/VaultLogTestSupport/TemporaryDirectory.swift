import Foundation

/// A fresh directory path under the system temp dir, removed with everything in it when
/// released. The one temporary directory of every test target (a store, a lock file, a CLI
/// run's files); a test-only module, not a product.
///
/// Set `VAULTLOG_KEEP_TEMP` to keep it, to look at a failing test's store by hand.
///
/// ```swift
/// let dir = TemporaryDirectory("offlinesync")            // nothing made yet: the store makes it
/// let cli = TemporaryDirectory("vaultlog-cli", create: true)
/// let input = cli.file("input.json")
/// ```
public final class TemporaryDirectory: Sendable {
    /// The directory's path (unique: `name` then a UUID).
    public let path: String

    /// A new path named after `name`; `create` makes the directory now (otherwise whatever
    /// is opened there makes it).
    public init(_ name: String = "vaultlog", create: Bool = false) {
        path = (NSTemporaryDirectory() as NSString).appendingPathComponent("\(name)-\(UUID().uuidString)")
        if create {
            do {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            } catch {
                preconditionFailure("cannot make the temporary directory \(path): \(error)")
            }
        }
    }

    /// The path of `name` inside the directory.
    public func file(_ name: String) -> String { (path as NSString).appendingPathComponent(name) }

    deinit {
        if ProcessInfo.processInfo.environment["VAULTLOG_KEEP_TEMP"] == nil { try? FileManager.default.removeItem(atPath: path) }
    }
}
