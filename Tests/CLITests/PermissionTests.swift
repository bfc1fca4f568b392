import Foundation
import Testing
import VaultLogTestSupport

/// A store in a directory the user cannot write (a copy from another account, a read-only
/// mount) or cannot read at all. CI runs as root, whom permissions do not stop, so the binary
/// runs as `nobody` through `setpriv` there; as any other user it runs directly.
@Suite struct PermissionTests {
    /// Runs `vaultlog arguments…` as a user without write access to root's files.
    static func runUnprivileged(_ arguments: [String]) throws -> RunResult {
        guard getuid() == 0 else { return try CLI.run(arguments) }
        let binary = try #require(CLI.binary)
        // setpriv runs the binary as nobody; CLI.run runs whatever binary it is given.
        return try CLI.run(via: "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", binary] + arguments)
    }

    static var canDropPrivileges: Bool {
        getuid() != 0 || FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
    }

    static func digest(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    /// Makes `path` and everything in it readable by all and writable by the owner only.
    static func readOnlyForOthers(_ paths: String...) throws {
        for path in paths {
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
            for name in try FileManager.default.contentsOfDirectory(atPath: path) {
                try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: (path as NSString).appendingPathComponent(name))
            }
        }
    }

    @Test(.enabled(if: canDropPrivileges))
    func readOnlyDirectory_readingCommandsWork_writingIsRefused_andNothingChanges() throws {
        let fixture = StoreFixture.shared
        let dir = TemporaryDirectory("vaultlog-readonly", create: true)
        let store = dir.file("store")
        try fixture.copyStore(to: store)
        // Build lock.mdb as its owner would have it, then hand the directory to nobody read-only.
        #expect(try CLI.run(["info", store]).status == 0)
        let keyFile = dir.file("user-a.key")
        try FileManager.default.copyItem(atPath: fixture.userKeyFile, toPath: keyFile)
        try Self.readOnlyForOthers(dir.path, store)
        let data = (store as NSString).appendingPathComponent("data.mdb")
        let before = try Self.digest(data)

        for command in [["info", store], ["pending", store], ["verify", store, "--user-key-file", keyFile, "--user", "user-a"],
                        ["events", store, "--user-key-file", keyFile, "--user", "user-a"]] {
            let result = try Self.runUnprivileged(command)
            #expect(result.status == 0, "\(command.first!) on a read-only directory: \(result)")
        }
        let write = try Self.runUnprivileged(["stress-writer", store, "--user-key-file", keyFile, "--user", "user-a", "--operations", "1"])
        #expect(write.status == 4, "\(write)")
        #expect(write.stderr.contains(store) && write.stderr.contains("cannot write the store's directory"), "\(write.stderr)")
        #expect(try Self.digest(data) == before, "data.mdb unchanged")
    }

    @Test(.enabled(if: canDropPrivileges))
    func unreadableDirectory_isNamedAsAPermissionProblem() throws {
        let fixture = StoreFixture.shared
        let dir = TemporaryDirectory("vaultlog-unreadable", create: true)
        let store = dir.file("store")
        try fixture.copyStore(to: store)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: dir.path)
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: store)
        let result = try Self.runUnprivileged(["info", store])
        #expect(result.status == 4, "\(result)")
        #expect(result.stderr.contains("\(store): directory not readable by this user"), "\(result.stderr)")
    }
}

@Suite struct ExportPlaintextTests {
    /// An export carries sealed envelopes byte for byte: none of the vault's plaintext (item
    /// names, notes, passwords, usernames, error reasons) appears in it.
    @Test func export_holdsNoPlaintextOfTheVault() throws {
        let fixture = StoreFixture.shared
        let result = try CLI.run(["export", fixture.store])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("server-bank"), "ids are in the headers: the export is not empty")
        for secret in ["hunter2", "hunter3", "mail-pw", "n-pw", "o-pw", "notes of Bank", "\"Mail\"", "\"alice\"", "HTTP 503 Service Unavailable"] {
            #expect(!result.stdout.contains(secret), "'\(secret)' in the export")
        }
    }
}
