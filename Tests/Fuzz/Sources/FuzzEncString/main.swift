// Fuzzes the Bitwarden EncString parser (`"2.iv|ct|mac"`, `"0.iv|ct"`) and decryption with a
// fixed key: any bytes must parse or throw, never trap; a parsed string must serialise and
// parse back to itself; decryption must fail cleanly (a fuzzer cannot forge the MAC, so the
// AES path is also driven through the unauthenticated type-0 form).
import CFuzzerDriver
import Foundation
import VaultCrypto

/// Bitwarden SDK vector T2's key (public).
let key = try! SymmetricCryptoKey(base64: "sJnO8rVi0dTwND43n0T9x7665s8mVUYNAaJ4nm7gx1iia1I7947URL60nwfIHaf9QJePO4VkNN0oT9jh4iC6aA==")

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let raw = UnsafeRawBufferPointer(start: data, count: size)
    guard let enc = try? EncString(parsing: raw) else {
        _ = try? EncString(String(decoding: raw, as: UTF8.self))
        return 0
    }
    // The String and JSON entry points agree with the byte parser.
    if let text = String(validating: raw, as: UTF8.self) {
        guard let viaString = try? EncString(text), viaString == enc else { fatalError("EncString(String) disagrees with EncString(parsing:)") }
    }
    guard let again = try? EncString(enc.serialized), again == enc else {
        fatalError("serialized EncString does not parse back to itself: \(enc.serialized)")
    }
    guard let json = try? JSONEncoder().encode(enc), (try? JSONDecoder().decode(EncString.self, from: json)) == enc else {
        fatalError("EncString JSON round trip failed")
    }
    switch enc.type {
    case .aesCbc256HmacSha256B64:
        _ = try? enc.decrypt(key: key)
        _ = try? enc.decryptString(key: key)
        _ = try? enc.decryptLegacy(aesKey: key.encryptionKey)   // must refuse: wrong type
        // The AES path behind the MAC: the same IV and ciphertext as an unauthenticated string.
        let legacy = "0." + Base64.encode(enc.iv) + "|" + Base64.encode(enc.ciphertext)
        if let plain = try? EncString(legacy).decryptLegacy(aesKey: key.encryptionKey) {
            _ = String(validating: plain, as: UTF8.self)
        }
    case .aesCbc256B64:
        _ = try? enc.decrypt(key: key)   // must refuse: a type-0 string with a MAC key
        _ = try? enc.decryptLegacy(aesKey: key.encryptionKey)
    }
    return 0
}

exit(vaultlog_fuzz_main(CommandLine.argc, CommandLine.unsafeArgv))
