import ArgumentParser
import VaultCrypto

/// The KDF families an account can use.
enum KdfKind: String, ExpressibleByArgument, CaseIterable, Sendable {
    case pbkdf2
    case argon2id
}

/// `--kdf`, `--iterations`, `--memory`, `--parallelism`: how a master key is derived. Values
/// outside Bitwarden's ranges are usage errors (exit 2) that name the value and the range.
struct KdfOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Key-derivation function: pbkdf2 or argon2id.", valueName: "kdf"))
    var kdf: KdfKind = .pbkdf2

    @Option(help: ArgumentHelp(
        "Iterations: PBKDF2 5000 to 2000000 (Bitwarden's default 600000), Argon2id 2 to 10 (default 3).", valueName: "n"))
    var iterations: Int?

    @Option(help: ArgumentHelp("Argon2id memory in MiB, 16 to 1024 (default 64).", valueName: "mib"))
    var memory: Int?

    @Option(help: ArgumentHelp("Argon2id parallelism, 1 to 16 (default 4).", valueName: "p"))
    var parallelism: Int?

    /// Whether any KDF option was given.
    var isSet: Bool { kdf != .pbkdf2 || iterations != nil || memory != nil || parallelism != nil }

    func validate() throws { _ = try config() }

    /// The settings, checked against Bitwarden's ranges; `defaultPbkdf2Iterations` when PBKDF2
    /// is used without `--iterations`.
    func config(defaultPbkdf2Iterations: Int = KdfConfig.pbkdf2DefaultIterations) throws -> KdfConfig {
        let config: KdfConfig
        switch kdf {
        case .pbkdf2:
            guard memory == nil, parallelism == nil else {
                throw ValidationError("--memory and --parallelism are Argon2id settings: add --kdf argon2id, or drop them")
            }
            config = .pbkdf2(iterations: iterations ?? defaultPbkdf2Iterations)
        case .argon2id:
            config = .argon2id(iterations: iterations ?? KdfConfig.argon2DefaultIterations,
                               memoryMiB: memory ?? KdfConfig.argon2DefaultMemoryMiB,
                               parallelism: parallelism ?? KdfConfig.argon2DefaultParallelism)
        }
        do {
            try config.validate()
        } catch VaultCryptoError.invalidKdfParameters(let reason) {
            throw ValidationError(reason)
        }
        return config
    }
}
