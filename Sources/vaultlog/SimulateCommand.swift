import ArgumentParser
import Foundation
import Replay

/// `vaultlog simulate --seeds A..B [--ops N]`: deterministic simulation.
struct Simulate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run seeded random scenarios against the embedded emulator and check the invariants.",
        discussion: """
        Each seed generates users, items (some with a password history), offline periods (up to \
        a day with a failed sync every 30 minutes), edits and password bursts, trash moves, \
        permanent deletes, online operations on items with pending changes, lock/unlock, \
        another device's edits and deletes, server faults (5xx, lost responses on every request \
        type), dead-lettered items edited again and crashes, runs them with a simulated clock, \
        then checks the invariants over the whole run: nothing pending or dead-lettered, no saved \
        version or password typed while pending lost, trashed items in the server's trash, \
        deleted items gone, backups only where the rules ask, no duplicate, verify clean, no \
        plaintext in the store. A failure prints its \
        seed; the same seed replays it exactly (--save writes it as a scenario fixture). \
        Seeds are independent and run --jobs at a time (default: one per core); each seed's run \
        is the same whatever the job count. Exit 1 if any seed fails. Progress on stderr: a \
        redrawn line on a terminal, otherwise one line a minute.

        --concurrent adds 2 to 4 episodes per seed where the library is called from several \
        tasks at once: two or three syncs and resolution runs at once on one shared resolver, a \
        save racing a sync, saves right after the n-th server effect of a resolution, another \
        device's favourite, folder move, restore or re-encryption meeting a pending delete, a \
        save from a stale view, and a cold start offline without session tokens; and checks \
        that no field a save set is lost, that a pending delete another device's change met \
        was dropped, that offline saves are never refused and that the pending-count stream \
        ends at the log's count. Its interleavings are driven by effect indices, but steps run \
        at once may vary in timing: a failing seed replays the same scenario, not always the \
        same interleaving.

        Examples:
          vaultlog simulate --seeds 1..500
          vaultlog simulate --seeds 1..10000 --jobs 2
          vaultlog simulate --seeds 4242 --ops 80 --save seed-4242.json
          vaultlog simulate --seeds 1..200 --concurrent
          vaultlog simulate --scenario seed-4242.json --keep-store /tmp/s4242   # a saved (or cut-down) run, store kept
        """
    )

    @Option(help: ArgumentHelp("A seed or a range A..B (inclusive).", valueName: "A..B"))
    var seeds: String?

    @Option(help: ArgumentHelp("Run this scenario file (one written by --save, perhaps cut down) with the invariants, instead of --seeds.", valueName: "file"))
    var scenario: String?

    @Option(help: ArgumentHelp("With --scenario: leave the device's store in this new directory, to inspect with events, history or verify.", valueName: "dir"))
    var keepStore: String?

    @Option(help: "Random steps per seed before convergence.")
    var ops = 40

    @Option(help: ArgumentHelp("Write the (single) seed's scenario to this file.", valueName: "file"))
    var save: String?

    @Option(help: "Seeds run at the same time (default: the number of cores).")
    var jobs: Int?

    @Flag(help: "Print one JSON object per failing seed, and a summary object.")
    var json = false

    @Flag(help: "Add episodes where the library is called from several tasks at once (see above).")
    var concurrent = false

    func parsedSeeds() throws -> ClosedRange<UInt64> {
        guard let seeds else { throw ValidationError("give --seeds A..B or --scenario FILE") }
        let parts = seeds.components(separatedBy: "..")
        guard (1...2).contains(parts.count), let low = UInt64(parts[0]), let high = UInt64(parts.last!), low <= high else {
            throw ValidationError("--seeds takes a number or a range A..B with A ≤ B, e.g. 1..500")
        }
        return low...high
    }

    func validate() throws {
        if scenario != nil {
            if seeds != nil || save != nil { throw ValidationError("--scenario runs one file: leave out --seeds and --save") }
            return
        }
        if keepStore != nil { throw ValidationError("--keep-store goes with --scenario") }
        let range = try parsedSeeds()
        if save != nil && range.count != 1 { throw ValidationError("--save writes one seed's scenario: give a single seed") }
        if ops < 1 { throw ValidationError("--ops must be at least 1") }
        if let jobs, jobs < 1 { throw ValidationError("--jobs must be at least 1") }
    }

    struct Failure: Encodable { var seed: UInt64; var violations: [String] }
    struct Summary: Encodable { var seeds: Int; var failed: Int; var seconds: Double }

    func run() async throws {
        if let scenario {
            let loaded = try Scenario.load(path: scenario)
            let violations: [String]
            do {
                violations = try await Simulation.run(loaded, keepStoreAt: keepStore)
            } catch {
                violations = ["the run failed: \(error)"]
            }
            if json {
                try Console.json(Failure(seed: loaded.seed ?? 0, violations: violations))
            } else {
                for line in violations { Console.out("  \(line)") }
                Console.out("\(scenario): \(violations.isEmpty ? "passed" : "FAILED (\(violations.count) violation(s))")"
                            + (keepStore.map { "; store kept in \($0)" } ?? ""))
            }
            if !violations.isEmpty { throw ExitCode(ExitStatus.problemsFound.rawValue) }
            return
        }
        let range = try parsedSeeds()
        if let save {
            do {
                try Simulation.scenario(seed: range.lowerBound, operations: ops, concurrent: concurrent).encoded().write(to: URL(fileURLWithPath: save))
            } catch {
                throw CLIError.storage("cannot write \(save): \(error.localizedDescription)")
            }
        }
        let start = Date()
        let progress = ProgressLine("simulating", unit: "seeds", logEvery: 60)
        let failures = await Self.simulate(range, operations: ops, concurrent: concurrent,
                                                 jobs: jobs ?? ProcessInfo.processInfo.activeProcessorCount) { done in
            progress.update(done, of: range.count)
        } found: { failure in
            // Reported at once on stderr as well, so a run that dies part-way (a crash outside
            // VaultLog's code) still leaves every failure it had found.
            Console.note("seed \(failure.seed) failed: \(failure.violations.first ?? "")")
        }
        progress.finish()
        let summary = Summary(seeds: range.count, failed: failures.count, seconds: Date().timeIntervalSince(start))
        if json {
            for failure in failures { try Console.json(failure) }
            try Console.json(summary)
        } else {
            for failure in failures {
                Console.out("seed \(failure.seed) FAILED (replay: vaultlog simulate --seeds \(failure.seed) --ops \(ops)\(concurrent ? " --concurrent" : "")):")
                for line in failure.violations { Console.out("  \(line)") }
            }
            Console.out("\(range.count - failures.count) passed, \(failures.count) failed (\(range.count) seeds, \(ops) ops each, \(Format.decimal(summary.seconds)) s)")
        }
        if !failures.isEmpty { throw ExitCode(ExitStatus.problemsFound.rawValue) }
    }

    /// Runs every seed of `range`, at most `jobs` at a time, and returns the failures in seed
    /// order; `progress` gets the number of seeds finished.
    static func simulate(_ range: ClosedRange<UInt64>, operations: Int, concurrent: Bool = false, jobs: Int,
                         progress: (Int) -> Void, found: (Failure) -> Void = { _ in }) async -> [Failure] {
        await withTaskGroup(of: Failure?.self) { group in
            var next = range.makeIterator()
            func start() -> Bool {
                guard let seed = next.next() else { return false }
                group.addTask {
                    do {
                        let violations = try await Simulation.run(seed: seed, operations: operations, concurrent: concurrent)
                        return violations.isEmpty ? nil : Failure(seed: seed, violations: violations)
                    } catch {
                        return Failure(seed: seed, violations: ["the run failed: \(error)"])
                    }
                }
                return true
            }
            for _ in 0..<jobs where !start() { break }
            var failures: [Failure] = []
            var done = 0
            progress(done)
            while let result = await group.next() {
                done += 1
                progress(done)
                if let result {
                    failures.append(result)
                    found(result)
                }
                _ = start()
            }
            return failures.sorted { $0.seed < $1.seed }
        }
    }
}
