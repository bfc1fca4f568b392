// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "VaultLog",
    // Minimum versions for the Synchronization module (Mutex, Atomic), not a claim of testing:
    // Linux is where this package is built and tested; see the README's "Platforms".
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "LMDB", targets: ["LMDB"]),
        .library(name: "VaultCrypto", targets: ["VaultCrypto"]),
        .library(name: "VaultJSON", targets: ["VaultJSON"]),
        .library(name: "VaultModel", targets: ["VaultModel"]),
        .library(name: "EventLog", targets: ["EventLog"]),
        .library(name: "OfflineSync", targets: ["OfflineSync"]),
        .library(name: "BitwardenAPI", targets: ["BitwardenAPI"]),
        .library(name: "VaultLogKit", targets: ["VaultLogKit"]),
        .library(name: "BitwardenAPINIO", targets: ["BitwardenAPINIO"]),
        .library(name: "BitwardenEmulator", targets: ["BitwardenEmulator"]),
        .library(name: "Replay", targets: ["Replay"]),
        .library(name: "VaultLogTesting", targets: ["VaultLogTesting"]),
        .executable(name: "vaultlog", targets: ["vaultlog"]),
    ],
    // "Tools" (on by default) brings the server-side parts: the emulator (Hummingbird), the
    // AsyncHTTPClient transport, Replay and the CLI. An app that embeds only the library turns it
    // off (`.package(path: …, traits: [])` or `traits: []` on a versioned dependency) and then
    // resolves no SwiftNIO, Hummingbird, AsyncHTTPClient or argument-parser: see the README.
    traits: [
        .trait(name: "Tools", description: "The Bitwarden emulator, the SwiftNIO transport, Replay and the vaultlog CLI."),
        .default(enabledTraits: ["Tools"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    ],
    targets: [
        // Storage: LMDB from Debian's liblmdb-dev, never vendored.
        .systemLibrary(
            name: "CLMDB",
            path: "Sources/CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]
        ),
        .target(name: "LMDB", dependencies: ["CLMDB"]),

        // Argon2id from Debian's libargon2-dev (the reference implementation), never vendored.
        .systemLibrary(
            name: "CArgon2",
            path: "Sources/CArgon2",
            pkgConfig: "libargon2",
            providers: [.apt(["libargon2-dev"]), .brew(["argon2"])]
        ),

        // AES-256-CBC from Debian's libssl-dev (OpenSSL's libcrypto, EVP interface) on Linux, never
        // vendored: one key schedule and no `Data` copies per message. Elsewhere VaultCrypto uses
        // swift-crypto's AES-CBC, which is also what the tests compare this against.
        .systemLibrary(
            name: "CLibCrypto",
            path: "Sources/CLibCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),

        // Bitwarden-compatible cryptography and the vault item model.
        .target(
            name: "VaultCrypto",
            dependencies: [
                "CArgon2",
                .target(name: "CLibCrypto", condition: .when(platforms: [.linux])),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // JSON without Foundation's coders: a tape decoder and a sorted-keys encoder that give
        // what JSONDecoder and JSONEncoder (.sortedKeys) give, faster; and JSONValue for fields
        // this version does not know. Foundation only: no other module of ours.
        .target(name: "VaultJSON"),
        .target(name: "VaultModel", dependencies: ["VaultCrypto", "VaultJSON"]),

        // The sealed append-only event log.
        .target(
            name: "EventLog",
            dependencies: [
                "LMDB", "VaultCrypto",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // The domain: events, projector, local vault store, repository, resolver, sync.
        .target(
            name: "OfflineSync",
            dependencies: ["EventLog", "VaultJSON", "VaultModel", "VaultCrypto", .product(name: "Logging", package: "swift-log")]
        ),

        // Deterministic dependencies and fault injection for tests, replays and simulations: a
        // hand-moved clock, seeded randomness, a server wrapper that can crash a resolution.
        .target(name: "VaultLogTesting", dependencies: ["OfflineSync", "VaultCrypto", "VaultModel"]),

        // HTTP: the Bitwarden API client and the Bitwarden-compatible emulator.
        .target(
            name: "BitwardenAPI",
            dependencies: [
                "OfflineSync", "VaultCrypto", "VaultJSON", "VaultModel",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The app's front door: OfflineVault over the store, the client and a token store.
        .target(
            name: "VaultLogKit",
            dependencies: [
                "OfflineSync", "BitwardenAPI", "EventLog", "LMDB", "VaultCrypto", "VaultModel",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The client's transport on SwiftNIO, for Linux tools and servers (no FoundationNetworking).
        .target(
            name: "BitwardenAPINIO",
            dependencies: [
                "BitwardenAPI",
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(traits: ["Tools"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Tools"])),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: .when(traits: ["Tools"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["Tools"])),
            ]
        ),
        .target(
            name: "BitwardenEmulator",
            dependencies: [
                "VaultCrypto", "VaultJSON", "VaultModel",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Tools"])),
                .product(name: "HTTPTypes", package: "swift-http-types", condition: .when(traits: ["Tools"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Tools"])),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["Tools"])),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // Scenario fixtures and their deterministic runner, shared by tests and the CLI.
        .target(
            name: "Replay",
            dependencies: [
                "OfflineSync", "EventLog", "BitwardenAPI", "BitwardenAPINIO", "BitwardenEmulator", "VaultCrypto", "VaultModel", "VaultLogTesting",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        .executableTarget(
            name: "vaultlog",
            dependencies: [
                "EventLog", "LMDB", "OfflineSync", "VaultCrypto", "VaultModel", "BitwardenEmulator", "BitwardenAPI", "BitwardenAPINIO", "Replay", "VaultLogTesting",
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: .when(traits: ["Tools"])),
                .product(name: "UnixSignals", package: "swift-service-lifecycle", condition: .when(traits: ["Tools"])),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // Test scaffolding every test target shares (a temporary directory): a test-only
        // module beside the tests, not a product, and Foundation only (LMDBTests stays a test of LMDB).
        .target(name: "VaultLogTestSupport", path: "Tests/VaultLogTestSupport"),

        .testTarget(name: "LMDBTests", dependencies: ["LMDB", "VaultLogTestSupport"]),
        .testTarget(name: "VaultCryptoTests", dependencies: ["VaultCrypto", "VaultLogTesting", .product(name: "Crypto", package: "swift-crypto"), .product(name: "_CryptoExtras", package: "swift-crypto")]),
        .testTarget(name: "VaultModelTests", dependencies: ["VaultModel", "VaultJSON", "VaultCrypto", "VaultLogTesting"], resources: [.copy("Resources")]),
        .testTarget(name: "EventLogTests", dependencies: ["EventLog", "LMDB", "VaultCrypto", "VaultModel", "VaultLogTesting", "VaultLogTestSupport"]),
        .testTarget(name: "OfflineSyncTests", dependencies: ["OfflineSync", "EventLog", "LMDB", "VaultJSON", "VaultModel", "VaultCrypto", "VaultLogTesting", "VaultLogTestSupport"]),
        .testTarget(
            name: "BitwardenEmulatorTests",
            dependencies: ["BitwardenEmulator", "BitwardenAPI", "BitwardenAPINIO", "OfflineSync", "VaultCrypto", "VaultJSON", "VaultModel", "VaultLogTesting"]
        ),
        // The resolver and sync against the emulator over loopback HTTP.
        .testTarget(
            name: "ResolverTests",
            dependencies: ["OfflineSync", "EventLog", "BitwardenAPI", "BitwardenEmulator", "VaultCrypto", "VaultModel", "VaultLogTesting", "VaultLogTestSupport"]
        ),
        // The app façade against the emulator over loopback HTTP, and across two processes.
        .testTarget(
            name: "VaultLogKitTests",
            dependencies: ["VaultLogKit", "OfflineSync", "BitwardenAPI", "BitwardenEmulator", "VaultCrypto", "VaultModel", "VaultLogTesting", "VaultLogTestSupport"]
        ),
        .testTarget(name: "ReplayTests", dependencies: ["Replay", "EventLog", "OfflineSync", "VaultCrypto"]),
        // Runs the built `vaultlog` binary (next to the test bundle after `swift build --build-tests`)
        // against stores it makes with OfflineSync.
        .testTarget(
            name: "CLITests",
            dependencies: ["OfflineSync", "EventLog", "LMDB", "VaultModel", "VaultCrypto", "Replay", "VaultLogTesting", "VaultLogTestSupport"]
        ),
    ]
)
