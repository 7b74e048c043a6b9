// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "EventLog",
    products: [
        .library(name: "EventLog", targets: ["EventLog"]),
        .library(name: "Effects", targets: ["Effects"]),
        .library(name: "Objects", targets: ["Objects"]),
        .library(name: "UpdatePrompts", targets: ["UpdatePrompts"]),
        .library(name: "Deploys", targets: ["Deploys"]),
        .library(name: "Fleet", targets: ["Fleet"]),
        .library(name: "EventLogTesting", targets: ["EventLogTesting"]),
        .library(name: "EventLogCLI", targets: ["EventLogCLI"]),
        .library(name: "EffectsCLI", targets: ["EffectsCLI"]),
        .library(name: "ObjectsCLI", targets: ["ObjectsCLI"]),
        .library(name: "UpdatePromptsCLI", targets: ["UpdatePromptsCLI"]),
        .library(name: "DeploysCLI", targets: ["DeploysCLI"]),
        .library(name: "FleetCLI", targets: ["FleetCLI"]),
        .executable(name: "eventlog", targets: ["eventlog"]),
        .executable(name: "counter-log", targets: ["counter-log"]),
        .executable(name: "eventlog-bench", targets: ["EventLogBenchmarks"]),
    ],
    targets: [
        // liblmdb from the system (Debian: liblmdb-dev).
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]
        ),
        // SHA-256 from OpenSSL's libcrypto (Debian: libssl-dev), for deploy assets.
        .systemLibrary(
            name: "CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // libcurl (Debian: libcurl4-openssl-dev), the HTTP transport of deploys and update lookups.
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // nats.c, the NATS client with JetStream (Debian: libnats-dev), for the fleet.
        .systemLibrary(
            name: "CNATS",
            pkgConfig: "libnats",
            providers: [.apt(["libnats-dev"])]
        ),
        // CRC-32C with the CPU's instruction, where it has one.
        .target(name: "CCRC32C"),
        // SHA-256 with the CPU's SHA extensions, where it has them.
        .target(name: "CSHA256"),
        // Turns a fault reading a damaged LMDB file into a one-line error, for the command line.
        .target(name: "CFaultGuard"),
        // The log, its records, state values, snapshots and verification.
        .target(name: "EventLog", dependencies: ["CLMDB", "CCRC32C", "CSHA256", "CFaultGuard"]),
        // Plans, steps and the one apply step shared by taps, URLs, tests and capture scripts.
        .target(name: "Effects", dependencies: ["EventLog"]),
        // Typed collections of Codable objects whose every save and delete is an event.
        .target(name: "Objects", dependencies: ["EventLog"]),
        // HTTP GETs through libcurl, bodies streamed chunk by chunk (for lookups and deploys).
        .target(name: "HTTPFetch", dependencies: ["CCurl"]),
        // The App Store version check: lookups, forced and optional prompts, every decision an event.
        .target(name: "UpdatePrompts", dependencies: ["EventLog", "HTTPFetch"]),
        // Web bundles shipped into app installs over Expo Updates v1, every transition an event.
        .target(name: "Deploys", dependencies: ["EventLog", "HTTPFetch", "CCrypto"]),
        // Logs of many installs in NATS JetStream: shipped, pulled back byte for byte, bisected together.
        .target(name: "Fleet", dependencies: ["EventLog", "CNATS"]),
        // The botmessages demo app: its effects, properties, sample data and URL routes.
        .target(name: "DemoMessenger", dependencies: ["Effects", "Objects", "UpdatePrompts", "Deploys"]),
        // Test support: temporary logs with hand-moved clocks, exhaustive assertions on the trace,
        // recorded sessions replayed as regression tests; for Swift Testing and XCTest alike.
        .target(name: "EventLogTesting", dependencies: ["EventLog", "Effects"]),
        // The engine's commands, and the public API an app builds its own command line with: a pure
        // parser and a runner, testable in-process.
        .target(name: "EventLogCLI", dependencies: ["EventLog"]),
        // `testgen` for an app of effects: a Swift Testing test that drives a recorded range again.
        .target(name: "EffectsCLI", dependencies: ["EventLogCLI", "EventLog", "Effects"]),
        // Each family's `EventFamily` value (its code, read models and commands), for an app to list.
        .target(name: "ObjectsCLI", dependencies: ["EventLogCLI", "EventLog", "Objects"]),
        .target(name: "UpdatePromptsCLI", dependencies: ["EventLogCLI", "EventLog", "UpdatePrompts", "HTTPFetch"]),
        .target(name: "DeploysCLI", dependencies: ["EventLogCLI", "EventLog", "Deploys", "HTTPFetch", "Fleet", "FleetCLI"]),
        .target(name: "FleetCLI", dependencies: ["EventLogCLI", "EventLog", "Fleet"]),
        // The demo's command line: its code, its families and commands, on EventLogCLI's public API alone.
        .target(name: "DemoCLI", dependencies: ["EventLogCLI", "EffectsCLI", "DemoMessenger", "Effects", "EventLog", "ObjectsCLI", "UpdatePromptsCLI",
                                                "DeploysCLI", "FleetCLI"]),
        .executableTarget(name: "eventlog", dependencies: ["EventLogCLI", "DemoCLI"]),
        // A second app with a family of its own and nothing else: it links the core alone.
        .executableTarget(name: "counter-log", dependencies: ["EventLogCLI", "EventLog"]),

        // The benchmark harness and its peers (raw LMDB, SQLite, JSON lines); build it in release.
        .systemLibrary(
            name: "CSQLite",
            path: "Benchmarks/CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .executableTarget(
            name: "EventLogBenchmarks",
            dependencies: ["EventLog", "Objects", "Fleet", "LoopbackServer", "CLMDB", "CNATS", "CSQLite"],
            path: "Benchmarks/EventLogBenchmarks"
        ),

        // Fuzz targets for the parsers and decoders: a corpus replayer in a plain build, a libFuzzer
        // binary built with `-sanitize=fuzzer -DFUZZING` (tools/fuzz.sh).
        .executableTarget(
            name: "eventlog-fuzz",
            dependencies: ["EventLog", "Effects", "DemoMessenger", "Deploys", "UpdatePrompts"],
            path: "Tests/EventLogFuzz",
            exclude: ["Corpus"],
            swiftSettings: [.enableExperimentalFeature("Extern")] // `@_extern(c)`, to call libFuzzer's driver
        ),

        .testTarget(name: "EventLogTests", dependencies: ["EventLog", "EventLogTesting", "CLMDB"]),
        .testTarget(name: "EffectsTests", dependencies: ["Effects", "EventLog", "EventLogTesting"]),
        .testTarget(name: "ObjectsTests", dependencies: ["Objects", "EventLog", "EventLogTesting"]),
        // Servers the tests start on loopback: real HTTP, no mocks.
        .target(name: "LoopbackServer", path: "Tests/LoopbackServer", exclude: ["fixture_server.py", "tampering_proxy.py"]),
        .testTarget(name: "HTTPFetchTests", dependencies: ["HTTPFetch", "LoopbackServer"]),
        .testTarget(name: "UpdatePromptsTests", dependencies: ["UpdatePrompts", "EventLog", "EventLogTesting", "LoopbackServer"]),
        .testTarget(name: "FleetTests", dependencies: ["Fleet", "CNATS", "EventLog", "EventLogTesting", "LoopbackServer"]),
        .testTarget(name: "DeploysTests", dependencies: ["Deploys", "HTTPFetch", "EventLog", "EventLogTesting", "LoopbackServer"]),
        .testTarget(name: "DemoMessengerTests", dependencies: ["DemoMessenger", "Effects", "EventLog", "EventLogTesting"]),
        .testTarget(name: "EventLogCLITests", dependencies: ["EventLogCLI", "DemoCLI", "DemoMessenger", "Deploys", "Effects", "EventLog", "EventLogTesting", "LoopbackServer"],
                    exclude: ["Fixtures"]),
        .testTarget(name: "EventLogBenchmarksTests", dependencies: ["EventLogBenchmarks"]),
        .testTarget(name: "EventLogTestingTests", dependencies: ["EventLogTesting", "EventLog", "Effects", "Objects", "UpdatePrompts", "DemoMessenger", "EventLogCLI", "DemoCLI"],
                    exclude: ["Fixtures"]),
    ]
)
