import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@_spi(Tools) import OfflineSync
import Testing
import VaultLogTestSupport

/// The binary's story commands: `demo`, `replay`, `simulate`, and their usage errors.
@Suite struct StoryCommandTests {
    static let scenarios = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/scenarios").path

    @Test func demo_tellsTheStory_leavesAVerifiableLog_andRecordsAReplayableScenario() throws {
        let dir = TemporaryDirectory("demo", create: true)
        let store = dir.file("store")
        let recorded = dir.file("demo.json")
        let result = try CLI.run(["demo", "--dir", store, "--record", recorded])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("The log is in \(store)"))
        #expect(result.stdout.contains("was backed up as \"VaultLog demo: Bank - 2026-01-01 00:00:00\""))
        #expect(result.stdout.contains("offline passwords the 5-entry history could not hold"))
        #expect(result.stdout.contains("merged: your change (notes) and the phone's (favorite) touch different parts"))
        #expect(result.stdout.contains("Pending now: 0."))
        #expect(result.stdout.contains("Every expectation of the story held"))
        // The log it leaves verifies with the account's password, as the printed commands say.
        let verify = try CLI.run(["verify", store, "--email", "demo@vaultlog.example", "--password-file", store + "-password.txt"])
        #expect(verify.status == 0, "\(verify)")
        // Every command it prints runs as printed (the binary by its real path, not a bare
        // `vaultlog` that is on no PATH), from another directory.
        let printed = result.stdout.split(separator: "\n").drop { !$0.hasPrefix("The log is in") }.dropFirst()
            .prefix { $0.hasPrefix("  ") }.map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(printed.count == 5, "\(result.stdout)")
        for line in printed {
            #expect(line.hasPrefix("/"), "not an absolute path to the binary: \(line)")
            let run = try CLI.run(via: "/bin/sh", ["-c", "cd / && " + line])
            #expect(run.status == 0, "\(line): \(run)")
        }
        // The recording replays.
        let replay = try CLI.run(["replay", recorded])
        #expect(replay.status == 0, "\(replay)")
        #expect(replay.stdout.contains("1 passed, 0 failed"))
    }

    /// Through a pipe (`vaultlog demo | tee`), each line of the story arrives as it is told: the
    /// first read gets the first line or few, where a block-buffered stdout would hand over the
    /// whole story (shorter than the 4 KiB buffer) at exit, in one piece.
    @Test func demo_throughAPipe_printsEachLineAsItHappens() throws {
        let dir = TemporaryDirectory("demo-pipe", create: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(CLI.binary))
        process.arguments = ["demo", "--dir", dir.file("store")]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let first = output.fileHandleForReading.availableData
        let rest = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(!first.isEmpty && !rest.isEmpty,
                "the first read got all \(first.count + rest.count) bytes at once: stdout is not flushed per line")
    }

    @Test func demo_thatCannotReachItsServer_leavesNoStoreBehind() throws {
        let dir = TemporaryDirectory("demo-unreachable", create: true)
        let password = dir.file("pw")
        try "pw".write(toFile: password, atomically: true, encoding: .utf8)
        let store = dir.file("store")
        let result = try CLI.run(["demo", "--server", "http://127.0.0.1:9", "--email", "a@example.com",
                                  "--password-file", password, "--dir", store])
        #expect(result.status != 0, "\(result)")
        #expect(result.stderr.contains("127.0.0.1:9") || result.stderr.lowercased().contains("reach"), "\(result)")
        #expect(result.stderr.contains("logging in a@example.com"), "a run against a server says what it waits for: \(result)")
        #expect(!FileManager.default.fileExists(atPath: store), "the failed demo left \(store)")
    }

    @Test func demo_refusesAnExistingDirectory_andServerWithoutAccount() throws {
        let dir = TemporaryDirectory("demo-existing", create: true)
        let existing = try CLI.run(["demo", "--dir", dir.path])
        #expect(existing.status == 2, "\(existing)")
        #expect(existing.stderr.contains("already exists"))
        let noAccount = try CLI.run(["demo", "--server", "http://127.0.0.1:9"])
        #expect(noAccount.status == 2, "\(noAccount)")
        #expect(noAccount.stderr.contains("--email"))
    }

    @Test func replay_wholeFixturesDirectory_passesScenariosAndLogs() throws {
        let fixtures = (Self.scenarios as NSString).deletingLastPathComponent
        let result = try CLI.run(["replay", fixtures, "--json"])
        #expect(result.status == 0, "\(result)")
        let rows = try result.jsonLines()
        #expect(rows.count >= 41)
        #expect(rows.allSatisfy { $0["passed"] as? Bool == true })
        #expect(rows.contains { ($0["file"] as? String)?.hasSuffix("format-v1.jsonl") == true })
    }

    @Test func replay_passingScenario_exitsZeroWithTable() throws {
        let result = try CLI.run(["replay", Self.scenarios + "/10-update-conflict-server-newer.json"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("pass"))
        #expect(result.stdout.contains("update-conflict-server-newer"))
    }

    @Test func replay_brokenExpectation_exitsOneWithDiff() throws {
        let dir = TemporaryDirectory("replay-broken", create: true)
        // Break only the expectation: the server item is expected with a password never typed.
        let data = try Data(contentsOf: URL(fileURLWithPath: Self.scenarios + "/06-update-no-conflict.json"))
        var scenario = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        var expect = try #require(scenario["expect"] as? [String: Any])
        expect["server"] = ["alice": [["name": "Bank", "password": "pw-9"]]]
        scenario["expect"] = expect
        let file = dir.file("broken.json")
        try JSONSerialization.data(withJSONObject: scenario).write(to: URL(fileURLWithPath: file))
        let result = try CLI.run(["replay", file])
        #expect(result.status == 1, "\(result)")
        #expect(result.stdout.contains("FAIL"))
        #expect(result.stdout.contains("server.alice: missing    {name=\"Bank\", password=\"pw-9\""))
        #expect(result.stdout.contains("0 passed, 1 failed"))
    }

    @Test func replay_malformedScenario_exitsTwoNamingTheField() throws {
        let dir = TemporaryDirectory("replay-malformed", create: true)
        let file = dir.file("bad.json")
        try #"{"format": 1, "name": "x", "steps": [{"ref": "a"}], "expect": {}}"#.write(toFile: file, atomically: true, encoding: .utf8)
        let result = try CLI.run(["replay", file])
        #expect(result.status == 2, "\(result)")
        #expect(result.stdout.contains("missing field 'do'"))
    }

    @Test func simulate_fewSeeds_passes_andBadRangeIsUsage() throws {
        let result = try CLI.run(["simulate", "--seeds", "1..3", "--json"])
        #expect(result.status == 0, "\(result)")
        let summary = try #require(try result.jsonLines().last)
        #expect(summary["seeds"] as? Int == 3)
        #expect(summary["failed"] as? Int == 0)
        let bad = try CLI.run(["simulate", "--seeds", "9..2"])
        #expect(bad.status == 2, "\(bad)")
    }

    /// Seeds run side by side with --jobs; every seed is still counted once.
    @Test func simulate_jobs_runsEverySeedOnce_andZeroJobsIsUsage() throws {
        let result = try CLI.run(["simulate", "--seeds", "11..15", "--jobs", "3", "--json"])
        #expect(result.status == 0, "\(result)")
        let summary = try #require(try result.jsonLines().last)
        #expect(summary["seeds"] as? Int == 5)
        #expect(summary["failed"] as? Int == 0)
        let zero = try CLI.run(["simulate", "--seeds", "1", "--jobs", "0"])
        #expect(zero.status == 2, "\(zero)")
        #expect(zero.stderr.contains("--jobs must be at least 1"), "\(zero)")
    }
}

/// Damaged stores: a truncated `data.mdb` (which would make LMDB fault) and a zero-filled one.
@Suite struct DamagedStoreTests {
    @Test func truncatedCopy_exits4NamingTheTruncation_zeroFilled_exits4() throws {
        let fixture = StoreFixture.shared
        let dir = TemporaryDirectory("damaged", create: true)
        try fixture.copyStore(to: dir.file("cut"))
        let cut = (dir.file("cut") as NSString).appendingPathComponent("data.mdb")
        let handle = try #require(FileHandle(forWritingAtPath: cut))
        try handle.truncate(atOffset: 16_384)
        try handle.close()
        for command in [["verify"], ["info"], ["events"], ["pending"]] {
            let result = try CLI.run(command + [dir.file("cut")])
            #expect(result.status == 4, "\(command): \(result)")
            #expect(result.stderr.contains("data.mdb is truncated"), "\(command): \(result)")
        }
        try FileManager.default.createDirectory(atPath: dir.file("zero"), withIntermediateDirectories: true)
        try Data(count: 65_536).write(to: URL(fileURLWithPath: (dir.file("zero") as NSString).appendingPathComponent("data.mdb")))
        let zero = try CLI.run(["verify", dir.file("zero")])
        #expect(zero.status == 4, "\(zero)")
        #expect(zero.stderr.contains("not a readable VaultLog store"))
    }
}

/// `vaultlog serve`: prints its URL at once, answers Bitwarden's prelogin, stops on SIGTERM.
@Suite struct ServeCommandTests {
    @Test func serve_printsItsURL_answersPrelogin_andStopsCleanlyOnSIGTERM() async throws {
        let binary = try #require(CLI.binary, "build the vaultlog binary first (swift build)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["serve", "--port", "0", "--account", "serve-test@example.com", "--iterations", "5000", "--json"]
        process.environment = ProcessInfo.processInfo.environment.merging(["VAULTLOG_PASSWORD": "pw-serve"]) { $1 }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        // The summary is one JSON line, flushed at start.
        let line = try #require(CLI.firstLine(of: output, within: 30), "serve printed nothing")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        let identity = try #require((summary["identity"] as? String).flatMap(URL.init(string:)))
        var request = URLRequest(url: identity.appendingPathComponent("accounts/prelogin"))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(#"{"email":"serve-test@example.com"}"#.utf8)
        let (data, response) = try await URLSession.shared.data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let prelogin = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect((prelogin["kdfIterations"] as? Int ?? prelogin["KdfIterations"] as? Int) == 5000)
        process.terminate()   // SIGTERM
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }
}
