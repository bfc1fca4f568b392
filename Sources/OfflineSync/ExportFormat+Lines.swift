import EventLog
import Foundation
import VaultCrypto

/// The hot path of an export: envelope lines written and read without `JSONEncoder` /
/// `JSONDecoder`, which cost more than everything else an export or import does per event.
///
/// The writer produces exactly the bytes `ExportFormat.encode(EnvelopeLine(envelope))` would
/// (compact, sorted keys, unescaped slashes; a test holds the two equal), so exports are the
/// same whichever path wrote them. The reader takes the flat object an export holds (eight
/// keys, any order, optional whitespace, strings without escapes) and answers nil for anything
/// else; the caller then parses the line with `JSONDecoder`, which accepts every valid JSON
/// spelling and words the error for a bad one.
extension ExportFormat {
    /// Appends the envelope's line, without the newline.
    public static func appendLine(for envelope: Envelope, to output: inout [UInt8]) {
        let header = envelope.header
        output.append(contentsOf: #"{"cipherId":"#.utf8)
        appendJSONString(header.cipherId, to: &output)
        output.append(contentsOf: #","envelope":""#.utf8)
        Base64.appendEncoded(envelope.bytes, to: &output)
        output.append(contentsOf: #"","eventType":"#.utf8)
        appendDecimal(UInt64(header.eventType), to: &output)
        output.append(contentsOf: #","formatVersion":"#.utf8)
        appendDecimal(UInt64(header.formatVersion), to: &output)
        output.append(contentsOf: #","recordedAtMillis":"#.utf8)
        if header.recordedAtMillis < 0 { output.append(UInt8(ascii: "-")) }
        appendDecimal(header.recordedAtMillis.magnitude, to: &output)
        output.append(contentsOf: #","sequence":"#.utf8)
        appendDecimal(header.sequence, to: &output)
        output.append(contentsOf: #","type":"#.utf8)
        appendJSONString(VaultEventType(rawValue: header.eventType)?.description ?? "unknown(\(header.eventType))", to: &output)
        output.append(contentsOf: #","userId":"#.utf8)
        appendJSONString(header.userId, to: &output)
        output.append(UInt8(ascii: "}"))
    }

    /// A JSON string as `JSONEncoder` writes it with `.withoutEscapingSlashes`: quotes,
    /// backslashes and control characters escaped, everything else as UTF-8.
    static func appendJSONString(_ string: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): output.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): output.append(contentsOf: #"\\"#.utf8)
            case 0x08: output.append(contentsOf: #"\b"#.utf8)
            case 0x0C: output.append(contentsOf: #"\f"#.utf8)
            case 0x0A: output.append(contentsOf: #"\n"#.utf8)
            case 0x0D: output.append(contentsOf: #"\r"#.utf8)
            case 0x09: output.append(contentsOf: #"\t"#.utf8)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                output.append(contentsOf: #"\u00"#.utf8)
                output.append(hex[Int(byte >> 4)])
                output.append(hex[Int(byte & 0xF)])
            default: output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }

    private static func appendDecimal(_ value: UInt64, to output: inout [UInt8]) {
        guard value >= 10 else { output.append(UInt8(ascii: "0") + UInt8(value)); return }
        appendDecimal(value / 10, to: &output)
        output.append(UInt8(ascii: "0") + UInt8(value % 10))
    }

    /// Parses and checks one envelope line given as UTF-8 bytes (no newline): the fast reader
    /// first, `JSONDecoder` when the line is spelled in a way the fast reader does not take.
    public static func envelope(lineBytes bytes: UnsafeRawBufferPointer) throws(LineError) -> Envelope {
        var reader = FlatLineReader(bytes)
        if let (line, decoded) = reader.envelopeLine() { return try checked(line, decoded: decoded) }
        return try envelope(line: String(decoding: bytes, as: UTF8.self))
    }
}

/// Reads the flat JSON object of an envelope line. Every method answers nil on the first
/// byte it does not expect; nothing here reports errors (the `JSONDecoder` path does).
private struct FlatLineReader {
    let bytes: UnsafeRawBufferPointer
    var index = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// The line's fields and its envelope's bytes (base64 decoded straight from the line).
    mutating func envelopeLine() -> (ExportFormat.EnvelopeLine, [UInt8])? {
        var cipherId: String?, envelope: [UInt8]?, type: String?, userId: String?
        var eventType: UInt64?, formatVersion: UInt64?, sequence: UInt64?, recordedAt: Int64?
        guard consume(UInt8(ascii: "{")) else { return nil }
        repeat {
            guard let key = string(), consume(UInt8(ascii: ":")) else { return nil }
            switch key {
            case "cipherId": guard cipherId == nil, let value = string() else { return nil }; cipherId = value
            case "envelope":
                guard envelope == nil, let range = base64Range(),
                      let value = Base64.decode(UnsafeRawBufferPointer(rebasing: bytes[range])) else { return nil }
                envelope = value
            case "type": guard type == nil, let value = string() else { return nil }; type = value
            case "userId": guard userId == nil, let value = string() else { return nil }; userId = value
            case "eventType": guard eventType == nil, let value = unsigned() else { return nil }; eventType = value
            case "formatVersion": guard formatVersion == nil, let value = unsigned() else { return nil }; formatVersion = value
            case "sequence": guard sequence == nil, let value = unsigned() else { return nil }; sequence = value
            case "recordedAtMillis": guard recordedAt == nil, let value = signed() else { return nil }; recordedAt = value
            default: return nil
            }
        } while consume(UInt8(ascii: ","))
        guard consume(UInt8(ascii: "}")) else { return nil }
        skipWhitespace()
        guard index == bytes.count,
              let cipherId, let envelope, let type, let userId, let sequence, let recordedAt,
              let eventType, let eventType16 = UInt16(exactly: eventType),
              let formatVersion, let formatVersion8 = UInt8(exactly: formatVersion) else { return nil }
        let line = ExportFormat.EnvelopeLine(sequence: sequence, formatVersion: formatVersion8, userId: userId, cipherId: cipherId,
                                             eventType: eventType16, type: type, recordedAtMillis: recordedAt, envelope: "")
        return (line, envelope)
    }

    mutating func skipWhitespace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    mutating func consume(_ byte: UInt8) -> Bool {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    /// A string without escapes or control characters.
    mutating func string() -> String? {
        stringRange().map { String(decoding: UnsafeRawBufferPointer(rebasing: bytes[$0]), as: UTF8.self) }
    }

    /// Where the contents of the envelope's string lie: up to the next quote (`memchr`), not
    /// checked here, because base64 decoding refuses every byte a JSON string would escape (a
    /// backslash, a control character), so such a line still falls back to the strict path.
    mutating func base64Range() -> Range<Int>? {
        guard consume(UInt8(ascii: "\"")), let base = bytes.baseAddress else { return nil }
        let start = index
        guard let quote = memchr(base + start, Int32(UInt8(ascii: "\"")), bytes.count - start) else { return nil }
        let end = base.distance(to: UnsafeRawPointer(quote))
        index = end + 1
        return start..<end
    }

    /// Where the contents of a string without escapes or control characters lie in the line
    /// (a plain pointer loop: the envelope's base64 is most of every line).
    mutating func stringRange() -> Range<Int>? {
        guard consume(UInt8(ascii: "\"")), let base = bytes.baseAddress else { return nil }
        let start = index, end = bytes.count
        var i = start
        while i < end {
            let byte = base.load(fromByteOffset: i, as: UInt8.self)
            if byte == UInt8(ascii: "\"") {
                index = i + 1
                return start..<i
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 { return nil }
            i += 1
        }
        return nil
    }

    mutating func unsigned() -> UInt64? {
        skipWhitespace()
        var value: UInt64 = 0
        let start = index
        while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(bytes[index] - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { return nil }
            value = sum
            index += 1
        }
        // JSON has no leading zeros ("01"); leave those to the strict path.
        guard index > start, index - start == 1 || bytes[start] != UInt8(ascii: "0") else { return nil }
        return value
    }

    mutating func signed() -> Int64? {
        skipWhitespace()
        let negative = index < bytes.count && bytes[index] == UInt8(ascii: "-")
        if negative {
            index += 1
            guard index < bytes.count, bytes[index] != 0x20, bytes[index] != 0x09, bytes[index] != 0x0A, bytes[index] != 0x0D else { return nil }
        }
        guard let magnitude = unsigned() else { return nil }
        if negative { return magnitude == UInt64(Int64.max) + 1 ? Int64.min : Int64(exactly: magnitude).map { -$0 } }
        return Int64(exactly: magnitude)
    }
}
