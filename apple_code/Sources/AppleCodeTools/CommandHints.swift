import Synchronization

/// Failures a command meets on a Mac's toolchain that the model cannot work out from the output alone, each with
/// the one line that gets past it. Without it a model rediscovers the way around (or never does) in every run.
struct CommandHint: Sendable {
    /// Text in the command's output that marks this failure.
    let marker: String
    let text: String

    static let known: [CommandHint] = [
        // SwiftPM (and swiftc's macro plugins, xcodebuild) start sandbox-exec themselves; macOS refuses a sandbox
        // inside apple-code's: "sandbox-exec: sandbox_apply: Operation not permitted", exit 71.
        CommandHint(
            marker: "sandbox_apply",
            text: "Hint: macOS refuses a sandbox inside apple-code's; add --disable-sandbox (swift build, test, run, "
                + "package; xcodebuild: -IDEPackageSupportDisableManifestSandbox=YES)."),
        // With only the Command Line Tools, `import Testing` fails: Swift Testing comes with Xcode.
        CommandHint(
            marker: "no such module 'Testing'",
            text: "Hint: Swift Testing needs Xcode, which this Mac lacks; write the tests with XCTest "
                + "(import XCTest) or ask the user to install Xcode."),
    ]
}

/// The hints one run has given: each is given once, with the first failed command that shows its marker.
/// Shared by every copy of the tool (a tool is a value; the run is one).
final class CommandHints: Sendable {
    private let given = Mutex<Set<String>>([])

    /// The hints for a failed command's output that this run has not given yet, marked as given.
    func new(for output: String) -> [String] {
        given.withLock { given in
            CommandHint.known.filter { output.contains($0.marker) && given.insert($0.marker).inserted }.map(\.text)
        }
    }
}
