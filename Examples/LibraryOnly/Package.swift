// swift-tools-version:6.1
// A tiny app that embeds only the library (OfflineSync and BitwardenAPI) with VaultLog's
// "Tools" trait off, as an app would. `make graph` resolves it and lists the packages it pulls
// in: no SwiftNIO, Hummingbird, AsyncHTTPClient or argument-parser.
import PackageDescription

let package = Package(
    name: "LibraryOnly",
    platforms: [.macOS(.v15), .iOS(.v18)],
    dependencies: [
        .package(name: "VaultLog", path: "../..", traits: []),
    ],
    targets: [
        .executableTarget(
            name: "LibraryOnly",
            dependencies: [
                .product(name: "OfflineSync", package: "VaultLog"),
                .product(name: "BitwardenAPI", package: "VaultLog"),
            ]
        ),
    ]
)
