import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import Testing
import VaultCrypto
import VaultLogTesting
import VaultLogTestSupport

/// Long work stopped with Ctrl-C leaves nothing behind and exits 130; its progress line is
/// drawn only on a terminal. The store is large enough (20,000 events) that export and import
/// are still running when the signal arrives.
@Suite("vaultlog export/import: Ctrl-C and progress", .serialized)
struct InterruptionAndProgressTests {
    /// One large store and its export, made once for the suite.
    final class Large: Sendable {
        static let shared = try! Large()
        let dir = TemporaryDirectory("vaultlog-large", create: true)
        var store: String { dir.file("store") }
        var export: String { dir.file("large.jsonl") }

        init() throws {
            try FileManager.default.createDirectory(atPath: dir.path, withIntermediateDirectories: true)
            var options = VaultLogStoreOptions()
            options.eventLog.environment.mapSize = 256 << 20
            let vault = try VaultLogStore(path: store, options: options)
            let log = vault.log
            let key = SealingKey(userKey: SymmetricCryptoKey.generate(using: SeededRandomSource(seed: 7)))
            let body = [UInt8](repeating: 0x7B, count: 600)
            for batch in 0..<20 {
                try log.append((0..<1000).map { i in
                    NewEvent(userId: "user-a", cipherId: "item-\((batch * 1000 + i) % 2000)", eventType: 2,
                             recordedAtMillis: 1_700_000_000_000 + Int64(batch * 1000 + i), body: body)
                }, key: key)
            }
            vault.close()
            let result = try CLI.run(["export", store, "--out", export])
            precondition(result.status == 0, "\(result)")
        }
    }

    /// Starts `vaultlog arguments…`, waits until `path` exists (the command is writing), sends
    /// SIGINT, and returns the exit status and stderr.
    private func interrupt(_ arguments: [String], once path: String) throws -> (status: Int32, stderr: String, interrupted: Bool) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(CLI.binary))
        process.arguments = arguments
        let errors = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        try process.run()
        while process.isRunning && !FileManager.default.fileExists(atPath: path) { usleep(500) }
        let interrupted = process.isRunning
        process.interrupt()
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, stderr, interrupted)
    }

    @Test func export_stoppedByCtrlC_leavesNeitherTheFileNorItsPartial_andExits130() throws {
        let large = Large.shared
        let work = TemporaryDirectory("vaultlog-interrupt", create: true)
        try FileManager.default.createDirectory(atPath: work.path, withIntermediateDirectories: true)
        let out = work.file("out.jsonl")
        let run = try interrupt(["export", large.store, "--out", out], once: out + ".partial")
        try #require(run.interrupted, "the export finished before the signal: make the store larger")
        #expect(run.status == 130, "\(run.stderr)")
        #expect(run.stderr.contains("error: stopped by SIGINT; nothing was left behind"), "\(run.stderr)")
        let left = try FileManager.default.contentsOfDirectory(atPath: work.path)
        #expect(left.isEmpty, "left behind: \(left)")
    }

    @Test func import_stoppedByCtrlC_removesTheStoreItCreated_andExits130() throws {
        let large = Large.shared
        let work = TemporaryDirectory("vaultlog-interrupt", create: true)
        try FileManager.default.createDirectory(atPath: work.path, withIntermediateDirectories: true)
        let target = work.file("copy")
        let run = try interrupt(["import", large.export, target], once: target + "/data.mdb")
        try #require(run.interrupted, "the import finished before the signal: make the store larger")
        #expect(run.status == 130, "\(run.stderr)")
        #expect(!FileManager.default.fileExists(atPath: target), "the new store directory was left behind")
    }

    @Test func progress_isDrawnOnATerminal_andNotIntoAPipe() throws {
        let large = Large.shared
        let work = TemporaryDirectory("vaultlog-progress", create: true)
        try FileManager.default.createDirectory(atPath: work.path, withIntermediateDirectories: true)
        let piped = try CLI.run(["export", large.store, "--out", work.file("piped.jsonl")])
        #expect(piped.status == 0 && !piped.stderr.contains("exporting"), "\(piped)")

        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/script"), "util-linux's script is needed")
        let binary = try #require(CLI.binary)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        process.arguments = ["-qec", "'\(binary)' export '\(large.store)' --out '\(work.file("tty.jsonl"))'", "/dev/null"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = Pipe()
        try process.run()
        let screen = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(screen)")
        #expect(screen.contains("exporting 20000/20000 events (100%)"), "\(screen.suffix(300))")
    }
}
