import Foundation

extension JSONTape {
    // MARK: Reading values

    /// The value of node `index` as a `T`.
    func value<T: Decodable>(_ type: T.Type, at index: Int) throws -> T {
        // The scalar types JSONDecoder reads itself, and the ones it treats specially.
        // (`unsafeBitCast` where the types are equal: `as!` costs a dynamic cast per value.)
        if T.self == String.self { return unsafeBitCast(try string(at: index), to: T.self) }
        if T.self == Bool.self { return unsafeBitCast(try bool(at: index), to: T.self) }
        if T.self == Int.self { return unsafeBitCast(try integer(Int.self, at: index), to: T.self) }
        if T.self == Int64.self { return unsafeBitCast(try integer(Int64.self, at: index), to: T.self) }
        if T.self == Double.self { return unsafeBitCast(try double(at: index), to: T.self) }
        if T.self == UInt64.self { return unsafeBitCast(try integer(UInt64.self, at: index), to: T.self) }
        if T.self == Int32.self { return unsafeBitCast(try integer(Int32.self, at: index), to: T.self) }
        if T.self == Data.self {
            guard let data = Data(base64Encoded: try string(at: index)) else {
                throw DecodingError.dataCorrupted(context(index, "Encountered Data is not valid Base64."))
            }
            return data as! T
        }
        if T.self == URL.self {
            guard let url = URL(string: try string(at: index)) else {
                throw DecodingError.dataCorrupted(context(index, "Invalid URL string."))
            }
            return url as! T
        }
        return try T(from: TapeDecoder(tape: self, node: index))
    }

    func string(at index: Int) throws -> String {
        let node = nodes[index]
        guard node.kind == .string else { throw mismatch(String.self, index) }
        guard let string = text(of: node) else { throw DecodingError.dataCorrupted(context(index, "The string is not valid UTF-8.")) }
        return string
    }

    /// A string node's text; nil for invalid UTF-8 or a lone surrogate.
    func text(of node: Node) -> String? {
        if node.plain { return String(decoding: bytes[node.start..<node.end], as: UTF8.self) }
        if node.flag { return unescaped(node) }
        return bytes.withUnsafeBufferPointer {
            String(validating: UnsafeBufferPointer(rebasing: $0[node.start..<node.end]), as: UTF8.self)
        }
    }

    /// Whether every key of object node `object` is valid text (checked when a keyed container
    /// opens the object, as `JSONDecoder` checks them when it first reads the object).
    func keysAreValid(of object: Int) -> Bool {
        var pair = object + 1
        while pair < nodes[object].next {
            if !nodes[pair].plain, text(of: nodes[pair]) == nil { return false }
            pair = nodes[pair + 1].next
        }
        return true
    }

    func bool(at index: Int) throws -> Bool {
        let node = nodes[index]
        guard node.kind == .bool else { throw mismatch(Bool.self, index) }
        return node.flag
    }

    func integer<I: FixedWidthInteger>(_ type: I.Type, at index: Int) throws -> I {
        let node = nodes[index]
        guard node.kind == .number else { throw mismatch(I.self, index) }
        if let value = bytes.withUnsafeBufferPointer({ Self.parseInteger(I.self, UnsafeBufferPointer(rebasing: $0[node.start..<node.end])) }) {
            return value
        }
        // A fraction, an exponent or too many digits: exact as a Double, or it does not fit.
        let text = numberText(node)
        if let double = Double(text), let value = I(exactly: double) { return value }
        throw DecodingError.dataCorrupted(context(index, "Number \(text) is not representable in Swift."))
    }

    func double(at index: Int) throws -> Double {
        let node = nodes[index]
        guard node.kind == .number else { throw mismatch(Double.self, index) }
        let text = numberText(node)
        guard let value = Double(text), value.isFinite else {
            throw DecodingError.dataCorrupted(context(index, "Number \(text) is not representable in Swift."))
        }
        return value
    }

    func float(at index: Int) throws -> Float {
        let value = try double(at: index)
        guard abs(value) <= Double(Float.greatestFiniteMagnitude) else {
            throw DecodingError.dataCorrupted(context(index, "Number \(numberText(nodes[index])) does not fit in Float."))
        }
        return Float(value)
    }

    private func numberText(_ node: Node) -> String {
        String(decoding: bytes[node.start..<node.end], as: UTF8.self)
    }

    /// Digits with an optional minus, no fraction or exponent; nil when that is not the text or
    /// the value does not fit.
    private static func parseInteger<I: FixedWidthInteger>(_: I.Type, _ text: UnsafeBufferPointer<UInt8>) -> I? {
        var index = 0
        let negative = text.first == UInt8(ascii: "-")
        if negative { index = 1 }
        guard index < text.count else { return nil }
        var value: I = 0
        while index < text.count {
            let digit = text[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (next, o2) = negative ? times10.subtractingReportingOverflow(I(digit)) : times10.addingReportingOverflow(I(digit))
            guard !o1, !o2 else { return nil }
            value = next
            index += 1
        }
        return value
    }

    /// A string with escapes, decoded; nil for invalid UTF-8 or a lone surrogate.
    func unescaped(_ node: Node) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(node.end - node.start)
        var i = node.start
        while i < node.end {
            let byte = bytes[i]
            i += 1
            guard byte == UInt8(ascii: "\\") else { out.append(byte); continue }
            if JSONEscape.decode(bytes, at: &i, end: node.end, into: &out) != nil { return nil }
        }
        return String(validating: out, as: UTF8.self)
    }

    // MARK: Errors

    /// The coding path of node `index`, found by walking down from the root (only errors need it).
    func codingPath(to index: Int) -> [any CodingKey] {
        var path: [any CodingKey] = []
        var node = 0
        while node != index {
            let container = nodes[node]
            var child = node + 1
            var position = 0
            var found = false
            while child < container.next {
                let valueNode = container.kind == .object ? child + 1 : child
                if index >= child, index < nodes[valueNode].next {
                    if container.kind == .object {
                        // A key node itself is on no path of its own; report its object's.
                        if index == child { return path }
                        let keyNode = nodes[child]
                        path.append(TapeKey(stringValue: text(of: keyNode) ?? ""))
                    } else {
                        path.append(TapeKey(intValue: position))
                    }
                    node = valueNode
                    found = true
                    break
                }
                child = nodes[valueNode].next
                position += 1
            }
            if !found { break }
        }
        return path
    }

    func context(_ index: Int, _ description: String, extra key: (any CodingKey)? = nil) -> DecodingError.Context {
        DecodingError.Context(codingPath: codingPath(to: index) + (key.map { [$0] } ?? []), debugDescription: description)
    }

    /// A value of the wrong kind; `null` where a value is needed is `valueNotFound`, as in `JSONDecoder`.
    func mismatch(_ type: Any.Type, _ index: Int) -> DecodingError {
        let kind = nodes[index].kind
        if kind == .null {
            return .valueNotFound(type, context(index, "Cannot get value of type \(type) -- found null value instead"))
        }
        return .typeMismatch(type, context(index, "Expected to decode \(type) but found \(Self.name(of: kind)) instead."))
    }

    static func name(of kind: Kind) -> String {
        switch kind {
        case .null: "null"
        case .bool: "bool"
        case .number: "number"
        case .string: "a string"
        case .array: "an array"
        case .object: "a dictionary"
        }
    }
}

/// A key in a coding path worked out from the tape.
struct TapeKey: CodingKey {
    let stringValue: String
    let intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue; intValue = nil }
    init(intValue: Int) { stringValue = "Index \(intValue)"; self.intValue = intValue }
}
