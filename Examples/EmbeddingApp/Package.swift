// swift-tools-version:6.1
// An app that embeds VaultLog the way the README shows: the library products only, with
// VaultLog's "Tools" trait off. `make example` builds it and runs it against the emulator
// (`vaultlog serve` in another process, over loopback HTTP); `make graph` resolves it and lists
// the packages it pulls in (no SwiftNIO, Hummingbird, AsyncHTTPClient or argument-parser).
import PackageDescription

let package = Package(
    name: "EmbeddingApp",
    platforms: [.macOS(.v15), .iOS(.v18)],
    dependencies: [
        .package(name: "VaultLog", path: "../..", traits: []),
    ],
    targets: [
        .executableTarget(
            name: "EmbeddingApp",
            dependencies: [
                .product(name: "VaultLogKit", package: "VaultLog"),
                .product(name: "OfflineSync", package: "VaultLog"),
                .product(name: "BitwardenAPI", package: "VaultLog"),
                .product(name: "VaultModel", package: "VaultLog"),
            ]
        ),
    ]
)
