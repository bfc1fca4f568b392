// swift-tools-version:6.1
// The libFuzzer targets of VaultLog's parsers: its own package so the main package's
// `swift build --build-tests` never sees them (they link only with `-sanitize=fuzzer`).
// Run them with `make fuzz` (Docs/Reliability.md); build them by hand with
//
//   swift build -c release --package-path Tests/Fuzz --scratch-path Tests/Fuzz/.build-fuzz \
//       -Xswiftc -sanitize=fuzzer,address
//
// `-Xswiftc` reaches every Swift module of the build, so VaultLog's own modules (where the
// parsers are) get coverage instrumentation and AddressSanitizer; that is what guides libFuzzer.
//
// Entry point: SwiftPM links an ELF executable with `--defsym main=<Module>_main` (so tests can
// link executables), which rules out `-parse-as-library` (no `<Module>_main` is emitted, and the
// link fails). Each target's main.swift instead hands control to libFuzzer's driver through
// `CFuzzerDriver`; libFuzzer's own `main` is then never pulled from its archive.
import PackageDescription

let fuzzTargets: [(name: String, products: [String])] = [
    ("FuzzEncString", ["VaultCrypto"]),
    ("FuzzEnvelope", ["EventLog", "OfflineSync", "VaultCrypto"]),
    ("FuzzScenario", ["Replay"]),
    ("FuzzRecordedLog", ["Replay", "OfflineSync", "EventLog"]),
    ("FuzzEmulatorRequest", ["BitwardenEmulator", "VaultCrypto", "VaultJSON", "VaultModel", "VaultLogTesting"]),
]

let package = Package(
    name: "VaultLogFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "VaultLog", path: "../..")],
    targets: [.target(name: "CFuzzerDriver")] + fuzzTargets.map { target in
        .executableTarget(
            name: target.name,
            dependencies: ["CFuzzerDriver"] + target.products.map { .product(name: $0, package: "VaultLog") }
        )
    }
)
