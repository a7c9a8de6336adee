// swift-tools-version: 6.1
import PackageDescription

// MARK: - Shared settings

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

/// The servers' and tools' allocator: jemalloc (Debian's libjemalloc-dev), linked into the executables,
/// which replaces malloc for the whole process. Measured (BENCHMARKS.md, "Freed off the queries' path"):
/// glibc's malloc made the writer free memory other threads allocated under their arenas' locks, and query
/// p99 under ingest was 2–4× higher with it. The libraries and the tests keep the system malloc.
let jemalloc: [LinkerSetting] = [.linkedLibrary("jemalloc", .when(platforms: [.linux]))]

// MARK: - Package

let package = Package(
    name: "TeamLog",
    platforms: [.macOS(.v15)],  // Synchronization.Mutex
    products: [
        .library(name: "TeamLog", targets: ["TeamLog"]),
        .library(name: "TeamLogStore", targets: ["TeamLogStore"]),
        .library(name: "TeamLogRuntime", targets: ["TeamLogRuntime"]),
        .library(name: "LMDB", targets: ["LMDB"]),
        .library(name: "NATS", targets: ["NATS"]),
        .executable(name: "teamlog", targets: ["teamlog"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        // Already in the graph through Hummingbird; named for its HTTP part types (`ExpectContinue`).
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
    ],
    targets: [
        // MARK: C at the bottom
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]
        ),
        // Only the benchmark's per-recipient-row baseline uses SQLite; the product never links it.
        .systemLibrary(
            name: "CSQLite",
            path: "tools/CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "CNATS",
            pkgConfig: "libnats",
            providers: [.apt(["libnats-dev"])]
        ),
        // MARK: The safe wrapper: the only target that imports CLMDB
        .target(name: "LMDB", dependencies: ["CLMDB", "TeamLogThreads"], swiftSettings: swiftSettings),
        // MARK: The safe NATS / JetStream client: the only target that imports CNATS
        .target(name: "NATS", dependencies: ["CNATS", "TeamLogThreads"], swiftSettings: swiftSettings),
        // MARK: Real nats-server processes (single node and cluster) for tests, the demo and benchmarks
        .target(name: "NATSServer", dependencies: ["TeamLogThreads"], swiftSettings: swiftSettings),
        // MARK: The pure domain
        .target(name: "TeamLog", swiftSettings: swiftSettings),
        // MARK: Seeded workloads (demo, property tests, benchmarks)
        .target(name: "TeamLogWorkload", dependencies: ["TeamLog"], swiftSettings: swiftSettings),
        // MARK: Threads: starting, joining, a monitor and a chunk queue (used by the store and the runtime)
        .target(name: "TeamLogThreads", swiftSettings: swiftSettings),
        // MARK: Storage shell: the log, the projections and their schema
        .target(
            name: "TeamLogStore",
            dependencies: [
                "LMDB", "TeamLog", "TeamLogThreads", .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // MARK: Processing runtime: line reading, the parse pipeline, the processor and the stream loop.
        // Transports (HTTP, NATS) sit on top of it, never below.
        .target(
            name: "TeamLogRuntime",
            dependencies: ["TeamLogStore", "TeamLog", "TeamLogThreads"],
            swiftSettings: swiftSettings
        ),
        // MARK: HTTP transport (Hummingbird 2): parses requests and prints records; the runtime does the rest
        .target(
            name: "TeamLogHTTP",
            dependencies: [
                "TeamLogRuntime", "TeamLogStore", "TeamLog", "TeamLogThreads", "LMDB",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            ],
            swiftSettings: swiftSettings
        ),
        // MARK: NATS JetStream transport: the router, a partition's consumer and publisher, cluster queries
        .target(
            name: "TeamLogNATS",
            dependencies: ["NATS", "TeamLogRuntime", "TeamLogStore", "TeamLog", "TeamLogThreads"],
            swiftSettings: swiftSettings
        ),
        // MARK: CLI
        .executableTarget(
            name: "teamlog",
            dependencies: [
                "TeamLogRuntime", "TeamLogStore", "TeamLog", "TeamLogWorkload", "TeamLogHTTP", "TeamLogNATS", "NATS",
                "TeamLogThreads",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swiftSettings,
            linkerSettings: jemalloc
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
            dependencies: [
                "TeamLog", "TeamLogStore", "TeamLogRuntime", "TeamLogWorkload", "LMDB", "CSQLite", "NATS", "NATSServer",
                "TeamLogNATS", "TeamLogThreads",
            ],
            path: "tools/Bench",
            swiftSettings: swiftSettings,
            linkerSettings: jemalloc
        ),
        .executableTarget(
            name: "teamlog-http-bench",
            dependencies: [
                "TeamLogHTTP", "TeamLogRuntime", "TeamLogStore", "TeamLog", "TeamLogThreads", "TeamLogWorkload",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "tools/HTTPBench",
            swiftSettings: swiftSettings,
            linkerSettings: jemalloc
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
            dependencies: ["TeamLogRuntime", "TeamLogStore", "TeamLog", "TeamLogThreads", "TeamLogWorkload", "LMDB"],
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "LMDBTests", dependencies: ["LMDB", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(
            name: "NATSTests", dependencies: ["NATS", "NATSServer", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "TeamLogTests", dependencies: ["TeamLog", "TestSupport"], swiftSettings: swiftSettings),
        .testTarget(
            name: "TeamLogStoreTests",
            dependencies: ["TeamLogRuntime", "TeamLogStore", "TeamLog", "TeamLogThreads", "LMDB", "TestSupport"],
            exclude: ["Corpus"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TeamLogNATSTests",
            dependencies: [
                "TeamLogNATS", "NATS", "NATSServer", "TeamLogRuntime", "TeamLogStore", "TeamLog", "TeamLogWorkload",
                "TestSupport",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TeamLogHTTPTests",
            dependencies: [
                "TeamLogHTTP", "TeamLogRuntime", "TeamLogStore", "TeamLog", "TeamLogThreads", "TeamLogWorkload", "LMDB",
                "TestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)

// MARK: - package-benchmark micro-benchmarks (built only when asked)

// package-benchmark and its dependencies are fetched and compiled only with the variable set, so
// `swift build`, `swift test` and CI never see them:
// `TEAMLOG_BENCHMARKS=1 swift package --scratch-path .build-bench benchmark`.
if Context.environment["TEAMLOG_BENCHMARKS"] != nil {
    package.dependencies.append(
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]))
    package.targets.append(
        .executableTarget(
            name: "TeamLogBenchmarks",
            dependencies: ["TeamLog", "TeamLogWorkload", .product(name: "Benchmark", package: "benchmark")],
            path: "Benchmarks/TeamLogBenchmarks",
            swiftSettings: swiftSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ))
}
