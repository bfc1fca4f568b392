import Foundation
import VaultCrypto
import VaultModel

/// Group 5, crypto: EncString encrypt/decrypt of a typical login cipher (ops/s, every field of
/// the cipher) and of 4 KiB (MB/s), against the machine's floor for the same work:
/// `openssl speed -evp aes-256-cbc` plus `openssl speed -hmac sha256` on 4 KiB blocks, run in
/// the same process run, interleaved with the EncString rounds. The floor for encrypt-then-MAC
/// is 1 / (1/AES + 1/HMAC).
func runCryptoBench(quick: Bool, results: Results) throws {
    let rounds = quick ? 3 : 5
    let opensslSeconds = quick ? 1 : 2
    let window = quick ? 0.4 : 1.0
    progress("crypto: \(rounds) rounds, EncString vs openssl speed (\(opensslSeconds) s per algorithm)")
    let key = SymmetricCryptoKey.generate()
    let block = [UInt8](repeating: 0x42, count: 4096)
    let view = CipherView(type: .login, name: "Bank account", notes: "Security questions: first pet Rex, street Elm",
                          login: LoginView(username: "user@example.com", password: "correct horse battery staple",
                                           uris: [LoginUriView(uri: "https://bank.example.com/login")]))
    let encryptedBlock = EncString.encrypt(block, key: key)
    let encryptedCipher = try view.encrypt(userKey: key)

    var aesFloor: [Double] = [], hmacFloor: [Double] = []
    let stats = try interleave(rounds: rounds, [
        ("encrypt_4k", { throughput(window: window, bytes: block.count) { _ = EncString.encrypt(block, key: key).serializedBytes } }),
        ("decrypt_4k", { try throughput(window: window, bytes: block.count) { _ = try EncString(parsing: encryptedBlock.serializedBytes).decrypt(key: key) } }),
        ("encrypt_cipher", { try opsPerSecond(window: window) { _ = try view.encrypt(userKey: key) } }),
        ("decrypt_cipher", { try opsPerSecond(window: window) { _ = try encryptedCipher.decrypt(userKey: key) } }),
        ("openssl", {
            aesFloor.append(try opensslSpeed(["-evp", "aes-256-cbc"], seconds: opensslSeconds))
            hmacFloor.append(try opensslSpeed(["-hmac", "sha256"], seconds: opensslSeconds))
            return 0
        }),
    ])
    let aes = Stats(values: aesFloor), hmac = Stats(values: hmacFloor)
    let floorValues = zip(aesFloor, hmacFloor).map { 1 / (1 / $0 + 1 / $1) }
    let floor = Stats(values: floorValues)
    let extra = ["openssl_aes_256_cbc_mb_s": json(aes.median), "openssl_hmac_sha256_mb_s": json(hmac.median)]
    for name in ["encrypt_4k", "decrypt_4k"] {
        let s = stats[name]!
        results.add(Figure(group: "crypto", bench: "encstring_\(name)", metric: "throughput", unit: "MB/s", value: s,
                           baseline: "openssl_aes_cbc_plus_hmac", baselineValue: floor, ratio: s.median / floor.median,
                           target: .ratioAtLeast(0.25), extra: extra))
    }
    for name in ["encrypt_cipher", "decrypt_cipher"] {
        results.add(Figure(group: "crypto", bench: "encstring_\(name)", metric: "throughput", unit: "ops/s", value: stats[name]!,
                           extra: ["fields": "\"name, notes, username, password, uri\""]))
    }
}

/// Runs `body` repeatedly for about `window` seconds; returns MB/s (10^6 bytes per second).
private func throughput(window: Double, bytes: Int, _ body: () throws -> Void) rethrows -> Double {
    try opsPerSecond(window: window, body) * Double(bytes) / 1e6
}

/// Runs `body` repeatedly for about `window` seconds; returns operations per second.
func opsPerSecond(window: Double, _ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    var ops = 0
    var elapsed = 0.0
    repeat {
        for _ in 0..<64 { try body() }
        ops += 64
        elapsed = seconds(ContinuousClock.now - start)
    } while elapsed < window
    return Double(ops) / elapsed
}

/// `openssl speed … -bytes 4096 -seconds S`: the 4 KiB figure in MB/s (openssl prints kB/s, 1000 bytes).
private func opensslSpeed(_ algorithm: [String], seconds: Int) throws -> Double {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["openssl", "speed", "-bytes", "4096", "-seconds", "\(seconds)"] + algorithm
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    // The last line: "AES-256-CBC     989798.40k" or "hmac(sha256)   1583707.02k".
    guard process.terminationStatus == 0,
          let last = text.split(separator: "\n").last,
          let field = last.split(separator: " ").last, field.hasSuffix("k"),
          let kilobytes = Double(field.dropLast()) else {
        throw BenchError("openssl speed \(algorithm.joined(separator: " ")) gave no figure (is openssl installed?): \(text.suffix(200))")
    }
    return kilobytes / 1000
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
