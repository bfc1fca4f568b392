import Foundation

// Apple platforms show `localizedDescription` (alerts, logs); it is the same text as
// `description`: what failed, what it concerns, and what to do.

extension BitwardenAPIError: LocalizedError {
    /// The same text as ``BitwardenAPIError/description``.
    public var errorDescription: String? { description }
}

extension HTTPTransportFailure: LocalizedError {
    /// The same text as ``HTTPTransportFailure/description``.
    public var errorDescription: String? { description }
}
