import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import VaultLogTestSupport

/// `vaultlog kdf`, Argon2id through `serve` and `demo`, and secrets kept off the command line
/// and out of world-readable files.
@Suite struct KdfAndSecretsCommandTests {
    /// Bitwarden's public KDF vectors, through the binary.
    @Test func kdf_printsBitwardensPublishedKeys() throws {
        let dir = TemporaryDirectory("kdf", create: true)
        let passwordFile = dir.file("pw")
        try "67t9b5g67$%Dh89n\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)

        let pbkdf2 = try CLI.run(["kdf", "--email", "test_key", "--password-file", passwordFile, "--iterations", "10000", "--json"])
        #expect(pbkdf2.status == 0, "\(pbkdf2)")
        let p = try pbkdf2.jsonDocument()
        #expect(p["masterKey"] as? String == "H09o4pZHsVrCUKzREYGEUYqnRaf+lQIbJ8VAKhbDVks=")
        #expect(p["stretchedKey"] as? String == "bx+yLe6YJXKP13xTh63DF46GePk9hKO2ccW9zLwV7WDdf87qZRvKJlY0IhxOHLkQMD1/ptH3wlfoGjBVwfmzmw==")
        #expect(pbkdf2.stderr.contains("weak"), "10,000 iterations is below Bitwarden's recommendation: \(pbkdf2)")

        let argon = try CLI.run(["kdf", "--email", "test_key", "--password-stdin", "--kdf", "argon2id",
                                 "--iterations", "4", "--memory", "32", "--parallelism", "2", "--json"], stdin: "67t9b5g67$%Dh89n\n")
        #expect(argon.status == 0, "\(argon)")
        #expect(try argon.jsonDocument()["masterKey"] as? String == "z/DhsaITo0xiarOv4AkR8BST7S/2lo24PuGD8jM14fI=")

        try "asdfasdf".write(toFile: passwordFile, atomically: true, encoding: .utf8)
        let hash = try CLI.run(["kdf", "--email", "test_salt", "--password-file", passwordFile, "--kdf", "argon2id",
                                "--iterations", "4", "--memory", "32", "--parallelism", "2"])
        #expect(hash.status == 0, "\(hash)")
        #expect(hash.stdout.contains("master password hash: PR6UjYmjmppTYcdyTiNbAhPJuQQOmynKbdEl1oyi/iQ="), "\(hash)")
    }

    @Test(arguments: [
        (["--iterations", "4999"], "PBKDF2 iterations 4999 is outside the accepted range 5000–2000000"),
        (["--iterations", "5000000000"], "PBKDF2 iterations 5000000000 is outside the accepted range 5000–2000000"),
        (["--kdf", "argon2id", "--memory", "2048"], "Argon2id memory 2048 MiB is outside the accepted range 16–1024 MiB"),
        (["--kdf", "argon2id", "--iterations", "11"], "Argon2id iterations 11 is outside the accepted range 2–10"),
        (["--kdf", "argon2id", "--parallelism", "0"], "Argon2id parallelism 0 is outside the accepted range 1–16"),
        (["--memory", "64"], "--memory and --parallelism are Argon2id settings"),
    ])
    func kdf_outOfRange_exitsWithUsageAndTheRange(arguments: [String], message: String) throws {
        let result = try CLI.run(["kdf", "--email", "a@example.com", "--password-stdin"] + arguments, stdin: "pw\n")
        #expect(result.status == 2, "\(result)")
        #expect(result.stderr.contains(message), "\(result)")
        #expect(result.stdout.isEmpty)
    }

    /// `serve` with an Argon2id account: the password comes from the environment, never argv
    /// (so `/proc/PID/cmdline` cannot show it); prelogin reports the Argon2id settings; the
    /// state file is owner-only even under umask 000.
    @Test func serve_argon2idAccount_passwordNotInCmdline_stateFileOwnerOnly() async throws {
        let binary = try #require(CLI.binary, "build the vaultlog binary first (swift build)")
        let dir = TemporaryDirectory("serve-secrets", create: true)
        let statePath = dir.file("state.json")
        let password = "pw-serve-\(UUID().uuidString)"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "umask 000; exec \"$0\" \"$@\"", binary, "serve", "--port", "0", "--json",
                             "--account", "argon@example.com", "--kdf", "argon2id", "--iterations", "2", "--memory", "16",
                             "--parallelism", "1", "--state", statePath]
        process.environment = ProcessInfo.processInfo.environment.merging(["VAULTLOG_PASSWORD": password]) { $1 }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        let line = try #require(CLI.firstLine(of: output, within: 60), "serve printed nothing")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        let identity = try #require((summary["identity"] as? String).flatMap(URL.init(string:)))

        let cmdline = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(process.processIdentifier)/cmdline"))
        #expect(!String(decoding: cmdline, as: UTF8.self).contains(password))
        #expect(String(decoding: cmdline, as: UTF8.self).contains("argon@example.com"), "the cmdline read is the server's")

        var request = URLRequest(url: identity.appendingPathComponent("accounts/prelogin"))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(#"{"email":"argon@example.com"}"#.utf8)
        let (data, _) = try await URLSession.shared.data(for: request)
        let prelogin = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(prelogin["kdf"] as? Int == 1)
        #expect(prelogin["kdfIterations"] as? Int == 2)
        #expect(prelogin["kdfMemory"] as? Int == 16)
        #expect(prelogin["kdfParallelism"] as? Int == 1)

        process.terminate()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: statePath)[.posixPermissions] as? Int)
        #expect(mode & 0o777 == 0o600, "state file mode \(String(mode, radix: 8))")
    }

    @Test func serve_refusesAPasswordOnTheCommandLine_andAShortAdminToken() throws {
        let inline = try CLI.run(["serve", "--account", "a@example.com:hunter2"])
        #expect(inline.status == 2, "\(inline)")
        #expect(inline.stderr.contains("visible to every user in ps"), "\(inline)")
        #expect(!inline.stderr.contains("hunter2"), "the error must not echo the password back")

        let noPassword = try CLI.run(["serve", "--account", "a@example.com"], stdin: "")
        #expect(noPassword.status == 2, "\(noPassword)")
        #expect(noPassword.stderr.contains("VAULTLOG_PASSWORD"), "\(noPassword)")

        let shortToken = try CLI.run(["serve", "--port", "0"], environment: ["VAULTLOG_ADMIN_TOKEN": "short"])
        #expect(shortToken.status == 2, "\(shortToken)")
        #expect(shortToken.stderr.contains("at least 8 characters"), "\(shortToken)")
    }

    /// The emulator speaks plain HTTP: listening where other machines reach it is refused
    /// unless asked for (it used to start on any address it was given).
    @Test(arguments: ["0.0.0.0", "192.168.1.20", "::", "127.0.0.1.example.com"])
    func serve_refusesAnAddressOtherMachinesReach_withoutAllowRemote(host: String) throws {
        let refused = try CLI.run(["serve", "--port", "0", "--host", host])
        #expect(refused.status == 2, "\(refused)")
        #expect(refused.stderr.contains("not a loopback address") && refused.stderr.contains("--allow-remote"), "\(refused)")
    }

    @Test func serve_onALoopbackAddressOtherThan127001_starts() throws {
        let binary = try #require(CLI.binary)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["serve", "--port", "0", "--json", "--host", "127.0.0.2"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() }; process.waitUntilExit() }
        var seen = Data()
        let deadline = Date().addingTimeInterval(60)
        while !String(decoding: seen, as: UTF8.self).contains("127.0.0.2"), Date() < deadline, process.isRunning {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen.append(chunk)
        }
        #expect(String(decoding: seen, as: UTF8.self).contains("127.0.0.2:"), "\(String(decoding: seen, as: UTF8.self))")
    }

    @Test func decrypt_readsTheKeyFromAFile() throws {
        let dir = TemporaryDirectory("decrypt-key", create: true)
        let keyFile = dir.file("key")
        try "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+Pw==\n"
            .write(toFile: keyFile, atomically: true, encoding: .utf8)
        let enc = "2.2NokAMS6llUxk26oueMqrA==|6k0QD71SJLy2WEBDkV4esiTrgkP/z7eoSedSesGLGYE=|PE4sb0jpAwZW+tnyPuW43eeWvSxjvdw3xMJlPGbDlYI="
        let result = try CLI.run(["decrypt", "--key-file", keyFile, enc])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == "Bitwarden SDK test vector\n")
        let missing = try CLI.run(["decrypt", enc])
        #expect(missing.status == 2, "\(missing)")
        #expect(missing.stderr.contains("--key-file"))
        let unreadable = try CLI.run(["decrypt", "--key-file", dir.file("nope"), enc])
        #expect(unreadable.status == 3, "\(unreadable)")
    }

    @Test func demo_refusesPlainHTTPToAnotherMachine() throws {
        let dir = TemporaryDirectory("demo-http", create: true)
        try "pw".write(toFile: dir.file("pw"), atomically: true, encoding: .utf8)
        let result = try CLI.run(["demo", "--server", "http://vault.example.com", "--email", "a@example.com",
                                  "--password-file", dir.file("pw"), "--dir", dir.file("store")])
        #expect(result.status == 2, "\(result)")
        #expect(result.stderr.contains("--insecure-http"), "\(result)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("store")), "nothing is created before the refusal")
    }

    /// The demo's story on an Argon2id account, under umask 000: the files holding the master
    /// password (the password file, the recorded scenario) are owner-only.
    @Test func demo_onAnArgon2idAccount_writesOwnerOnlySecretFiles() throws {
        let binary = try #require(CLI.binary, "build the vaultlog binary first (swift build)")
        let dir = TemporaryDirectory("demo-argon", create: true)
        let store = dir.file("store"), recorded = dir.file("demo.json")
        let result = try CLI.run(via: "/bin/sh", ["-c", "umask 000; exec \"$0\" \"$@\"", binary, "demo", "--dir", store,
                                                  "--record", recorded, "--kdf", "argon2id", "--iterations", "2", "--memory", "16",
                                                  "--parallelism", "1"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("Argon2id (2 iterations, 16 MiB, parallelism 1)"), "\(result)")
        #expect(result.stdout.contains("Every expectation of the story held"), "\(result)")
        for path in [recorded, store + "-password.txt"] {
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
            #expect(mode & 0o777 == 0o600, "\(path) mode \(String(mode, radix: 8))")
        }
        let scenario = try String(contentsOfFile: recorded, encoding: .utf8)
        #expect(scenario.contains("argon2id"), "the recorded scenario replays on the same kind of account")
        let replay = try CLI.run(["replay", recorded])
        #expect(replay.status == 0, "\(replay)")
        let verify = try CLI.run(["verify", store, "--email", "demo@vaultlog.example", "--password-file", store + "-password.txt"])
        #expect(verify.status == 0, "\(verify)")
    }
}
