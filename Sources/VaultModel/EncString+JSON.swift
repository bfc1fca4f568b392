import VaultCrypto
import VaultJSON

/// ``SortedJSONEncoder`` writes an `EncString` from its serialized bytes (what its
/// `encode(to:)` writes as a string), without an encoder or a `String` for each.
extension EncString: JSONStringEncodable {
    /// The serialized form's UTF-8 bytes.
    public var jsonStringUTF8: [UInt8] { serializedBytes }
}
