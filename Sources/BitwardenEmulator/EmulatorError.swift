import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import VaultCrypto
import VaultModel
import _CryptoExtras
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Errors from the emulator's Swift API.
public enum EmulatorError: Error, Equatable, CustomStringConvertible {
    /// ``BitwardenEmulator/start(host:port:)`` was called while running.
    case alreadyRunning
    /// The server stopped before it was listening.
    case stoppedBeforeListening
    /// An account with this email exists.
    case accountExists(String)
    /// No cipher has this id.
    case unknownCipher(String)
    /// An argument is invalid; the message says which and why.
    case invalidArgument(String)
    /// The state file at the path could not be used.
    case stateFile(String, String)

    /// What went wrong and, where it helps, what to do about it.
    public var description: String {
        switch self {
        case .alreadyRunning: "the emulator is already running; call stop() first"
        case .stoppedBeforeListening: "the emulator stopped before it started listening"
        case .accountExists(let email): "an account with email \(email) already exists; pick another email"
        case .unknownCipher(let id): "no cipher with id \(id) on the emulator"
        case .invalidArgument(let message): message
        case .stateFile(let path, let reason): "state file \(path): \(reason)"
        }
    }
}
