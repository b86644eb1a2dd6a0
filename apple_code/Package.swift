// swift-tools-version: 6.2
// apple-code: a coding agent on Apple's on-device model (and any OpenAI-compatible server).
// No outside dependency: everything here builds with the toolchain alone.
import PackageDescription

// Targets compiled against the mirror. The define changes their build flags, so that objects compiled before the
// mirror became resilient are rebuilt (the driver's incremental build does not notice a dependency's resilience
// change; stale objects crash). It selects no code.
// On Linux the mirror and its clients are built as with the 26.4 SDK (tokenCount, contextSize, `@concurrent` tool
// calls), so the tests run the newest code path; scripts/fm-interface-gate.sh type-checks the 26.1 variant too.
let linuxSDK: SwiftSetting = .define("FM_SDK_26_4", .when(platforms: [.linux]))
let mirrorClientSettings: [SwiftSetting] = [.define("FM_MIRROR_RESILIENT", .when(platforms: [.linux])), linuxSDK]

let package = Package(
    name: "apple-code",
    platforms: [.macOS(.v26)],
    products: [
        .executable(name: "apple-code", targets: ["AppleCodeCLI"]),
        .executable(name: "apple-flow-launcher", targets: ["AppleFlowLauncher"]),
    ],
    targets: [
        // Shared vocabulary: options, tool protocol and parameter specs, budget, events, backend protocol.
        .target(name: "AppleCodeCore"),
        // Workspace confinement, the seven tools, the command runner and OS sandboxes.
        .target(name: "AppleCodeTools", dependencies: ["AppleCodeCore"]),
        // The agent loop and the OpenAI-compatible backend.
        .target(name: "AppleCodeAgent", dependencies: ["AppleCodeCore"]),
        // Plan-and-execute over fresh context windows (any backend).
        .target(name: "AppleCodePlan", dependencies: ["AppleCodeCore"]),
        // Linux-only mirror of the FoundationModels subset the FM backend uses; never built for macOS.
        // Resilient and outside the package, as the real framework is: a switch over one of its non-frozen enums
        // without `@unknown default` is then an error on Linux too (Swift 6 mode), not first on a Mac. (Inside one
        // package, resilient enums count as frozen.) Its only warning, that Foundation is not resilient, is noise.
        .target(
            name: "FoundationModelsMirror",
            packageAccess: false,
            swiftSettings: [
                .unsafeFlags(["-enable-library-evolution", "-suppress-warnings"], .when(platforms: [.linux])),
                linuxSDK,
            ]
        ),
        // The only code that talks to FoundationModels (the real framework on macOS, the mirror on Linux).
        .target(
            name: "AppleCodeFM",
            dependencies: [
                "AppleCodeCore",
                .target(name: "FoundationModelsMirror", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: mirrorClientSettings
        ),
        .executableTarget(
            name: "AppleCodeCLI",
            dependencies: ["AppleCodeCore", "AppleCodeTools", "AppleCodeAgent", "AppleCodePlan", "AppleCodeFM"],
            path: "Sources/apple-code"
        ),
        // The executable of `Apple Flow.app`, the app the launchd job runs: it starts the daemon's Python as its
        // child, so that macOS holds "Apple Flow" responsible for its file access and Apple events. The C library
        // only (its tests run the built binary with real processes: tests/launcher in the Python suite).
        .executableTarget(name: "AppleFlowLauncher", path: "Sources/apple-flow-launcher"),
        .testTarget(name: "AppleCodeCoreTests", dependencies: ["AppleCodeCore"]),
        .testTarget(name: "AppleCodeToolsTests", dependencies: ["AppleCodeTools", "AppleCodeCore"]),
        .testTarget(name: "AppleCodeAgentTests", dependencies: ["AppleCodeAgent", "AppleCodeCore", "AppleCodeTools"]),
        // Also the FM backend on the Linux mirror and the real tools: a plan run with one session per worker.
        .testTarget(
            name: "AppleCodePlanTests",
            dependencies: [
                "AppleCodePlan", "AppleCodeCore", "AppleCodeFM", "AppleCodeTools",
                .target(name: "FoundationModelsMirror", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: mirrorClientSettings
        ),
        .testTarget(
            name: "AppleCodeFMTests",
            dependencies: [
                "AppleCodeFM", "AppleCodeCore", "AppleCodeTools",
                .target(name: "FoundationModelsMirror", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: mirrorClientSettings
        ),
    ]
)
