import Foundation

// Apple platforms show `localizedDescription` (alerts, logs); it is the same text as
// `description`: what failed, what it concerns, and what to do.

extension OfflineSyncError: LocalizedError {
    public var errorDescription: String? { description }
}

extension ServerFailure: LocalizedError {
    public var errorDescription: String? { description }
}

extension ExportFormat.LineError: LocalizedError {
    public var errorDescription: String? { description }
}

extension ExportFile.Problem: LocalizedError {
    public var errorDescription: String? { description }
}
