import Foundation
import Testing

/// The README's embedding example is `Examples/EmbeddingApp/Sources/EmbeddingApp/Example.swift`,
/// which `make example` (part of `make test`) builds as an app that depends on the library
/// products only and runs against the emulator. This test holds the README's copy to that file,
/// so the README can never show code that does not build and run.
@Suite("README example")
struct ReadmeExampleTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test func theReadme_showsExactlyTheExampleAppsCode() throws {
        let example = try String(contentsOf: Self.root.appendingPathComponent("Examples/EmbeddingApp/Sources/EmbeddingApp/Example.swift"),
                                 encoding: .utf8)
        #expect(example.contains("func runEmbeddingExample("), "the example lost its entry point")
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(readme.contains("```swift\n" + example + "```\n"),
                "README.md's embedding example differs from Examples/EmbeddingApp/Sources/EmbeddingApp/Example.swift: copy it over")
        let landing = try String(contentsOf: Self.root.appendingPathComponent("Sources/VaultLogKit/VaultLogKit.docc/VaultLogKit.md"),
                                 encoding: .utf8)
        #expect(landing.contains("```swift\n" + example + "```\n"),
                "VaultLogKit's DocC landing page differs from Examples/EmbeddingApp/Sources/EmbeddingApp/Example.swift: copy it over")
    }
}
