import BitwardenAPI
import EventLog
import Foundation
import LMDB
@_spi(Tools) import OfflineSync
import VaultCrypto

/// Why an ``OfflineVault`` call failed, as an app switches on it. Each case has a text meant
/// for the app's user (`localizedDescription`); ``detail`` keeps the library's own diagnostic
/// for logs and bug reports.
///
/// A cancelled task is never one of these: it throws `CancellationError` (an edit saved
/// before the cancellation stays saved).
///
/// ```swift
/// do {
///     try await vault.sync()
/// } catch let error as VaultError where error.kind == .offline {
///     banner("Offline – your changes are saved on this device")
/// }
/// ```
public struct VaultError: Error, Sendable, Equatable, LocalizedError, CustomStringConvertible {
    /// The causes an app tells apart.
    public enum Kind: Sendable, Equatable {
        /// The server could not be reached. Nothing was lost: saves are kept on the device.
        case offline
        /// The server ended the session (or there is none): log in again online.
        case needsLogin
        /// The master password is wrong.
        case wrongPassword
        /// No account of this email has logged in on this device yet.
        case unknownAccount
        /// The vault is locked: unlock it first.
        case locked
        /// The server refused the request (a validation or permission error); ``VaultError/serverMessage`` says why.
        case rejected
        /// The item changed on the server in a way this call cannot settle (sync, then try again).
        case conflict
        /// The store on this device is damaged (a file changed outside the app).
        case corruptStore
        /// Another process (an app extension) has the store open and the call needs it alone.
        case storeInUse
        /// The call makes no sense for this item (for example saving a deleted item as new).
        case notPossible
    }

    /// The cause.
    public let kind: Kind
    /// The server's own message, for ``Kind/rejected``.
    public let serverMessage: String?
    /// The library's diagnostic: the error it came from, with ids and routes (for logs).
    public let detail: String

    /// Creates an error.
    public init(_ kind: Kind, serverMessage: String? = nil, detail: String) {
        self.kind = kind
        self.serverMessage = serverMessage
        self.detail = detail
    }

    /// The text for the app's user.
    public var errorDescription: String? {
        switch kind {
        case .offline: "The server can't be reached. Your changes are saved on this device and will be sent when it's back."
        case .needsLogin: "Your session has ended. Log in again to sync; your changes on this device are kept."
        case .wrongPassword: "The master password is incorrect."
        case .unknownAccount: "This account hasn't been used on this device yet. Log in online once first."
        case .locked: "The vault is locked. Unlock it first."
        case .rejected: "The server didn't accept the change" + (serverMessage.map { ": \($0)" } ?? ".")
        case .conflict: "This item changed on another device. Sync, then try again."
        case .corruptStore: "The vault data on this device is damaged. Your server copy is safe; contact support before reinstalling."
        case .storeInUse: "The vault is in use by another part of the app. Close it and try again."
        case .notPossible: "That can't be done with this item."
        }
    }

    /// ``detail``, for logs.
    public var description: String { "\(kind): \(detail)" }

    /// The app-facing error of a library error; `CancellationError` and errors that are already
    /// a `VaultError` pass through unchanged.
    static func wrapping(_ error: any Error) -> any Error {
        if error is CancellationError || error is VaultError { return error }
        let detail = "\(error)"
        if let server = error as? any ClassifiedServerError {
            switch server.serverErrorKind {
            case .unavailable: return VaultError(.offline, detail: detail)
            case .loginRequired: return VaultError(.needsLogin, detail: detail)
            case .staleRevision: return VaultError(.conflict, detail: detail)
            case .notFound, .rejected:
                return VaultError(.rejected, serverMessage: (error as? BitwardenAPIError)?.message, detail: detail)
            }
        }
        switch error {
        case VaultCryptoError.authenticationFailed: return VaultError(.wrongPassword, detail: detail)
        case let sync as OfflineSyncError: return VaultError(kind(of: sync), detail: detail)
        case is StoreInUseError: return VaultError(.storeInUse, detail: detail)
        case is EventLogError, is LMDBError, is EnvelopeError: return VaultError(.corruptStore, detail: detail)
        default: return error
        }
    }

    private static func kind(of error: OfflineSyncError) -> Kind {
        switch error {
        case .vaultLocked: .locked
        case .unknownAccount: .unknownAccount
        case .corruptEvent, .corruptLocalCipher, .corruptCheckpoint, .corruptAccount, .compacted, .rolledBack: .corruptStore
        case .pendingChangesNotResolved: .offline
        case .missingCipherId, .notAFileLocation, .storeNotEmpty, .cannotRestore: .notPossible
        case .resolutionLock: .storeInUse
        }
    }
}

/// Runs `body`, turning library errors into ``VaultError``s.
func vaultCall<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch {
        throw VaultError.wrapping(error)
    }
}
