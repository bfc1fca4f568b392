import Foundation

/// An attachment in a scenario, in plaintext: its file name and its contents (text, stored as
/// UTF-8 bytes). An `anotherDeviceAttach` step adds one (encrypted as a Bitwarden client does);
/// a server expectation's `attachments` lists the ones an item must have, decrypted from the
/// server's files.
///
/// ```json
/// {"do": "anotherDeviceAttach", "ref": "bank", "attachment": {"fileName": "scan.pdf", "contents": "the contract"}}
/// ```
public struct ScenarioAttachment: Codable, Sendable, Equatable, Comparable, CustomStringConvertible {
    /// The file name.
    public var fileName: String
    /// The file's contents as text.
    public var contents: String

    /// An attachment named `fileName` holding `contents`.
    public init(fileName: String, contents: String) {
        self.fileName = fileName
        self.contents = contents
    }

    /// By file name, then contents (expectations are compared as sorted lists).
    public static func < (a: ScenarioAttachment, b: ScenarioAttachment) -> Bool {
        (a.fileName, a.contents) < (b.fileName, b.contents)
    }

    /// `scan.pdf="the contract"`.
    public var description: String { "\(fileName)=\(contents.debugDescription)" }
}
