import Testing
@testable import VaultCrypto

/// KDF settings outside what Bitwarden accepts are refused before any derivation: a clear error
/// naming the value and the range, never a trap in the primitive or an hours-long derivation.
@Suite struct KdfBoundsTests {
    @Test(arguments: [
        (KdfConfig.pbkdf2(iterations: 4_999), "PBKDF2 iterations 4999 is outside the accepted range 5000–2000000"),
        (.pbkdf2(iterations: 5_000_000_000), "PBKDF2 iterations 5000000000 is outside the accepted range 5000–2000000"),
        (.pbkdf2(iterations: Int.max), "PBKDF2 iterations \(Int.max) is outside the accepted range 5000–2000000"),
        (.pbkdf2(iterations: -1), "PBKDF2 iterations -1 is outside the accepted range 5000–2000000"),
        (.argon2id(iterations: 1, memoryMiB: 64, parallelism: 4), "Argon2id iterations 1 is outside the accepted range 2–10"),
        (.argon2id(iterations: 11, memoryMiB: 64, parallelism: 4), "Argon2id iterations 11 is outside the accepted range 2–10"),
        (.argon2id(iterations: 3, memoryMiB: 15, parallelism: 4), "Argon2id memory 15 MiB is outside the accepted range 16–1024 MiB"),
        (.argon2id(iterations: 3, memoryMiB: 1_025, parallelism: 4), "Argon2id memory 1025 MiB is outside the accepted range 16–1024 MiB"),
        (.argon2id(iterations: 3, memoryMiB: Int.max, parallelism: 4), "Argon2id memory \(Int.max) MiB is outside the accepted range 16–1024 MiB"),
        (.argon2id(iterations: 3, memoryMiB: 64, parallelism: 0), "Argon2id parallelism 0 is outside the accepted range 1–16"),
        (.argon2id(iterations: 3, memoryMiB: 64, parallelism: 17), "Argon2id parallelism 17 is outside the accepted range 1–16"),
    ])
    func outOfRange_isRefusedBeforeDeriving(kdf: KdfConfig, message: String) {
        #expect(throws: VaultCryptoError.invalidKdfParameters(message)) { try kdf.validate() }
        #expect(throws: VaultCryptoError.invalidKdfParameters(message)) {
            try MasterKey.derive(password: "pw", email: "a@b.c", kdf: kdf)
        }
    }

    @Test func edgesOfTheRanges_areAccepted() throws {
        for kdf: KdfConfig in [.pbkdf2(iterations: 5_000), .pbkdf2(iterations: 2_000_000),
                               .argon2id(iterations: 2, memoryMiB: 16, parallelism: 1),
                               .argon2id(iterations: 10, memoryMiB: 1_024, parallelism: 16)] {
            try kdf.validate()
        }
    }

    @Test func wireFields_areCheckedWhenParsed() throws {
        #expect(throws: VaultCryptoError.invalidKdfParameters("PBKDF2 iterations 5000000000 is outside the accepted range 5000–2000000")) {
            try KdfConfig(kdfType: 0, iterations: 5_000_000_000)
        }
        #expect(throws: VaultCryptoError.invalidKdfParameters("Argon2id memory 4096 MiB is outside the accepted range 16–1024 MiB")) {
            try KdfConfig(kdfType: 1, iterations: 3, memoryMiB: 4096, parallelism: 4)
        }
        #expect(throws: VaultCryptoError.unsupportedKdf("type 7 (known: 0 = PBKDF2-SHA256, 1 = Argon2id)")) {
            try KdfConfig(kdfType: 7, iterations: 3)
        }
        #expect(try KdfConfig(kdfType: 1, iterations: 3) == .argon2id(iterations: 3, memoryMiB: 64, parallelism: 4))
    }

    @Test func weakPbkdf2_getsBitwardensWarning() {
        #expect(KdfConfig.pbkdf2(iterations: 100_000).weaknessWarning?.contains("600000") == true)
        #expect(KdfConfig.pbkdf2(iterations: 600_000).weaknessWarning == nil)
        #expect(KdfConfig.argon2idDefault.weaknessWarning == nil)
    }
}
