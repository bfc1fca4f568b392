import Foundation

/// Writes a tree of ``SortedJSONNode``s as compact JSON, each object's keys sorted by their UTF-8 bytes.
struct SortedJSONWriter {
    let escapesSlashes: Bool
    var out: [UInt8] = []

    init(escapesSlashes: Bool) { self.escapesSlashes = escapesSlashes }

    mutating func write(_ node: SortedJSONNode) throws {
        switch node {
        case .null: out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
        case .bool(let value): value ? out.append(contentsOf: [0x74, 0x72, 0x75, 0x65]) : out.append(contentsOf: [0x66, 0x61, 0x6C, 0x73, 0x65])
        case .int(let value):
            if value < 0 {
                out.append(UInt8(ascii: "-"))
                writeDigits(value.magnitude)
            } else {
                writeDigits(UInt64(value))
            }
        case .uint(let value): writeDigits(value)
        case .double(let value): writeFloat(value.description)
        case .float(let value): writeFloat(value.description)
        case .string(let value): writeString(value)
        case .utf8(let bytes): bytes.withUnsafeBufferPointer { writeString(utf8: $0) }
        case .array(let array):
            out.append(UInt8(ascii: "["))
            for (offset, element) in array.elements.enumerated() {
                if offset > 0 { out.append(UInt8(ascii: ",")) }
                try write(element)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            var first = true
            for entry in Self.sorted(object.entries) {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                writeString(entry.key)
                out.append(UInt8(ascii: ":"))
                try write(entry.value)
            }
            out.append(UInt8(ascii: "}"))
        case .deferred(let encoder):
            try write(encoder.node ?? .object(SortedJSONObject()))
        }
    }

    /// The pairs in key order (UTF-8 bytes), one per key: a repeated key keeps its last value,
    /// spelled as first written (what `JSONEncoder`'s dictionary of pairs does).
    static func sorted(_ entries: [(key: String, value: SortedJSONNode)]) -> [(key: String, value: SortedJSONNode)] {
        guard entries.count > 1 else { return entries }
        var entries = entries
        var (prefixes, ascii) = keyPrefixes(entries)
        if !ascii {
            // Keys equal as Strings but spelled differently are one key: fold them first.
            var firstIndex: [String: Int] = [:]
            var kept: [(key: String, value: SortedJSONNode)] = []
            for entry in entries {
                if let index = firstIndex[entry.key] {
                    kept[index].value = entry.value
                } else {
                    firstIndex[entry.key] = kept.count
                    kept.append(entry)
                }
            }
            entries = kept
            prefixes = keyPrefixes(entries).prefixes
        }
        // Keys compare by their first eight bytes as one integer; only keys that share those
        // compare as strings (for ASCII, `<` on String is byte order).
        let keys = entries
        let order = keys.indices.sorted { a, b in
            if prefixes[a] != prefixes[b] { return prefixes[a] < prefixes[b] }
            let (x, y) = (keys[a].key, keys[b].key)
            if x == y { return a < b }
            return ascii ? x < y : x.utf8.lexicographicallyPrecedes(y.utf8)
        }
        var result: [(key: String, value: SortedJSONNode)] = []
        result.reserveCapacity(keys.count)
        var last = -1
        for index in order {
            if last >= 0, prefixes[last] == prefixes[index], keys[last].key == keys[index].key {
                result[result.count - 1].value = keys[index].value
            } else {
                result.append(keys[index])
            }
            last = index
        }
        return result
    }

    /// Each key's first eight UTF-8 bytes, big-endian in one integer (zero-padded), and whether
    /// every key is ASCII.
    static func keyPrefixes(_ entries: [(key: String, value: SortedJSONNode)]) -> (prefixes: [UInt64], ascii: Bool) {
        var ascii = true
        let prefixes = entries.map { entry -> UInt64 in
            var prefix: UInt64 = 0
            var shift: UInt64 = 56
            var high: UInt8 = 0
            for byte in entry.key.utf8 {
                high |= byte
                if shift <= 56 {
                    prefix |= UInt64(byte) &<< shift
                    shift = shift == 0 ? 64 : shift - 8
                }
            }
            if high >= 0x80 { ascii = false }
            return prefix
        }
        return (prefixes, ascii)
    }

    mutating func writeDigits(_ value: UInt64) {
        if value < 10 {
            out.append(UInt8(truncatingIfNeeded: value) &+ 0x30)
            return
        }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)   // 24 bytes: UInt64.max has 20 digits
        var count = 0
        var rest = value
        withUnsafeMutableBytes(of: &digits) { buffer in
            while rest > 0 {
                count += 1
                buffer[24 - count] = UInt8(truncatingIfNeeded: rest % 10) &+ 0x30
                rest /= 10
            }
            out.append(contentsOf: buffer[(24 - count)...])
        }
    }

    /// A float's shortest description, without the `.0` of a whole number (as `JSONEncoder`).
    mutating func writeFloat(_ description: String) {
        var text = description
        if text.hasSuffix(".0") { text.removeLast(2) }
        out.append(contentsOf: text.utf8)
    }

    private static let hex = Array("0123456789abcdef".utf8)

    /// Per byte: 0 if it is written as it is, else the letter after its backslash (`u` for
    /// `\u00xx`). `/` is in the table and skipped when slashes are not escaped.
    private static let escapes: [UInt8] = (0..<256).map { byte -> UInt8 in
        switch byte {
        case 0x22: return 0x22
        case 0x5C: return 0x5C
        case 0x2F: return 0x2F
        case 0x08: return UInt8(ascii: "b")
        case 0x09: return UInt8(ascii: "t")
        case 0x0A: return UInt8(ascii: "n")
        case 0x0C: return UInt8(ascii: "f")
        case 0x0D: return UInt8(ascii: "r")
        case 0..<0x20: return UInt8(ascii: "u")
        default: return 0
        }
    }

    mutating func writeString(_ string: String) {
        var string = string
        string.withUTF8 { writeString(utf8: $0) }
    }

    /// A string from its UTF-8 bytes, quoted and escaped.
    mutating func writeString(utf8 bytes: UnsafeBufferPointer<UInt8>) {
        out.append(UInt8(ascii: "\""))
        let escapesSlashes = escapesSlashes
        Self.escapes.withUnsafeBufferPointer { table in
            var runStart = 0
            for index in 0..<bytes.count {
                let byte = bytes[index]
                let escape = table[Int(byte)]
                if escape == 0 || (byte == 0x2F && !escapesSlashes) { continue }
                if runStart < index { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index])) }
                runStart = index + 1
                if escape == UInt8(ascii: "u") {
                    out.append(contentsOf: [0x5C, escape, 0x30, 0x30, Self.hex[Int(byte >> 4)], Self.hex[Int(byte & 0xF)]])
                } else {
                    out.append(0x5C)
                    out.append(escape)
                }
            }
            if runStart < bytes.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...])) }
        }
        out.append(UInt8(ascii: "\""))
    }
}
