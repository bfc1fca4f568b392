import Foundation

// Apple platforms show `localizedDescription` (alerts, logs); it is the same text as
// `description`: what failed, what it concerns, and what to do.

extension EnvelopeError: LocalizedError {
    /// The same text as ``EnvelopeError/description``.
    public var errorDescription: String? { description }
}

extension EventLogError: LocalizedError {
    /// The same text as ``EventLogError/description``.
    public var errorDescription: String? { description }
}
