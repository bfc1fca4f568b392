import Foundation
#if canImport(Glibc)
import Glibc
#endif
import VaultCrypto
import VaultJSON
import VaultModel

/// Group 5, crypto: EncString encrypt/decrypt of a typical login cipher (ops/s, every field of
/// the cipher) and of 4 KiB (MB/s), against the machine's floor for the same work:
/// `openssl speed -evp aes-256-cbc` plus `openssl speed -hmac sha256` on 4 KiB blocks, run in
/// the same process run, interleaved with the EncString rounds. The floor for encrypt-then-MAC
/// is 1 / (1/AES + 1/HMAC). Also the encrypted cipher's JSON, written (`SortedJSONEncoder`
/// against `JSONEncoder`) and read (`JSONTapeDecoder` against `JSONDecoder`).
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
    let serializedBlock = EncString.encrypt(block, key: key).serializedBytes
    let encryptedCipher = try view.encrypt(userKey: key)
    let cipherJSON = try SortedJSONEncoder().encode(encryptedCipher)
    let cipherData = Data(cipherJSON)

    var aesFloor: [Double] = [], hmacFloor: [Double] = []
    let stats = try interleave(rounds: rounds, [
        ("encrypt_4k", { throughput(window: window, bytes: block.count) { _ = EncString.encrypt(block, key: key).serializedBytes } }),
        ("decrypt_4k", { try throughput(window: window, bytes: block.count) { _ = try EncString(parsing: serializedBlock).decrypt(key: key) } }),
        ("encrypt_cipher", { try opsPerSecond(window: window) { _ = try view.encrypt(userKey: key) } }),
        ("decrypt_cipher", { try opsPerSecond(window: window) { _ = try encryptedCipher.decrypt(userKey: key) } }),
        ("json_cipher", { try opsPerSecond(window: window) { _ = try SortedJSONEncoder().encode(encryptedCipher) } }),
        ("json_cipher_foundation", {
            let foundation = JSONEncoder()
            foundation.outputFormatting = [.sortedKeys]
            return try opsPerSecond(window: window) { _ = try foundation.encode(encryptedCipher) }
        }),
        ("json_decode_cipher", { try opsPerSecond(window: window) { _ = try JSONTapeDecoder().decode(Cipher.self, from: cipherJSON) } }),
        ("json_decode_cipher_foundation", {
            let foundation = JSONDecoder()
            return try opsPerSecond(window: window) { _ = try foundation.decode(Cipher.self, from: cipherData) }
        }),
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
                           target: .ratioAtLeast(name == "encrypt_4k" ? 0.60 : 0.75), extra: extra))
    }
    // The cipher's stored JSON (every save, outcome and checkpoint writes it), against the
    // `JSONEncoder` it replaced; the same bytes (tested).
    results.add(Figure(group: "crypto", bench: "cipher_json_encode", metric: "throughput", unit: "ops/s", value: stats["json_cipher"]!,
                       baseline: "jsonencoder_sorted_keys", baselineValue: stats["json_cipher_foundation"]!,
                       ratio: stats["json_cipher"]!.median / stats["json_cipher_foundation"]!.median,
                       extra: ["bytes": json(Double(cipherJSON.count))]))
    // The same JSON read back into a `Cipher` (every fold's snapshots, checkpoints, local
    // copies, the server's replies), against `JSONDecoder`; the same result (tested).
    results.add(Figure(group: "crypto", bench: "cipher_json_decode", metric: "throughput", unit: "ops/s", value: stats["json_decode_cipher"]!,
                       baseline: "jsondecoder", baselineValue: stats["json_decode_cipher_foundation"]!,
                       ratio: stats["json_decode_cipher"]!.median / stats["json_decode_cipher_foundation"]!.median,
                       extra: ["bytes": json(Double(cipherJSON.count))]))
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
    let text = try runWithDefaultSignals(["openssl", "speed", "-bytes", "4096", "-seconds", "\(seconds)"] + algorithm)
    // The last line: "AES-256-CBC     989798.40k" or "hmac(sha256)   1583707.02k".
    guard let last = text.split(separator: "\n").last,
          let field = last.split(separator: " ").last, field.hasSuffix("k"),
          let kilobytes = Double(field.dropLast()) else {
        throw BenchError("openssl speed \(algorithm.joined(separator: " ")) gave no figure (is openssl installed?): \(text.suffix(200))")
    }
    return kilobytes / 1000
}

/// Runs a command and returns its stdout. Spawned with an empty signal mask: `openssl speed`
/// times itself with SIGALRM, which this process's threads block (Foundation's `Process`
/// passes that mask on, and openssl then never stops).
func runWithDefaultSignals(_ command: [String]) throws -> String {
    var pipe: [Int32] = [0, 0]
    guard Glibc.pipe(&pipe) == 0 else { throw BenchError("pipe failed") }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, pipe[1], 1)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addclose(&actions, pipe[0])
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    posix_spawnattr_setsigmask(&attributes, &empty)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    sigaddset(&defaults, SIGALRM)
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    let argv = command.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let spawned = posix_spawnp(&pid, command[0], &actions, &attributes, argv, environ)
    close(pipe[1])
    guard spawned == 0 else { close(pipe[0]); throw BenchError("could not run \(command[0]) (error \(spawned)); is it installed?") }
    var output = Data()
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = read(pipe[0], &buffer, buffer.count)
        if n <= 0 { break }
        output.append(contentsOf: buffer[0..<n])
    }
    close(pipe[0])
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    guard status == 0 else { throw BenchError("\(command.joined(separator: " ")) failed (status \(status))") }
    return String(decoding: output, as: UTF8.self)
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
