// swift-tools-version:6.1
// Benchmarks live in their own package so benchmark-only dependencies never reach the
// library products. Run from the repository root with `make bench-log`.
import PackageDescription

let package = Package(
    name: "VaultLogBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "VaultLog", path: ".."),
    ],
    targets: [
        .executableTarget(
            name: "vaultlog-bench",
            dependencies: [
                .product(name: "EventLog", package: "VaultLog"),
                .product(name: "VaultCrypto", package: "VaultLog"),
                .product(name: "LMDB", package: "VaultLog"),
                .product(name: "OfflineSync", package: "VaultLog"),
                .product(name: "VaultModel", package: "VaultLog"),
                .product(name: "BitwardenAPI", package: "VaultLog"),
                .product(name: "BitwardenEmulator", package: "VaultLog"),
            ]
        ),
    ]
)
