import Foundation

// Apple platforms show `localizedDescription` (alerts, logs); it is the same text as
// `description`: what failed, what it concerns, and what to do.

extension OfflineSyncError: LocalizedError {
    /// The same text as ``OfflineSyncError/description``.
    public var errorDescription: String? { description }
}

extension ServerFailure: LocalizedError {
    /// The same text as ``ServerFailure/description``.
    public var errorDescription: String? { description }
}

extension ExportFormat.LineError: LocalizedError {
    /// The same text as ``ExportFormat/LineError/description`` (the line's reason).
    public var errorDescription: String? { description }
}

extension ExportFile.Problem: LocalizedError {
    /// The same text as ``ExportFile/Problem/description`` (path, line and reason).
    public var errorDescription: String? { description }
}
