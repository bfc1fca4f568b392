import ArgumentParser
import EventLog
import Foundation
import LMDB
@_spi(Tools) import OfflineSync
import VaultCrypto

/// The exit codes every subcommand uses (listed in `Docs/CLI.md`).
enum ExitStatus: Int32, Sendable {
    /// Success; for `verify`, the store is intact.
    case ok = 0
    /// The command ran and found problems (e.g. `verify` found a damaged event).
    case problemsFound = 1
    /// Wrong invocation: unknown option, missing argument, conflicting options.
    case usage = 2
    /// No usable key: wrong master password, unknown account, wrong user key, MAC failure.
    case key = 3
    /// The store (or a file) cannot be read or written, or is corrupt.
    case storage = 4
    /// Stopped by Ctrl-C (SIGINT) or SIGTERM while writing (export, import); what was being
    /// written was removed. 128 + SIGINT, as shells report an interrupted command.
    case interrupted = 130
}

/// A failure to report to the user: a sentence saying what is wrong and what to do, and the
/// exit code.
struct CLIError: Error, CustomStringConvertible {
    let status: ExitStatus
    let message: String

    init(_ status: ExitStatus, _ message: String) {
        self.status = status
        self.message = message
    }

    var description: String { message }

    static func usage(_ message: String) -> CLIError { CLIError(.usage, message) }
    static func key(_ message: String) -> CLIError { CLIError(.key, message) }
    static func storage(_ message: String) -> CLIError { CLIError(.storage, message) }

    /// Maps a library error to a message and exit code. `storePath` names the store the
    /// command was working on, so LMDB failures can name its `data.mdb`.
    static func classify(_ error: any Error, storePath: String?) -> CLIError {
        let dataFile = storePath.map { ($0 as NSString).appendingPathComponent("data.mdb") } ?? "data.mdb"
        switch error {
        case let error as CLIError:
            return error
        case let error as ValidationError:
            return .usage(error.message)
        case let error as EventLogError:
            switch error {
            case .storage(_, let lmdb):
                return lmdbError(lmdb, dataFile: dataFile)
            case .olderStoreFormat:
                return .storage("\(error)")
            case .newerStoreFormat, .corruptMetadata, .checkpoint, .headRecord, .snapshot, .sequenceSpaceExhausted, .chainBroken:
                return .storage("\(dataFile): \(error)")
            }
        case let error as LMDBError:
            return lmdbError(error, dataFile: dataFile)
        case let error as StoreInUseError:
            return .storage("\(error)")
        case let error as EnvelopeError:
            return .storage("\(dataFile): \(error)")
        case let error as OfflineSyncError:
            switch error {
            case .vaultLocked, .unknownAccount: return .key("\(error)")
            case .compacted, .cannotRestore: return .usage("\(error)")
            case .corruptEvent, .missingCipherId, .corruptLocalCipher, .corruptCheckpoint, .corruptAccount,
                 .pendingChangesNotResolved, .notAFileLocation, .storeNotEmpty, .resolutionLock, .rolledBack:
                return .storage("\(dataFile): \(error)")
            }
        case let error as VaultCryptoError:
            return .key("\(error)")
        default:
            return .storage("\(error)")
        }
    }

    private static func lmdbError(_ error: LMDBError, dataFile: String) -> CLIError {
        if error.isCorrupted, let range = error.operation.range(of: "data.mdb is truncated") {
            let detail = error.operation[range.lowerBound...].dropLast(error.operation.hasSuffix(")") ? 1 : 0)
            return .storage("\(dataFile): \(detail); the copy is incomplete: restore it from a backup (nothing was read or changed)")
        }
        if error.isInvalidFile || error.isCorrupted {
            return .storage("\(dataFile): not a readable VaultLog store (\(error.message)); the file is corrupt or not a store: restore it from a backup")
        }
        if error.code == EACCES || error.code == EROFS || error.code == EPERM {
            let directory = (dataFile as NSString).deletingLastPathComponent
            return .storage("\(directory): \(error.message) (\(error.operation)); this user cannot write the store's directory: run as its owner, or copy the store somewhere writable (nothing was changed)")
        }
        if error.code == -30798 /* MDB_NOTFOUND: a database of the store is missing */ {
            return .storage("\(dataFile): not a VaultLog store (\(error.operation): a database is missing)")
        }
        return .storage("\(dataFile): \(error)")
    }
}

/// Runs a subcommand's work: prints any failure as one `error:` line on stderr and turns it
/// into its documented exit code, so exit codes do not depend on the root command.
func reportingErrors(storePath: String?, _ body: () throws -> Void) throws {
    do {
        try body()
    } catch let exit as ExitCode {
        throw exit
    } catch {
        throw CLIError.classify(error, storePath: storePath).reported()
    }
}

extension CLIError {
    /// Prints `error: MESSAGE` on stderr and returns the exit code to end with.
    func reported() -> ExitCode {
        Console.error("error: \(message)")
        return ExitCode(status.rawValue)
    }
}

/// ``reportingErrors(storePath:_:)`` for async work.
func reportingErrorsAsync(storePath: String?, _ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let exit as ExitCode {
        throw exit
    } catch {
        throw CLIError.classify(error, storePath: storePath).reported()
    }
}

extension AsyncParsableCommand {
    /// `main()` with the exit codes of `Docs/CLI.md`: argument-parser reports usage errors
    /// with 64 (`EX_USAGE`); vaultlog documents 2. A ``CLIError`` exits with its own status.
    /// Everything else is as `main()` does it.
    static func mainWithDocumentedExitCodes() async -> Never {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            terminate(0)
        } catch let failure as CLIError {
            // A command that threw its documented failure without `reportingErrors`: the same
            // message form and its documented exit code, never argument-parser's generic 1.
            terminate(failure.reported().rawValue)
        } catch {
            let code = exitCode(for: error)
            let message = fullMessage(for: error)
            if !message.isEmpty {
                if code.isSuccess { print(message) } else { Console.error(message) }
            }
            terminate(code == .validationFailure ? ExitStatus.usage.rawValue : code.rawValue)
        }
    }
}

/// The C `exit`, named apart from `ParsableCommand.exit(withError:)`.
private func terminate(_ status: Int32) -> Never {
    exit(status)
}
