/// The Bitwarden server's `[EncryptedString]` check (`EncryptedStringAttribute.cs`): a header
/// type (number or enum name) and the right number of non-empty base64 pieces. Permissive about
/// padding bits, as the server is. Vaultwarden does no such check.
enum EncStringRules {
    /// The server's `EncryptionType` names, by value.
    static let typeNames: [String: Int] = [
        "AesCbc256_B64": 0, "AesCbc128_HmacSha256_B64": 1, "AesCbc256_HmacSha256_B64": 2,
        "Rsa2048_OaepSha256_B64": 3, "Rsa2048_OaepSha1_B64": 4, "Rsa2048_OaepSha256_HmacSha256_B64": 5,
        "Rsa2048_OaepSha1_HmacSha256_B64": 6, "CoseEncrypt0": 7,
    ]

    static func isValid(_ value: String) -> Bool {
        let header = value.split(separator: ".", omittingEmptySubsequences: false)
        let type: Int
        let pieces: [Substring]
        switch header.count {
        case 1:
            pieces = value.split(separator: "|", omittingEmptySubsequences: false)
            type = pieces.count == 3 ? 1 : 0
        case 2:
            if let number = Int(header[0]) {
                type = number
            } else if let named = typeNames[String(header[0])] {
                type = named
            } else {
                return false
            }
            pieces = header[1].split(separator: "|", omittingEmptySubsequences: false)
        default:
            return false
        }
        let expected: ClosedRange<Int>
        switch type {
        case 0: expected = 2...2
        case 1, 2: expected = 3...3
        case 3, 4, 5, 6: expected = 1...2
        case 7: expected = 1...1
        default: return false
        }
        guard expected.contains(pieces.count) else { return false }
        return pieces.allSatisfy(isBase64)
    }

    static func isBase64(_ piece: Substring) -> Bool {
        let bytes = piece.utf8
        guard !bytes.isEmpty, bytes.count % 4 == 0 else { return false }
        var padding = 0
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "="):
                padding += 1
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"):
                if padding > 0 { return false }
            default:
                return false
            }
        }
        return padding <= 2
    }
}
