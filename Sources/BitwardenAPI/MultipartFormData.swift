import Foundation

/// A `multipart/form-data` body (RFC 7578), as the attachment uploads send it: text fields and
/// one file field, binary-safe. The boundary is random and checked against the content, so it
/// never occurs inside a part.
///
/// ```swift
/// var form = MultipartFormData()
/// form.addField(name: "key", value: wrappedKey.serialized)
/// form.addFile(name: "data", fileName: encryptedName.serialized, bytes: encryptedFile)
/// let (body, contentType) = form.encoded()   // contentType: "multipart/form-data; boundary=…"
/// ```
struct MultipartFormData {
    private enum Part {
        case field(name: String, value: String)
        case file(name: String, fileName: String, bytes: [UInt8])
    }

    private var parts: [Part] = []

    mutating func addField(name: String, value: String) { parts.append(.field(name: name, value: value)) }

    mutating func addFile(name: String, fileName: String, bytes: [UInt8]) {
        parts.append(.file(name: name, fileName: fileName, bytes: bytes))
    }

    /// The body and its `Content-Type` header value.
    func encoded() -> (body: Data, contentType: String) {
        var boundary = Self.newBoundary()
        while contains(boundary) { boundary = Self.newBoundary() }
        var body = Data()
        func append(_ text: String) { body.append(contentsOf: Array(text.utf8)) }
        for part in parts {
            append("--\(boundary)\r\n")
            switch part {
            case .field(let name, let value):
                append("Content-Disposition: form-data; name=\"\(Self.quoted(name))\"\r\n\r\n")
                append(value)
            case .file(let name, let fileName, let bytes):
                append("Content-Disposition: form-data; name=\"\(Self.quoted(name))\"; filename=\"\(Self.quoted(fileName))\"\r\n")
                append("Content-Type: application/octet-stream\r\n\r\n")
                body.append(contentsOf: bytes)
            }
            append("\r\n")
        }
        append("--\(boundary)--\r\n")
        return (body, "multipart/form-data; boundary=\(boundary)")
    }

    private static func newBoundary() -> String {
        "VaultLogBoundary" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
    }

    /// Whether any part's bytes contain `boundary` (then another is drawn).
    private func contains(_ boundary: String) -> Bool {
        let needle = Array(boundary.utf8)
        return parts.contains { part in
            switch part {
            case .field(let name, let value): (name + value).contains(boundary)
            case .file(let name, let fileName, let bytes): (name + fileName).contains(boundary) || Self.find(needle, in: bytes)
            }
        }
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Bool {
        guard haystack.count >= needle.count, let first = needle.first else { return false }
        var i = 0
        while i <= haystack.count - needle.count {
            if haystack[i] == first, haystack[i..<(i + needle.count)].elementsEqual(needle) { return true }
            i += 1
        }
        return false
    }

    /// A header parameter value with quotes, backslashes and line breaks escaped (RFC 7578 §4.2
    /// percent-encodes them, as browsers do).
    private static func quoted(_ value: String) -> String {
        value.replacingOccurrences(of: "\"", with: "%22").replacingOccurrences(of: "\r", with: "%0D")
            .replacingOccurrences(of: "\n", with: "%0A")
    }
}
