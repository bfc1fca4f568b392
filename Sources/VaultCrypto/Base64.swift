/// Standard base64 (RFC 4648 §4, with `=` padding) over byte buffers.
///
/// Bitwarden EncStrings are parsed on UTF-8 bytes; going through `String` splitting and
/// Foundation's `Data(base64Encoded:)` costs two orders of magnitude more on Linux.
public enum Base64 {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Two characters for each 12-bit value, first character in the low byte: one lookup per
    /// two characters (encoding 4 KiB took a quarter of an EncString's encryption with four).
    private static let pairTable: [UInt16] = (0..<4096).map { value in
        UInt16(alphabet[value >> 6]) | UInt16(alphabet[value & 0x3F]) << 8
    }

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
        if bytes.withContiguousStorageIfAvailable({ appendEncoded(UnsafeRawBufferPointer($0), to: &output) }) == nil {
            Array(bytes).withUnsafeBytes { appendEncoded($0, to: &output) }
        }
    }

    /// Appends the padded base64 of raw bytes to `output`: three bytes to four characters,
    /// written straight into the array's new storage.
    public static func appendEncoded(_ input: UnsafeRawBufferPointer, to output: inout [UInt8]) {
        let encodedCount = ((input.count + 2) / 3) * 4
        guard encodedCount > 0 else { return }
        let start = output.count
        output.append(contentsOf: repeatElement(0, count: encodedCount))
        let pairs = pairTable
        alphabet.withUnsafeBufferPointer { table in
            pairs.withUnsafeBufferPointer { pairs in
            output.withUnsafeMutableBufferPointer { buffer in
                let out = buffer.baseAddress! + start
                let count = input.count
                var i = 0, o = 0
                // Six bytes to eight characters: one 8-byte load, four pair lookups, one store.
                while i + 8 <= count {
                    let six = UInt64(bigEndian: input.loadUnaligned(fromByteOffset: i, as: UInt64.self)) >> 16
                    let eight = UInt64(pairs[Int(six >> 36)]) | UInt64(pairs[Int((six >> 24) & 0xFFF)]) << 16
                        | UInt64(pairs[Int((six >> 12) & 0xFFF)]) << 32 | UInt64(pairs[Int(six & 0xFFF)]) << 48
                    UnsafeMutableRawPointer(out + o).storeBytes(of: eight.littleEndian, as: UInt64.self)
                    i += 6
                    o += 8
                }
                while i + 3 <= count {
                    let triple = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
                    let four = UInt32(pairs[Int(triple >> 12)]) | UInt32(pairs[Int(triple & 0xFFF)]) << 16
                    UnsafeMutableRawPointer(out + o).storeBytes(of: four.littleEndian, as: UInt32.self)
                    i += 3
                    o += 4
                }
                if i < count {
                    let b0 = input[i]
                    let b1: UInt8 = i + 1 < count ? input[i + 1] : 0
                    out[o] = table[Int(b0 >> 2)]
                    out[o + 1] = table[Int(((b0 & 0x03) << 4) | (b1 >> 4))]
                    out[o + 2] = i + 1 < count ? table[Int((b1 & 0x0F) << 2)] : UInt8(ascii: "=")
                    out[o + 3] = UInt8(ascii: "=")
                }
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

    /// Decodes padded standard base64 from raw ASCII bytes, four characters to three bytes,
    /// straight into the result's storage.
    public static func decode(_ input: UnsafeRawBufferPointer) -> [UInt8]? {
        let count = input.count
        guard count % 4 == 0 else { return nil }
        if count == 0 { return [] }
        var padding = 0
        if input[count - 1] == UInt8(ascii: "=") { padding += 1 }
        if input[count - 2] == UInt8(ascii: "=") { padding += 1 }
        let decodedCount = count / 4 * 3 - padding
        var ok = true
        let output = decodeTable.withUnsafeBufferPointer { table in
            [UInt8](unsafeUninitializedCapacity: decodedCount) { out, initialized in
                var index = 0, o = 0
                // Whole quads (no padding) first.
                let whole = padding == 0 ? count : count - 4
                while index < whole {
                    let c0 = table[Int(input[index])], c1 = table[Int(input[index + 1])]
                    let c2 = table[Int(input[index + 2])], c3 = table[Int(input[index + 3])]
                    guard (c0 | c1 | c2 | c3) & 0xC0 == 0 else { ok = false; break }
                    out[o] = (c0 << 2) | (c1 >> 4)
                    out[o + 1] = (c1 << 4) | (c2 >> 2)
                    out[o + 2] = (c2 << 6) | c3
                    index += 4
                    o += 3
                }
                if ok && padding > 0 {
                    let c0 = table[Int(input[index])], c1 = table[Int(input[index + 1])]
                    if (c0 | c1) & 0xC0 != 0 {
                        ok = false
                    } else {
                        out[o] = (c0 << 2) | (c1 >> 4)
                        o += 1
                        if padding == 1 {
                            let c2 = table[Int(input[index + 2])]
                            if c2 & 0xC0 != 0 { ok = false } else { out[o] = (c1 << 4) | (c2 >> 2); o += 1 }
                        }
                    }
                }
                initialized = ok ? o : 0
            }
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
