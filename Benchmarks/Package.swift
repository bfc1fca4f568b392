// swift-tools-version:6.1
// Benchmarks live in their own package so benchmark-only dependencies never reach the
// library products. Run from the repository root with `make bench`, `make bench-quick`.
import PackageDescription

let package = Package(
    name: "VaultLogBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "VaultLog", path: ".."),
        // The seed design's SQLite store, for the durable-save comparison only.
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
    ],
    targets: [
        .executableTarget(
            name: "vaultlog-bench",
            dependencies: [
                .product(name: "EventLog", package: "VaultLog"),
                .product(name: "VaultCrypto", package: "VaultLog"),
                .product(name: "LMDB", package: "VaultLog"),
                .product(name: "OfflineSync", package: "VaultLog"),
                .product(name: "VaultJSON", package: "VaultLog"),
                .product(name: "VaultModel", package: "VaultLog"),
                .product(name: "BitwardenAPI", package: "VaultLog"),
                .product(name: "BitwardenAPINIO", package: "VaultLog"),
                .product(name: "BitwardenEmulator", package: "VaultLog"),
                .product(name: "VaultLogTesting", package: "VaultLog"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
    ]
)
