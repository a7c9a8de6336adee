// swift-tools-version: 6.1
import PackageDescription

// MARK: - Shared settings

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

// MARK: - Package

let package = Package(
    name: "TeamLog",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "TeamLog", targets: ["TeamLog"]),
        .library(name: "TeamLogStore", targets: ["TeamLogStore"]),
        .library(name: "LMDB", targets: ["LMDB"]),
        .executable(name: "teamlog", targets: ["teamlog"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
    ],
    targets: [
        // MARK: C at the bottom
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]
        ),
        // MARK: The safe wrapper: the only target that imports CLMDB
        .target(name: "LMDB", dependencies: ["CLMDB"], swiftSettings: swiftSettings),
        // MARK: The pure domain
        .target(name: "TeamLog", swiftSettings: swiftSettings),
        // MARK: Seeded workloads (demo, property tests, benchmarks)
        .target(name: "TeamLogWorkload", dependencies: ["TeamLog"], swiftSettings: swiftSettings),
        // MARK: Storage shell
        .target(
            name: "TeamLogStore",
            dependencies: ["LMDB", "TeamLog", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        // MARK: CLI
        .executableTarget(
            name: "teamlog",
            dependencies: [
                "TeamLogStore", "TeamLog", "TeamLogWorkload",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        // MARK: Tools (swift run -c release …)
        .executableTarget(
            name: "teamlog-fanout-bench",
            dependencies: ["TeamLog", "TeamLogWorkload"],
            path: "tools/FanOutBench",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "teamlog-bench",
            dependencies: ["TeamLog", "TeamLogStore", "TeamLogWorkload", "LMDB"],
            path: "tools/Bench",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "teamlog-gen",
            dependencies: ["TeamLog", "TeamLogWorkload"],
            path: "tools/Gen",
            swiftSettings: swiftSettings
        ),
        // MARK: Tests
        .target(
            name: "TestSupport",
            dependencies: ["TeamLogStore", "TeamLog", "TeamLogWorkload", "LMDB"],
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "LMDBTests", dependencies: ["LMDB", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "TeamLogTests", dependencies: ["TeamLog", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(
            name: "TeamLogStoreTests",
            dependencies: ["TeamLogStore", "TeamLog", "LMDB", "TestSupport"],
            exclude: ["Corpus"],
            swiftSettings: swiftSettings
        ),
    ]
)

// MARK: - The per-recipient-row SQLite baseline (built only when asked)

// GRDB (SQLite) is needed only by this benchmark baseline, so ordinary builds and `swift test` do not
// fetch or compile it: `TEAMLOG_SQLITE_BASELINE=1 swift run -c release teamlog-sqlite-baseline`.
if Context.environment["TEAMLOG_SQLITE_BASELINE"] != nil {
    package.dependencies.append(.package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"))
    package.targets.append(
        .executableTarget(
            name: "teamlog-sqlite-baseline",
            dependencies: ["TeamLog", "TeamLogStore", "TeamLogWorkload", .product(name: "GRDB", package: "GRDB.swift")],
            path: "tools/SQLiteBaseline",
            swiftSettings: swiftSettings
        ))
}
