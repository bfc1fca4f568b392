import Foundation
import Testing

/// The master-password prompt at a real terminal: `script` gives the command a pseudo-terminal;
/// the password is typed only once the prompt is shown, and must not appear in what the
/// terminal displays.
@Suite("vaultlog password prompt")
struct PromptTests {
    let fixture = StoreFixture.shared

    @Test func atATerminal_thePasswordIsAskedFor_andNotEchoed() throws {
        let binary = try #require(CLI.binary)
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/script"), "util-linux's script is needed")
        let command = [binary, "pending", fixture.store, "--email", StoreFixture.email].map(shellQuoted).joined(separator: " ")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        process.arguments = ["-qec", command, "/dev/null"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        try process.run()

        var seen = Data()
        let deadline = Date().addingTimeInterval(30)
        while !String(decoding: seen, as: UTF8.self).contains("Master password for"), Date() < deadline {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen.append(chunk)
        }
        #expect(String(decoding: seen, as: UTF8.self).contains("Master password for \(StoreFixture.email): "), "\(String(decoding: seen, as: UTF8.self))")
        input.fileHandleForWriting.write(Data((StoreFixture.password + "\n").utf8))
        seen.append(output.fileHandleForReading.readDataToEndOfFile())
        process.waitUntilExit()
        let screen = String(decoding: seen, as: UTF8.self)
        #expect(process.terminationStatus == 0, "\(screen)")
        #expect(screen.contains("server-bank  update  \"Bank\""), "\(screen)")
        #expect(!screen.contains(StoreFixture.password), "the typed password was echoed: \(screen)")
    }

    private func shellQuoted(_ word: String) -> String { "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}
