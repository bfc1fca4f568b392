import Foundation
import Testing

/// The exit-code table of `Docs/CLI.md`, walked: for each documented code, commands that must
/// end with it, with the message they must print. Every code the table lists has a row here.
@Suite("vaultlog exit codes, as documented")
struct ExitCodeTableTests {
    struct Row: CustomStringConvertible, Sendable {
        let status: Int32
        let arguments: [String]
        /// What stderr (status ≠ 0) must contain. Usage errors (2) found while parsing keep
        /// argument-parser's form (`Error: …` and the usage line); the others are `error: …`.
        let message: String
        var description: String { "\(status): vaultlog \(arguments.joined(separator: " "))" }
    }

    static let fixture = StoreFixture.shared
    static let missing = "/nonexistent-\(UUID().uuidString)"

    static let rows: [Row] = [
        Row(status: 0, arguments: ["info", fixture.store], message: ""),
        Row(status: 0, arguments: ["verify", fixture.store] + fixture.passwordArgs, message: ""),
        Row(status: 1, arguments: ["history", fixture.store, "no-such-item"], message: "no events for item no-such-item"),
        Row(status: 2, arguments: ["events", fixture.store, "--type", "nonsense"], message: "unknown event type 'nonsense'"),
        Row(status: 2, arguments: ["history", fixture.store, "server-"], message: "'server-' matches 3 items"),
        Row(status: 2, arguments: ["demo", "--server", "not-a-url", "--email", "a@example.com", "--password-file", fixture.passwordFile],
            message: "not an http(s) URL"),
        Row(status: 3, arguments: ["pending", fixture.store, "--email", StoreFixture.email, "--password-file", fixture.wrongPasswordFile],
            message: "wrong master password"),
        Row(status: 3, arguments: ["demo", "--server", "http://127.0.0.1:9", "--email", "a@example.com", "--password-file", missing],
            message: "cannot read the password file \(missing)"),
        Row(status: 4, arguments: ["info", missing], message: missing),
        Row(status: 4, arguments: ["replay", missing], message: "no scenario file or directory at \(missing)"),
        Row(status: 4, arguments: ["simulate", "--seeds", "1", "--ops", "5", "--save", missing + "/seed.json"],
            message: "cannot write \(missing)/seed.json"),
    ]

    @Test(arguments: rows)
    func command_exitsWithItsDocumentedCode(row: Row) throws {
        let result = try CLI.run(row.arguments)
        #expect(result.status == row.status, "\(row): \(result)")
        if row.status != 0 {
            #expect(result.stderr.contains(row.message), "\(row): \(result)")
        }
        if row.status > 2 {
            // Not argument-parser's generic "Error: …" with exit 1: vaultlog's own message.
            #expect(result.stderr.contains("error: "), "\(row): \(result)")
        }
    }

    /// The rows cover every code the documentation's table lists, and no other.
    @Test func everyDocumentedCode_hasARow() throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Docs/CLI.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        let section = try #require(text.components(separatedBy: "## Exit codes").dropFirst().first)
        let documented = Set(section.split(separator: "\n").compactMap { line -> Int32? in
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            return line.hasPrefix("|") ? cells.first.flatMap { Int32($0) } : nil
        })
        #expect(documented == [0, 1, 2, 3, 4])
        #expect(Set(Self.rows.map(\.status)) == documented)
    }
}
