import Foundation
import Testing

/// The master-password prompt at a real terminal: `script` gives the command a pseudo-terminal;
/// the password is typed only once the prompt is shown, and must not appear in what the
/// terminal displays.
@Suite("vaultlog password prompt")
struct PromptTests {
    let fixture = StoreFixture.shared

    @Test func atATerminal_thePasswordIsAskedFor_andNotEchoed() throws {
        let session = try atATerminal(try pendingCommand(), type: StoreFixture.password + "\n")
        #expect(session.status == 0, "\(session.screen)")
        #expect(session.screen.contains("server-bank  update  \"Bank\""), "\(session.screen)")
        #expect(!session.screen.contains(StoreFixture.password), "the typed password was echoed: \(session.screen)")
    }

    /// Ctrl-C at the prompt still ends the command (by SIGINT, exit 130 in the shell), and the
    /// terminal has its echo back: `stty -a` in the same terminal afterwards shows `echo`, not
    /// `-echo`. (The shell's trap keeps it running after the Ctrl-C, so that stty runs.)
    @Test func ctrlCAtThePrompt_endsTheCommand_andTheTerminalEchoesAgain() throws {
        let shell = "trap 'echo [interrupted]' INT; \(try pendingCommand()); echo \"[exit $?]\"; stty -a"
        let session = try atATerminal(shell, type: "\u{03}")
        #expect(session.screen.contains("[exit 130]"), "\(session.screen)")
        let words = session.screen.split(whereSeparator: \.isWhitespace)
        #expect(words.contains("echo") && !words.contains("-echo"), "echo is still off after Ctrl-C: \(session.screen)")
    }

    /// `vaultlog pending` on the fixture with `--email` and no password source: it prompts.
    private func pendingCommand() throws -> String {
        let binary = try #require(CLI.binary)
        return [binary, "pending", fixture.store, "--email", StoreFixture.email].map(shellQuoted).joined(separator: " ")
    }

    /// Runs `shellCommand` in a pseudo-terminal (`script`), waits for the master-password prompt,
    /// types `keys` and returns everything the terminal showed and script's exit status.
    private func atATerminal(_ shellCommand: String, type keys: String) throws -> (screen: String, status: Int32) {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/script"), "util-linux's script is needed")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        process.arguments = ["-qec", shellCommand, "/dev/null"]
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
        input.fileHandleForWriting.write(Data(keys.utf8))
        seen.append(output.fileHandleForReading.readDataToEndOfFile())
        process.waitUntilExit()
        return (String(decoding: seen, as: UTF8.self), process.terminationStatus)
    }

    private func shellQuoted(_ word: String) -> String { "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}
