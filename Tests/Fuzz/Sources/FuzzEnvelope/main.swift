// Fuzzes the event envelope decoder: the plaintext header, the envelope framing, opening with
// a key, and the event body decoder that reads what an envelope opens to. Any bytes must parse
// or throw, never trap. A fuzzer cannot forge the MAC, so the bytes after a parsed header are
// also sealed under a fixed key, reopened (which must give them back) and decoded as a body.
import CFuzzerDriver
import EventLog
import Foundation
@_spi(Tools) import OfflineSync
import VaultCrypto

let key = SealingKey(userKey: try! SymmetricCryptoKey(bytes: Array(0..<64)))
let iv = ArraySlice([UInt8](repeating: 7, count: 16))

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let envelope = try? Envelope(bytes: bytes) {
        _ = envelope.authenticate(key: key)
        if let plaintext = try? envelope.open(key: key) {
            _ = try? VaultEvent(header: envelope.header, plaintext: plaintext)
        }
        _ = try? VaultEvent(envelope: envelope, key: key)
    }
    guard let (header, length) = try? Envelope.parseHeader(bytes) else { return 0 }
    let body = Array(bytes[length...])
    guard let sealed = try? Envelope.seal(header: header, body: body, key: key, iv: iv) else {
        fatalError("a parsed header does not seal again")
    }
    guard let reopened = try? Envelope(bytes: sealed), reopened.header == header else {
        fatalError("a sealed envelope does not parse back to its header")
    }
    guard (try? reopened.open(key: key)) == body else { fatalError("a sealed body does not open to itself") }
    _ = try? VaultEvent(header: header, plaintext: body)
    return 0
}

exit(vaultlog_fuzz_main(CommandLine.argc, CommandLine.unsafeArgv))
