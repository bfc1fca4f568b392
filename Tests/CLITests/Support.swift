import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import Testing
import VaultCrypto
import VaultModel
import VaultLogTesting
import VaultLogTestSupport

/// What one run of the binary produced.
struct RunResult: CustomStringConvertible {
    /// The exit status, or the number of the signal that killed the process.
    let status: Int32
    let stdout: String
    let stderr: String
    /// Whether a signal killed the process (then ``status`` is the signal's number).
    var killedBySignal = false

    var description: String {
        (killedBySignal ? "killed by signal \(status)" : "exit \(status)") + "\n--- stdout\n\(stdout)\n--- stderr\n\(stderr)"
    }

    /// stdout as JSON Lines.
    func jsonLines() throws -> [[String: Any]] {
        try stdout.split(separator: "\n").map { line in
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8))
            return try #require(object as? [String: Any], "not a JSON object: \(line)")
        }
    }

    /// stdout as one JSON document.
    func jsonDocument() throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(stdout.utf8))
        return try #require(object as? [String: Any], "not a JSON object: \(stdout)")
    }
}

/// Runs the built `vaultlog` binary.
enum CLI {
    /// The first line a long-running command (`serve --json`) prints on `output`, read until a
    /// newline, end of output or `seconds` pass; nil when it printed nothing.
    static func firstLine(of output: Pipe, within seconds: TimeInterval) -> String? {
        var buffer = Data()
        let deadline = Date().addingTimeInterval(seconds)
        while !buffer.contains(UInt8(ascii: "\n")), Date() < deadline {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            buffer.append(chunk)
        }
        return String(decoding: buffer, as: UTF8.self).split(separator: "\n").first.map(String.init)
    }

    /// The binary: `$VAULTLOG_BIN`, else `vaultlog` beside the test bundle (the build's
    /// products directory), else `.build/debug/vaultlog` of this package.
    static let binary: String? = {
        let fm = FileManager.default
        if let path = ProcessInfo.processInfo.environment["VAULTLOG_BIN"], fm.isExecutableFile(atPath: path) { return path }
        var candidates: [String] = []
        for url in [Bundle.main.executableURL, Bundle.main.bundleURL, URL(fileURLWithPath: CommandLine.arguments[0])].compactMap({ $0 }) {
            var dir = url.deletingLastPathComponent()
            for _ in 0..<4 {
                candidates.append(dir.appendingPathComponent("vaultlog").path)
                dir = dir.deletingLastPathComponent()
            }
        }
        let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        candidates.append(packageRoot.appendingPathComponent(".build/debug/vaultlog").path)
        return candidates.first { fm.isExecutableFile(atPath: $0) && !$0.hasSuffix(".xctest") }
    }()

    /// Runs `vaultlog arguments…` with `stdin` and returns its exit status and output.
    static func run(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:]) throws -> RunResult {
        let binary = try #require(CLI.binary, "the vaultlog binary was not found: build it first with 'swift build --build-tests' (or set VAULTLOG_BIN)")
        return try run(via: binary, arguments, stdin: stdin, environment: environment)
    }

    /// Runs `executable arguments…` (e.g. a wrapper that runs the binary as another user).
    static func run(via executable: String, _ arguments: [String], stdin: String? = nil,
                    environment: [String: String] = [:]) throws -> RunResult {
        let binary = executable
        let dir = TemporaryDirectory("vaultlog-run", create: true)
        let outPath = dir.file("stdout"), errPath = dir.file("stderr"), inPath = dir.file("stdin")
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        _ = FileManager.default.createFile(atPath: inPath, contents: Data((stdin ?? "").utf8))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        process.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: inPath))
        try process.run()
        process.waitUntilExit()
        return RunResult(status: process.terminationStatus,
                         stdout: try String(contentsOfFile: outPath, encoding: .utf8),
                         stderr: try String(contentsOfFile: errPath, encoding: .utf8),
                         killedBySignal: process.terminationReason == .uncaughtSignal)
    }
}

/// A store made with OfflineSync the way an app makes one: a stored account (PBKDF2, 5000
/// iterations) and a history of offline edits and resolver outcomes. Closed after creation, so
/// the binary reads a store no other handle holds.
final class StoreFixture: Sendable {
    static let email = "alice@example.com"
    static let password = "correct horse battery staple"
    static let userA = "user-a"
    static let userB = "user-b"
    static let baseRevision = "2026-01-01T00:00:00.0000000Z"

    let dir = TemporaryDirectory("vaultlog-store", create: true)
    let userKey = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 41))
    let otherUserKey = SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 42))

    var store: String { dir.file("store") }
    var passwordFile: String { dir.file("password.txt") }
    var wrongPasswordFile: String { dir.file("wrong-password.txt") }
    var userKeyFile: String { dir.file("user-a.key") }
    var wrongKeyFile: String { dir.file("wrong.key") }
    /// The arguments that unlock user A with the master password.
    var passwordArgs: [String] { ["--email", Self.email, "--password-file", passwordFile] }

    /// The shared fixture (read-only tests use it concurrently; tests that change a store copy it).
    static let shared: StoreFixture = try! StoreFixture()

    /// Events, in order:
    /// 1 created c-temp ("Mail"), 2 updated server-bank (password changed), 3 updated
    /// server-bank (password changed), 4 softDeleted server-notes, 5 hardDeleted server-old,
    /// 6 resolutionFailed server-bank, 7 createPlanned c-temp, 8 idMapped c-temp → server-mail,
    /// 9 resolved c-temp, 10 created user B's item.
    init() throws {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_767_261_600)) // 2026-01-01 10:00:00 UTC
        var options = VaultLogStoreOptions()
        options.dependencies = .deterministic(seed: 7, clock: clock)
        let store = try VaultLogStore(path: dir.file("store"), options: options)
        defer { store.close() }
        let kdf = KdfConfig.pbkdf2(iterations: 5000)
        let master = try MasterKey.derive(password: Self.password, email: Self.email, kdf: kdf)
        try store.saveAccount(StoredAccount(userId: Self.userA, email: Self.email, kdf: kdf,
                                            protectedUserKey: master.encryptUserKey(userKey, random: SeededRandomSource(seed: 3))))
        store.unlock(userId: Self.userA, userKey: userKey)
        store.unlock(userId: Self.userB, userKey: otherUserKey)
        let random = SeededRandomSource(seed: 11)
        let base = try BitwardenDate(Self.baseRevision)

        func login(_ name: String, _ password: String, id: String, deleted: Bool = false, key: SymmetricCryptoKey? = nil) throws -> Cipher {
            var view = CipherView(type: .login, name: name, notes: "notes of \(name)", id: id,
                                  login: LoginView(username: "alice", password: password))
            if deleted { view.deletedDate = base }
            var cipher = try view.encrypt(userKey: key ?? userKey, random: random)
            cipher.revisionDate = base
            return cipher
        }
        func op(_ user: String, _ id: String, _ type: VaultEventType, _ cipher: Cipher, changed: Bool, based: Bool = true) throws {
            clock.advance(by: 60)
            try store.append(userId: user, cipherId: id, type: type,
                             body: .operation(OperationBody(cipher: cipher, passwordChanged: changed,
                                                            baseRevisionDate: based ? base : nil, at: BitwardenDate(clock.now))))
        }
        /// `body` gets the event's time (one minute after the previous event).
        func outcome(_ id: String, _ type: VaultEventType, _ body: (Date) -> OutcomeBody) throws {
            clock.advance(by: 60)
            try store.append(userId: Self.userA, cipherId: id, type: type, body: .outcome(body(clock.now)))
        }

        try op(Self.userA, "c-temp", .created, login("Mail", "mail-pw", id: "c-temp"), changed: true, based: false)
        try op(Self.userA, "server-bank", .updated, login("Bank", "hunter2", id: "server-bank"), changed: true)
        try op(Self.userA, "server-bank", .updated, login("Bank", "hunter3", id: "server-bank"), changed: true)
        try op(Self.userA, "server-notes", .softDeleted, login("Notes", "n-pw", id: "server-notes", deleted: true), changed: false)
        try op(Self.userA, "server-old", .hardDeleted, login("Old", "o-pw", id: "server-old"), changed: false)
        try outcome("server-bank", .resolutionFailed) { now in
            OutcomeBody(at: BitwardenDate(now), reason: "HTTP 503 Service Unavailable", attempt: 1,
                        nextRetryAt: BitwardenDate(now.addingTimeInterval(300)), deadLetter: false)
        }
        try outcome("c-temp", .createPlanned) { OutcomeBody(at: BitwardenDate($0), reason: "about to create (create)", purpose: .create) }
        try outcome("c-temp", .idMapped) {
            OutcomeBody(at: BitwardenDate($0), serverId: "server-mail", revisionDate: BitwardenDate($0), reason: "create")
        }
        try outcome("c-temp", .resolved) { OutcomeBody(at: BitwardenDate($0), serverId: "server-mail", reason: "create") }
        try op(Self.userB, "b-item", .created, login("Bob's", "b-pw", id: "b-item", key: otherUserKey), changed: true, based: false)

        try Self.password.write(toFile: passwordFile, atomically: true, encoding: .utf8)
        try "not the password\n".write(toFile: wrongPasswordFile, atomically: true, encoding: .utf8)
        try userKey.exportBase64().write(toFile: userKeyFile, atomically: true, encoding: .utf8)
        try SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 99)).exportBase64()
            .write(toFile: wrongKeyFile, atomically: true, encoding: .utf8)
    }

    /// A byte-for-byte copy of the store in `dir` (data.mdb only; LMDB recreates the lock file).
    func copyStore(to dir: String) throws {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: (store as NSString).appendingPathComponent("data.mdb"),
                                         toPath: (dir as NSString).appendingPathComponent("data.mdb"))
    }

    /// Every envelope of a store, read in this process (read-only).
    static func envelopes(of path: String) throws -> [Envelope] {
        var options = EventLogOptions()
        options.environment.readOnly = true
        options.environment.createDirectory = false
        let log = try EventLogStore(path: path, options: options)
        defer { log.environment.close() }
        return try log.envelopes(in: 1...UInt64.max)
    }
}
