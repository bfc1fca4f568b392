import Foundation

/// A fresh directory under the system temp dir, removed when released.
final class TemporaryDirectory {
    let path: String

    init(_ name: String = "vaultlog") {
        path = NSTemporaryDirectory() + "/\(name)-\(UUID().uuidString)"
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
