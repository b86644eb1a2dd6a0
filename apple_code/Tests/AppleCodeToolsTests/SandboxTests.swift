import AppleCodeCore
import Foundation
import Testing
@testable import AppleCodeTools

let hasPython = CommandSandbox.findExecutable("python3") != nil

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

    /// Linux's ways out: the sockets of system and session services (D-Bus and `systemd-run`, Docker, a
    /// database) live under /run, which a command sees as an empty folder of its own.
    @Test(.enabled(if: hasBubblewrap, "needs a working bwrap (Linux)"))
    func bubblewrapHidesServiceSockets() async throws {
        let ws = try TempWorkspace()
        let result = await ws.call(RunCommandTool(sandbox: .detected),
                                   ["command": "ls -A /run /var/run; touch /run/x && echo writable"])
        #expect(result.text == "exit code 0\n/run:\n\n/var/run:\nwritable\n"
                || result.text == "exit code 0\n/run:\nuser\n\n/var/run:\nuser\nwritable\n", "\(result.text)")
        #expect(!ws.exists("/run/x"))
    }

    /// Issue 20 item 6: a server and its client on loopback work inside the sandbox (bwrap's own loopback);
    /// any other address is unreachable.
    @Test(.enabled(if: hasBubblewrap && hasPython, "needs a working bwrap (Linux) and python3"))
    func bubblewrapAllowsLoopbackOnly() async throws {
        let ws = try TempWorkspace()
        try ws.write("net.py", """
            import socket
            server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen()
            client = socket.create_connection(server.getsockname(), timeout=5)
            peer, _ = server.accept(); client.sendall(b"loopback ok"); print(peer.recv(64).decode())
            try:
                socket.create_connection(("10.255.255.1", 80), timeout=5)
                print("remote reached")
            except OSError as error:
                print("remote refused:", error.strerror)
            """)
        let result = await ws.call(RunCommandTool(sandbox: .detected), ["command": "python3 net.py"])
        #expect(result.text == "exit code 0\nloopback ok\nremote refused: Network is unreachable\n", "\(result.text)")
    }

    @Test func bubblewrapArguments() {
        let debian = HostFiles(kind: { ["/run": .directory, "/var/run": .symlink][$0] ?? .missing },
                               runtimeDirectory: "/run/user/1000")
        let argv = Bubblewrap.arguments(executable: "/usr/bin/bwrap", workspace: "/w s", host: debian)
        #expect(argv == ["/usr/bin/bwrap", "--ro-bind", "/", "/", "--tmpfs", "/tmp",
                         "--tmpfs", "/run", "--ro-bind-try", "/run/current-system", "/run/current-system",
                         "--dir", "/run/user/1000",
                         "--bind", "/w s", "/w s",
                         "--dev", "/dev", "--proc", "/proc", "--unshare-net", "--unshare-pid", "--as-pid-1",
                         "--new-session", "--die-with-parent",
                         "--setenv", "TMPDIR", "/tmp", "--chdir", "/w s"])
        // An old layout with /var/run a folder of its own; no /run at all; a runtime folder elsewhere.
        let old = HostFiles(kind: { ["/var/run": .directory][$0] ?? .missing }, runtimeDirectory: "/tmp/rt")
        let oldArgv = Bubblewrap.arguments(executable: "/usr/bin/bwrap", workspace: "/w", host: old)
        #expect(oldArgv.contains("/var/run") && !oldArgv.contains("/run") && !oldArgv.contains("/tmp/rt"))
        let command = CommandSandbox.bubblewrap(executable: "/usr/bin/bwrap").argv(command: "make test", workspace: "/w")
        #expect(command.suffix(3) == ["/bin/sh", "-c", "make test"])
        #expect(CommandSandbox.none(reason: "x").argv(command: "ls", workspace: "/w") == ["/bin/sh", "-c", "ls"])
    }
}
