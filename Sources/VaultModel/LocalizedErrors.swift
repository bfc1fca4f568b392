import Foundation
import VaultJSON

// Apple platforms show `localizedDescription` (alerts, logs); it is the same text as
// `description`: what failed, what it concerns, and what to do.

extension VaultModelError: LocalizedError {
    /// The same text as `description`.
    public var errorDescription: String? { description }
}

extension JSONParseError: LocalizedError {
    /// The same text as `description`.
    public var errorDescription: String? { description }
}
