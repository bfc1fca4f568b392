import Foundation

// Apple platforms show `localizedDescription` (alerts, logs); it is the same text as
// `description`: what failed, what it concerns, and what to do.

extension VaultModelError: LocalizedError {
    public var errorDescription: String? { description }
}

extension JSONParseError: LocalizedError {
    public var errorDescription: String? { description }
}
