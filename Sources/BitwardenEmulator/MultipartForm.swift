import Foundation

/// A `multipart/form-data` body (RFC 7578) split into its named parts, for the attachment
/// uploads. Every refusal says what is wrong, so a client's mistake is found from the reply.
struct MultipartForm {
    struct Part {
        /// The `name` of its `Content-Disposition`.
        var name: String
        /// The `filename` of its `Content-Disposition`, if given.
        var fileName: String?
        /// The bytes between the part's headers and the next boundary.
        var body: ArraySlice<UInt8>
    }

    var parts: [Part]

    /// The first part called `name`.
    func part(_ name: String) -> Part? { parts.first { $0.name == name } }

    struct Failure: Error {
        let message: String
    }

    /// The boundary of a `multipart/form-data` content type, or a failure naming what is missing.
    static func boundary(contentType: String?) throws -> String {
        guard let contentType, contentType.lowercased().hasPrefix("multipart/form-data") else {
            throw Failure(message: "the Content-Type is \(contentType.map { "'\($0)'" } ?? "missing"), not multipart/form-data")
        }
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2, pair[0].lowercased() == "boundary" else { continue }
            let value = pair[1].hasPrefix("\"") && pair[1].hasSuffix("\"") && pair[1].count >= 2
                ? String(pair[1].dropFirst().dropLast()) : pair[1]
            guard !value.isEmpty, value.utf8.count <= 70 else {
                throw Failure(message: "the multipart boundary must be 1 to 70 characters")
            }
            return value
        }
        throw Failure(message: "the multipart/form-data Content-Type has no boundary parameter")
    }

    /// Parses `body` with the boundary named in `contentType`.
    init(body: [UInt8], contentType: String?) throws {
        let boundary = try Self.boundary(contentType: contentType)
        let delimiter = Array(("--" + boundary).utf8)
        let crlf: [UInt8] = [13, 10]
        guard var cursor = Self.find(delimiter, in: body, from: 0) else {
            throw Failure(message: "the multipart body has no boundary line '--\(boundary)'")
        }
        var parts: [Part] = []
        while true {
            cursor += delimiter.count
            if body[cursor...].starts(with: [UInt8(ascii: "-"), UInt8(ascii: "-")]) { break }   // the closing delimiter
            guard body[cursor...].starts(with: crlf) else {
                throw Failure(message: "multipart part \(parts.count + 1): the boundary line does not end with CRLF")
            }
            cursor += 2
            guard let headerEnd = Self.find([13, 10, 13, 10], in: body, from: cursor) else {
                throw Failure(message: "multipart part \(parts.count + 1): its headers do not end with an empty line")
            }
            let headers = String(decoding: body[cursor..<headerEnd], as: UTF8.self)
            let start = headerEnd + 4
            guard let next = Self.find(crlf + delimiter, in: body, from: start) else {
                throw Failure(message: "multipart part \(parts.count + 1): no closing boundary '--\(boundary)' after its body")
            }
            parts.append(try Self.part(headers: headers, body: body[start..<next], index: parts.count + 1))
            cursor = next + 2
        }
        self.parts = parts
    }

    private static func part(headers: String, body: ArraySlice<UInt8>, index: Int) throws -> Part {
        for line in headers.split(separator: "\r\n") {
            let field = line.split(separator: ":", maxSplits: 1)
            guard field.count == 2, field[0].trimmingCharacters(in: .whitespaces).lowercased() == "content-disposition" else { continue }
            var name: String?
            var fileName: String?
            for parameter in field[1].split(separator: ";").dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                guard pair.count == 2 else { continue }
                var value = pair[1]
                if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = String(value.dropFirst().dropLast()) }
                switch pair[0].lowercased() {
                case "name": name = value
                case "filename": fileName = value
                default: continue
                }
            }
            guard let name else { throw Failure(message: "multipart part \(index): its Content-Disposition has no name") }
            return Part(name: name, fileName: fileName, body: body)
        }
        throw Failure(message: "multipart part \(index): it has no Content-Disposition header")
    }

    /// The index where `needle` first occurs in `haystack` at or after `from`.
    static func find(_ needle: [UInt8], in haystack: [UInt8], from: Int) -> Int? {
        guard let first = needle.first, haystack.count - from >= needle.count else { return nil }
        let last = haystack.count - needle.count
        return haystack.withUnsafeBufferPointer { hay -> Int? in
            var i = from
            while i <= last {
                if hay[i] == first {
                    var j = 1
                    while j < needle.count, hay[i + j] == needle[j] { j += 1 }
                    if j == needle.count { return i }
                }
                i += 1
            }
            return nil
        }
    }
}
