import Foundation
@_spi(Tools) import OfflineSync
import Testing
import VaultLogKit

/// The status stream reflects another process's commits: a second process (the `vaultlog`
/// binary's kill-test writer, standing in for an app extension) saves offline edits into the
/// same store, and the app's stream shows the pending count growing to match, without a sync
/// or any call in the app.
@Suite struct TwoProcessStatusTests {
    static let binary: String? = {
        let fm = FileManager.default
        if let path = ProcessInfo.processInfo.environment["VAULTLOG_BIN"], fm.isExecutableFile(atPath: path) { return path }
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("vaultlog").path
            if fm.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let built = root.appendingPathComponent(".build/debug/vaultlog").path
        return fm.isExecutableFile(atPath: built) ? built : nil
    }()

    @Test func statusStream_showsSavesOfAnotherProcess() async throws {
        let binary = try #require(Self.binary, "build the vaultlog binary first (swift build)")
        let h = try await VaultHarness.make()
        let vault = try h.openVault()
        defer { vault.close() }
        let userId = try await vault.logIn(email: h.email, masterPassword: h.password)
        let keyFile = h.dir.path + "/user.key"
        try vault.store.userKey(userId: userId).exportBase64().write(toFile: keyFile, atomically: true, encoding: .utf8)
        let statuses = Collected(vault.statusUpdates())
        #expect(await statuses.wait { $0.first?.pendingCount == 0 })

        let writer = Process()
        writer.executableURL = URL(fileURLWithPath: binary)
        writer.arguments = ["stress-writer", h.dir.path, "--user-key-file", keyFile, "--user", userId, "--seed", "3", "--operations", "6"]
        writer.standardOutput = FileHandle.nullDevice
        try writer.run()
        writer.waitUntilExit()
        #expect(writer.terminationStatus == 0)
        let expected = try vault.store.pendingCount(userId: userId)
        #expect(expected > 0)
        #expect(await statuses.wait { $0.last?.pendingCount == expected }, "\(statuses.values.map(\.pendingCount)) vs \(expected)")
        statuses.stop()
        // Never the same status twice in a row.
        let values = statuses.values
        #expect(zip(values, values.dropFirst()).allSatisfy { $0 != $1 }, "\(values)")
    }
}
