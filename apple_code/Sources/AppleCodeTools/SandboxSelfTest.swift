#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// `apple-code --sandbox-check`: a short self-test of the command sandbox on this machine (scripts/check-macos.sh
/// runs it on a Mac, where nothing else can). Each check runs a real command through the sandbox in a temporary
/// workspace and looks at what it did; a write aimed outside is aimed at the home folder and removed again if it
/// got through.
public enum SandboxSelfTest {
    public struct Check: Sendable, Equatable {
        public let name: String
        public let passed: Bool
        public let detail: String

        public init(name: String, passed: Bool, detail: String) {
            self.name = name
            self.passed = passed
            self.detail = detail
        }
    }

    /// Runs every check (none when there is no working sandbox: that is the one failure). `home` receives the
    /// write that must be refused; `swift` is the swift to build a tiny package with (nil: that check is left out).
    public static func run(sandbox: CommandSandbox = .detected, home: String? = defaultHome,
                           swift: String? = defaultSwift) async -> [Check] {
        switch sandbox {
        case .none, .broken: return [Check(name: "a working command sandbox", passed: false, detail: sandbox.label)]
        case .bubblewrap, .seatbelt: break
        }
        let base = (Workspace.realPath(NSTemporaryDirectory()) ?? "/tmp")
            + "/apple-code-sandbox-check-\(UUID().uuidString)"
        let workspace = base + "/ws"
        guard (try? FileManager.default.createDirectory(atPath: workspace, withIntermediateDirectories: true))
            != nil else {
            return [Check(name: "a temporary workspace", passed: false, detail: "cannot create \(workspace)")]
        }
        defer { try? FileManager.default.removeItem(atPath: base) }
        let runner = Runner(sandbox: sandbox, workspace: workspace)
        var checks = [await runner.writesInside(), await runner.writeOutsideIsRefused(home: home),
                      await runner.gitIsProtected()]
        if let check = await runner.nothingOutlivesTheCommand() { checks.append(check) }
        #if os(macOS)
        checks.append(await runner.openIsRefused())
        #endif
        if let swift { checks.append(await runner.swiftBuildWorks(swift: swift)) }
        return checks
    }

    /// The report: the sandbox, then `ok    <check>` or `FAIL  <check>: <why>`, one a line.
    public static func report(_ checks: [Check], sandbox: CommandSandbox) -> String {
        (["sandbox: \(sandbox.label)"] + checks.map { check in
            check.passed ? "ok    \(check.name)" : "FAIL  \(check.name): \(check.detail)"
        }).joined(separator: "\n")
    }

    public static var defaultSwift: String? { CommandSandbox.findExecutable("swift") }

    public static var defaultHome: String? {
        getenv("HOME").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
    }
}

private struct Runner {
    let sandbox: CommandSandbox
    let workspace: String

    /// Runs `command` in the sandbox; its exit status (nil: it did not exit by itself) and output.
    func run(_ command: String, seconds: Int = 30) async -> (status: Int32?, output: String) {
        guard let outcome = try? await CommandRunner.run(sandbox.argv(command: command, workspace: workspace),
                                                         in: workspace, timeout: .seconds(seconds)) else {
            return (nil, "could not start the command")
        }
        if case .exited(let code) = outcome.ending { return (code, outcome.output.text) }
        return (nil, "it did not finish: \(outcome.ending); " + outcome.output.text)
    }

    func path(_ relative: String) -> String { workspace + "/" + relative }

    func read(_ relative: String) -> String? { try? String(contentsOfFile: path(relative), encoding: .utf8) }

    func writesInside() async -> SandboxSelfTest.Check {
        let (status, output) = await run("echo ok > inside.txt")
        let passed = status == 0 && read("inside.txt") == "ok\n"
        return .init(name: "a command runs in the workspace and writes there", passed: passed,
                     detail: "exit \(status.map(String.init) ?? "none"): \(oneLine(output))")
    }

    func writeOutsideIsRefused(home: String?) async -> SandboxSelfTest.Check {
        let name = "a write outside the workspace is refused"
        guard let home else { return .init(name: name, passed: false, detail: "no home folder ($HOME) to aim at") }
        let target = home + "/.apple-code-sandbox-check-\(UUID().uuidString)"
        _ = await run("echo escaped > \(shellQuoted(target))")
        guard Workspace.fileKind(target) != .missing else { return .init(name: name, passed: true, detail: "") }
        unlink(target)
        return .init(name: name, passed: false, detail: "a command wrote \(target) (removed again)")
    }

    func gitIsProtected() async -> SandboxSelfTest.Check {
        let name = ".git/hooks and .git/config cannot be written"
        let config = "[core]\n"
        do {
            try FileManager.default.createDirectory(atPath: path(".git/hooks"), withIntermediateDirectories: true)
            try config.write(toFile: path(".git/config"), atomically: false, encoding: .utf8)
        } catch {
            return .init(name: name, passed: false, detail: "cannot make a .git folder: \(error)")
        }
        _ = await run("echo 'exit 1' > .git/hooks/pre-commit; echo '[core] hooksPath = /tmp' >> .git/config")
        var written: [String] = []
        if read(".git/hooks/pre-commit") != nil { written.append(".git/hooks/pre-commit") }
        if read(".git/config") != config { written.append(".git/config") }
        return .init(name: name, passed: written.isEmpty, detail: "a command wrote " + written.joined(separator: ", "))
    }

    /// A process that leaves the command's session (perl's setsid: macOS has no setsid command); nil when there
    /// is no perl to start one with.
    func nothingOutlivesTheCommand() async -> SandboxSelfTest.Check? {
        guard access("/usr/bin/perl", X_OK) == 0 else { return nil }
        let marker = "apple-code-sandbox-check-\(UUID().uuidString)"
        _ = await run("/usr/bin/perl -MPOSIX -e 'POSIX::setsid(); exec @ARGV' /bin/sh -c 'sleep 300; true' "
                      + "\(marker) </dev/null >/dev/null 2>&1 & sleep 0.5")
        var left = await onOwnThread { processes(withMarker: marker) }
        for _ in 0..<30 where !left.isEmpty {
            try? await Task.sleep(for: .milliseconds(100))
            left = await onOwnThread { processes(withMarker: marker) }
        }
        for pid in left { _ = killpg(pid, SIGKILL); _ = kill(pid, SIGKILL) }
        return .init(name: "a process a command starts does not outlive it", passed: left.isEmpty,
                     detail: "still running after the command: \(left.map(String.init).joined(separator: ", ")) "
                         + "(killed now)")
    }

    func openIsRefused() async -> SandboxSelfTest.Check {
        // Finder always runs: if this got through, it only comes forward in the background.
        let (status, output) = await run("/usr/bin/open -g -a Finder")
        return .init(name: "`open` cannot start a program outside the sandbox", passed: status != 0,
                     detail: "open exited \(status.map(String.init) ?? "without a status"): \(oneLine(output))")
    }

    func swiftBuildWorks(swift: String) async -> SandboxSelfTest.Check {
        let name = "`swift build --disable-sandbox` of a tiny package works"
        do {
            try FileManager.default.createDirectory(atPath: path("tiny/Sources/tiny"),
                                                    withIntermediateDirectories: true)
            try """
                // swift-tools-version:5.9
                import PackageDescription
                let package = Package(name: "tiny", targets: [.executableTarget(name: "tiny")])

                """.write(toFile: path("tiny/Package.swift"), atomically: false, encoding: .utf8)
            try "print(\"tiny\")\n".write(toFile: path("tiny/Sources/tiny/main.swift"), atomically: false,
                                          encoding: .utf8)
        } catch {
            return .init(name: name, passed: false, detail: "cannot write the package: \(error)")
        }
        let (status, output) = await run("cd tiny && \(shellQuoted(swift)) build --disable-sandbox", seconds: 600)
        let tail = output.split(separator: "\n").suffix(8).joined(separator: " | ")
        return .init(name: name, passed: status == 0, detail: "exit \(status.map(String.init) ?? "none"): \(tail)")
    }
}

/// `text` in single quotes for sh.
func shellQuoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: #"'\''"#) + "'" }

private func oneLine(_ text: String) -> String {
    String(text.split(separator: "\n").joined(separator: " | ").prefix(300))
}

/// The pids of running processes whose command line contains `marker` (`ps`, on Linux and macOS).
func processes(withMarker marker: String) -> [pid_t] {
    let ps = Process()
    ps.executableURL = URL(fileURLWithPath: "/bin/ps")
    ps.arguments = ["-A", "-o", "pid=,stat=,args="]
    let pipe = Pipe()
    ps.standardOutput = pipe
    ps.standardError = FileHandle.nullDevice
    guard (try? ps.run()) != nil else { return [] }
    let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    ps.waitUntilExit()
    return text.split(separator: "\n").compactMap { line in
        let fields = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
        guard fields.count == 3, fields[2].contains(marker), !fields[1].hasPrefix("Z") else { return nil }
        return pid_t(fields[0])
    }
}
