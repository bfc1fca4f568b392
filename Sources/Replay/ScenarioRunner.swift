import BitwardenAPI
import BitwardenAPINIO
import BitwardenEmulator
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
@_spi(Tools) import OfflineSync
import Synchronization
import VaultCrypto
import VaultModel

/// Runs scenarios against an in-process emulator over loopback HTTP, with a hand-moved clock
/// shared by device and server and seeded ids, IVs and keys: the same scenario gives the same
/// log and outcomes byte for byte (resolution runs at concurrency 1).
///
/// ```swift
/// let outcome = try await ScenarioRunner().run(Scenario.load(path: "Fixtures/scenarios/x.json"))
/// if !outcome.passed { print(outcome.mismatches.joined(separator: "\n")) }
/// ```
public struct ScenarioRunner: Sendable {
    /// Keep the device's store directory after the run (its path is in the outcome).
    public var keepStore = false
    /// Where stores are made (default: the temporary directory).
    public var workDirectory: String?
    /// Where the store goes (default: a new directory under ``workDirectory``).
    public var storePath: String?
    /// The server: the embedded emulator (default; faults available), or any
    /// Bitwarden-compatible server whose accounts already exist (the scenario's users must
    /// match them; `fault` steps are refused).
    public var server: ScenarioServer = .embedded
    /// Leave the embedded emulator running after the run (it is in the outcome).
    public var keepServerRunning = false
    /// Allow a ``ScenarioServer/remote(_:)`` server over plain `http` that is not on loopback.
    public var allowInsecureHTTP = false
    /// Told what the run is doing, as a short phrase ("logging in alice@example.com (two
    /// sessions; each derives the master key)", "step 3 of 27: offline"): for a person
    /// watching a run against a slow server. Nil: nothing is told.
    public var onProgress: (@Sendable (String) -> Void)?
    /// Where the run's components log (default: warnings and worse only, so a replay's output
    /// is its result).
    public var logger: Logger = {
        var logger = Logger(label: "vaultlog.replay")
        logger.logLevel = .warning
        return logger
    }()

    /// A runner with the defaults: the embedded emulator, a temporary store removed after the run,
    /// warnings-only logging.
    public init() {}

    /// Runs `scenario` and compares what happened with its expectations. Throws only when the
    /// scenario cannot be run at all (a bad step, the emulator failing to start).
    public func run(_ scenario: Scenario) async throws -> ScenarioOutcome {
        let run = try await Run(scenario: scenario, runner: self)
        do {
            try await run.perform()
            await run.checkPendingCounts()
            await run.checkAttachmentsOfCopies(when: "at the end")
            let actual = try await run.observe()
            var outcome = ScenarioOutcome(name: scenario.name, mismatches: Self.compare(scenario.expect, actual),
                                          actual: actual, storePath: keepStore ? run.storePath : nil)
            outcome.itemIds = run.itemIds
            outcome.userIds = Dictionary(uniqueKeysWithValues: run.users.map { ($0.ref, $0.userId) })
            outcome.serverURL = run.serverURL
            outcome.journal = run.journal
            outcome.compactedEvents = run.compactedEvents
            outcome.runViolations = run.runViolations
            if keepServerRunning { outcome.runningServer = run.emulator }
            await run.finish(stopServer: !keepServerRunning)
            return outcome
        } catch {
            await run.finish()
            throw error
        }
    }

}

/// Where a scenario runs.
public enum ScenarioServer: Sendable {
    /// The in-process emulator on loopback, with the scenario's clock.
    case embedded
    /// A running Bitwarden-compatible server (self-hosted layout: `URL/api`, `URL/identity`).
    case remote(URL)
}
