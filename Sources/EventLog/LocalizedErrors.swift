import Foundation

// Apple platforms show `localizedDescription` (alerts, logs); it is the same text as
// `description`: what failed, what it concerns, and what to do.

extension EnvelopeError: LocalizedError {
    public var errorDescription: String? { description }
}

extension EventLogError: LocalizedError {
    public var errorDescription: String? { description }
}
