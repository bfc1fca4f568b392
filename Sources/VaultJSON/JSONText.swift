import Foundation

/// An error in JSON text read by ``JSONValue/init(parsing:)``.
public struct JSONParseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Byte offset where parsing stopped.
    public let offset: Int
    /// What was expected or wrong there.
    public let reason: String

    /// The error as one line: "invalid JSON at byte N: reason".
    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

extension JSONValue {
    /// Nesting deeper than this is refused, so hostile input cannot exhaust the stack.
    public static let maximumNestingDepth = 512

    /// Parses JSON text, keeping object keys in the order they appear (Foundation's
    /// `JSONDecoder` cannot: its keyed containers are unordered). Integers that fit in
    /// `Int64` stay exact. A repeated key keeps its first position and last value.
    ///
    /// ```swift
    /// let value = try JSONValue(parsing: Data(#"{"b":1,"a":2}"#.utf8))
    /// value.objectValue?.keys   // ["b", "a"]
    /// ```
    public init(parsing text: some Collection<UInt8>) throws {
        var parser = JSONTextParser(bytes: Array(text))
        self = try parser.parseDocument()
    }

    /// Compact JSON text with object keys in their stored order and `/` unescaped; the inverse
    /// of ``init(parsing:)`` for compact input.
    public func serializedJSON() throws -> Data {
        var out = [UInt8]()
        try JSONTextWriter.write(self, to: &out)
        return Data(out)
    }
}

private struct JSONTextParser {
    let bytes: [UInt8]
    var index = 0
    var depth = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    func fail(_ reason: String) -> JSONParseError { JSONParseError(offset: index, reason: reason) }

    mutating func parseDocument() throws -> JSONValue {
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw fail("unexpected text after the value") }
        return value
    }

    mutating func skipWhitespace() {
        while index < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[index]) { index += 1 }
    }

    mutating func parseValue() throws -> JSONValue {
        skipWhitespace()
        guard index < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character")
        }
    }

    mutating func literal(_ word: String) throws {
        let expected = Array(word.utf8)
        guard bytes.count - index >= expected.count, Array(bytes[index..<index + expected.count]) == expected else {
            throw fail("expected \(word)")
        }
        index += expected.count
    }

    mutating func enter() throws {
        depth += 1
        guard depth <= JSONValue.maximumNestingDepth else { throw fail("nesting deeper than \(JSONValue.maximumNestingDepth)") }
    }

    mutating func parseObject() throws -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var object = JSONObject()
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(object)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            index += 1
            object[key] = try parseValue()
            skipWhitespace()
            guard index < bytes.count else { throw fail("unterminated object") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(object) }
            throw fail("expected ',' or '}'")
        }
    }

    mutating func parseArray() throws -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            elements.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw fail("unterminated array") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(elements) }
            throw fail("expected ',' or ']'")
        }
    }

    mutating func parseNumber() throws -> JSONValue {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        func digits() throws -> Int {
            let from = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > from else { throw fail("expected a digit") }
            return index - from
        }
        let intStart = index
        let intDigits = try digits()
        if intDigits > 1, bytes[intStart] == UInt8(ascii: "0") { throw fail("leading zero") }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            _ = try digits()
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            _ = try digits()
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger, let integer = Int64(text) { return .integer(integer) }
        guard let double = Double(text), double.isFinite else { throw JSONParseError(offset: start, reason: "number out of range") }
        return .double(double)
    }

    mutating func parseString() throws -> String {
        index += 1
        var out = [UInt8]()
        while true {
            guard index < bytes.count else { throw fail("unterminated string") }
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let string = String(validating: out, as: UTF8.self) else { throw fail("string is not valid UTF-8") }
                return string
            case UInt8(ascii: "\\"):
                if let reason = JSONEscape.decode(bytes, at: &index, end: bytes.count, into: &out) { throw fail(reason) }
            case 0..<0x20:
                throw fail("control character in string")
            default:
                out.append(byte)
            }
        }
    }
}

private enum JSONTextWriter {
    static func write(_ value: JSONValue, to out: inout [UInt8]) throws {
        switch value {
        case .null: out.append(contentsOf: Array("null".utf8))
        case .bool(let bool): out.append(contentsOf: Array((bool ? "true" : "false").utf8))
        case .integer(let integer): out.append(contentsOf: Array(String(integer).utf8))
        case .double(let double):
            guard double.isFinite else {
                throw EncodingError.invalidValue(double, .init(codingPath: [], debugDescription: "JSON has no \(double)"))
            }
            out.append(contentsOf: Array("\(double)".utf8))
        case .string(let string): writeString(string, to: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (offset, element) in elements.enumerated() {
                if offset > 0 { out.append(UInt8(ascii: ",")) }
                try write(element, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            for (offset, pair) in object.enumerated() {
                if offset > 0 { out.append(UInt8(ascii: ",")) }
                writeString(pair.key, to: &out)
                out.append(UInt8(ascii: ":"))
                try write(pair.value, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func writeString(_ string: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// JSON string escapes, decoded the same way by both parsers (``JSONValue/init(parsing:)`` and
/// ``JSONTapeDecoder``).
enum JSONEscape {
    /// Decodes the escape whose letter is at `index` (just after its backslash) as UTF-8 into
    /// `out` and moves `index` past it; returns why it is not a valid escape, or nil. A `\u`
    /// high surrogate must be followed by an escaped low one; a lone surrogate is refused.
    static func decode(_ bytes: [UInt8], at index: inout Int, end: Int, into out: inout [UInt8]) -> String? {
        guard index < end else { return "unterminated escape" }
        let escape = bytes[index]
        index += 1
        switch escape {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            guard var scalar = hex4(bytes, at: index, end: end) else { return "invalid \\u escape" }
            index += 4
            if (0xD800..<0xDC00).contains(scalar) {
                guard end - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u"),
                      let low = hex4(bytes, at: index + 2, end: end), (0xDC00..<0xE000).contains(low) else {
                    return "unpaired surrogate"
                }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                index += 6
            }
            guard let unicode = Unicode.Scalar(scalar) else { return "unpaired surrogate" }
            out.append(contentsOf: String(unicode).utf8)
        default:
            return "invalid escape"
        }
        return nil
    }

    /// Four hex digits at `at` as a number; nil if there are not four.
    static func hex4(_ bytes: [UInt8], at: Int, end: Int) -> UInt32? {
        guard end - at >= 4 else { return nil }
        var value: UInt32 = 0
        for byte in bytes[at..<at + 4] {
            guard let digit = hexDigit(byte) else { return nil }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    /// The value of one hex digit.
    static func hexDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
