/// Standard base64 (RFC 4648 §4, with `=` padding) over byte buffers.
///
/// Bitwarden EncStrings are parsed on UTF-8 bytes; going through `String` splitting and
/// Foundation's `Data(base64Encoded:)` costs two orders of magnitude more on Linux.
public enum Base64 {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// 0xFF marks a byte outside the alphabet.
    private static let decodeTable: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    /// Encodes bytes as padded standard base64.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        String(decoding: encodeToBytes(bytes), as: UTF8.self)
    }

    /// Encodes bytes as padded standard base64, returning the ASCII bytes.
    public static func encodeToBytes(_ bytes: some Collection<UInt8>) -> [UInt8] {
        var output = [UInt8]()
        output.reserveCapacity(((bytes.count + 2) / 3) * 4)
        appendEncoded(bytes, to: &output)
        return output
    }

    /// Appends the padded base64 of `bytes` to `output`.
    public static func appendEncoded(_ bytes: some Collection<UInt8>, to output: inout [UInt8]) {
        alphabet.withUnsafeBufferPointer { table in
            var iterator = bytes.makeIterator()
            while let b0 = iterator.next() {
                let b1 = iterator.next()
                let b2 = iterator.next()
                output.append(table[Int(b0 >> 2)])
                output.append(table[Int(((b0 & 0x03) << 4) | ((b1 ?? 0) >> 4))])
                if let b1 {
                    output.append(table[Int(((b1 & 0x0F) << 2) | ((b2 ?? 0) >> 6))])
                } else {
                    output.append(UInt8(ascii: "="))
                }
                if let b2 {
                    output.append(table[Int(b2 & 0x3F)])
                } else {
                    output.append(UInt8(ascii: "="))
                }
            }
        }
    }

    /// Decodes padded standard base64; returns `nil` for anything else (wrong length, a byte
    /// outside the alphabet, padding in the middle).
    public static func decode(_ string: String) -> [UInt8]? {
        var string = string
        return string.withUTF8 { decode(UnsafeRawBufferPointer($0)) }
    }

    /// Decodes padded standard base64 from raw ASCII bytes.
    public static func decode(_ input: UnsafeRawBufferPointer) -> [UInt8]? {
        let count = input.count
        guard count % 4 == 0 else { return nil }
        if count == 0 { return [] }
        var padding = 0
        if input[count - 1] == UInt8(ascii: "=") { padding += 1 }
        if input[count - 2] == UInt8(ascii: "=") { padding += 1 }
        var output = [UInt8]()
        output.reserveCapacity(count / 4 * 3 - padding)
        let ok: Bool = decodeTable.withUnsafeBufferPointer { table in
            var index = 0
            while index < count {
                let isLast = index + 4 == count
                let c0 = table[Int(input[index])]
                let c1 = table[Int(input[index + 1])]
                let raw2 = input[index + 2]
                let raw3 = input[index + 3]
                guard c0 != 0xFF, c1 != 0xFF else { return false }
                output.append((c0 << 2) | (c1 >> 4))
                if isLast && raw2 == UInt8(ascii: "=") {
                    guard raw3 == UInt8(ascii: "=") else { return false }
                    break
                }
                let c2 = table[Int(raw2)]
                guard c2 != 0xFF else { return false }
                output.append((c1 << 4) | (c2 >> 2))
                if isLast && raw3 == UInt8(ascii: "=") { break }
                let c3 = table[Int(raw3)]
                guard c3 != 0xFF else { return false }
                output.append((c2 << 6) | c3)
                index += 4
            }
            return true
        }
        return ok ? output : nil
    }

    /// Decodes padded standard base64 from a byte collection.
    public static func decode(bytes: some Collection<UInt8>) -> [UInt8]? {
        if let result = bytes.withContiguousStorageIfAvailable({ decode(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        return Array(bytes).withUnsafeBytes { decode($0) }
    }
}
