import AppleCodeCore
import Foundation
import Testing
@testable import AppleCodeTools

/// The command sandboxes as they run here (bwrap on Linux, sandbox-exec on macOS) and the argv that starts them.
@Suite struct SandboxTests {
    /// bwrap: writes inside the workspace work; writes anywhere else on the host are refused or land in the
    /// sandbox's private /tmp and vanish; there is no network but loopback.
    @Test(.enabled(if: hasBubblewrap, "needs a working bwrap (Linux)"))
    func bubblewrapRefusesWritesOutsideTheWorkspace() async throws {
        let ws = try TempWorkspace()
        let probe = "/var/tmp/apple-code-sandbox-\(UUID().uuidString)"
        defer { unlink(probe) }  // only there if the sandbox failed
        let command = """
            echo in > inside.txt; echo out > \(ws.outside)/escaped.txt; echo var > \(probe); \
            echo tmp > /tmp/private.txt && cat /tmp/private.txt; grep -c : /proc/net/dev; true
            """
        let result = await ws.call(RunCommandTool(sandbox: .detected), ["command": .string(command)])
        #expect(ws.read("inside.txt") == "in\n")
        #expect(ws.outsideEntries() == ["secret.txt"])
        #expect(!ws.exists(probe))
        #expect(!ws.exists("/tmp/private.txt"))
        #expect(result.text.contains("Read-only file system"))
        #expect(result.text.contains("tmp\n1\n"), "only the loopback interface: \(result.text)")
    }

    /// sandbox-exec (macOS): the workspace is writable, a folder outside the workspace and temp is not.
    @Test(.enabled(if: hasSeatbelt, "needs a working sandbox-exec (macOS)"))
    func seatbeltRefusesWritesOutsideTheWorkspace() async throws {
        let ws = try TempWorkspace()
        let probe = NSHomeDirectory() + "/.apple-code-sandbox-probe-\(UUID().uuidString)"
        defer { unlink(probe) }  // only there if the sandbox failed
        let result = await ws.call(RunCommandTool(sandbox: .detected),
                                   ["command": .string("echo in > inside.txt; echo out > \(probe); true")])
        #expect(ws.read("inside.txt") == "in\n")
        #expect(!ws.exists(probe))
        #expect(result.text.contains("Operation not permitted"), "\(result.text)")
    }

    @Test func bubblewrapArguments() {
        let argv = CommandSandbox.bubblewrap(executable: "/usr/bin/bwrap").argv(command: "make test", workspace: "/w s")
        #expect(argv == ["/usr/bin/bwrap", "--ro-bind", "/", "/", "--tmpfs", "/tmp", "--bind", "/w s", "/w s",
                         "--dev", "/dev", "--proc", "/proc", "--unshare-net", "--unshare-pid", "--as-pid-1",
                         "--new-session", "--die-with-parent",
                         "--setenv", "TMPDIR", "/tmp", "--chdir", "/w s", "/bin/sh", "-c", "make test"])
        #expect(CommandSandbox.none(reason: "x").argv(command: "ls", workspace: "/w") == ["/bin/sh", "-c", "ls"])
    }
}
