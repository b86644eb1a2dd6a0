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

    /// No capabilities inside a command, whoever runs apple-code (here root, in the project's tests usually): with
    /// them, `umount` of what covers a hidden path uncovered it and a read-write remount wrote outside the
    /// workspace. tests/apple_code/test_sandbox_cli.py runs the same as a normal user.
    @Test(.enabled(if: hasBubblewrap, "needs a working bwrap (Linux)"))
    func bubblewrapLeavesNoCapabilities() async throws {
        let ws = try TempWorkspace()
        try ws.write(".env", "TOKEN=env-secret\n")
        let workspace = try Workspace(ws.path, hidden: HiddenPaths(paths: [ws.path + "/.env"]))
        let probe = "/var/tmp/apple-code-remount-\(UUID().uuidString)"
        defer { unlink(probe) }  // only there if the sandbox failed
        let command = """
            grep -E '^Cap(Inh|Prm|Eff|Amb):' /proc/self/status; \
            umount -l .env 2>/dev/null && echo unmounted; cat .env 2>/dev/null; \
            mount -o remount,bind,rw / 2>/dev/null && echo remounted; (echo x > \(probe)) 2>/dev/null; true
            """
        func run(_ command: String) async throws -> String {
            try await RunCommandTool(sandbox: .detected)
                .perform(ToolArguments(["command": .string(command)]), in: workspace,
                         context: ToolContext(workspace: ws.path, maxResultTokens: 3000)).text
        }
        let zero = "0000000000000000"
        let said = try await run(command)
        #expect(said == "exit code 0\nCapInh:\t\(zero)\nCapPrm:\t\(zero)\nCapEff:\t\(zero)\nCapAmb:\t\(zero)\n",
                "\(said)")
        #expect(!ws.exists(probe))
        #expect(ws.read(".env") == "TOKEN=env-secret\n")
        // Run by root with a user namespace (and always as a normal user): not even a bounding set to regain from.
        if case .bubblewrap(_, let userNamespace) = CommandSandbox.detected, userNamespace || geteuid() != 0 {
            #expect(try await run("grep '^CapBnd:' /proc/self/status") == "exit code 0\nCapBnd:\t\(zero)\n")
        }
    }

    /// A server and its client on loopback work inside the sandbox (bwrap's own loopback);
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

    /// A workspace of `/`, a home folder or a folder above one would make shell start-up files
    /// and ~/Library/LaunchAgents writable: refused.
    @Test(arguments: [
        ("/", "is the root folder"),
        ("/Users/me", "is the home folder"),
        ("/Users", "holds the home folder /Users/me"),
        ("/var/root", "is the home folder"),
        ("/Users/me/Library", "is the home folder's Library"),
        ("/Users/me/Library/LaunchAgents", "is in the home folder's Library/LaunchAgents"),
        ("/Users/me/Library/LaunchAgents/sub", "is in the home folder's Library/LaunchAgents"),
    ])
    func broadWorkspacesAreRefused(path: String, said: String) {
        let problem = CommandSandbox.broadFolderProblem(path, homes: ["/Users/me", "/var/root"])
        #expect(problem == said)
    }

    @Test(arguments: ["/Users/me/code/site", "/Users/meow", "/tmp/ws", "/Users/me/.config",
                      "/Users/me/Library/Mobile Documents/com~apple~CloudDocs/code", "/Users/me/Libraryx"])
    func projectFoldersAreAccepted(path: String) {
        #expect(CommandSandbox.broadFolderProblem(path, homes: ["/Users/me"]) == nil)
    }

    /// Git runs .git/hooks and what .git/config names later, outside any sandbox. Under bwrap
    /// they are read-only, and `.git` itself cannot be replaced or removed; the rest of .git stays writable.
    @Test(.enabled(if: hasBubblewrap, "needs a working bwrap (Linux)"))
    func bubblewrapKeepsGitHooksAndConfigReadOnly() async throws {
        let ws = try TempWorkspace()
        try ws.write(".git/config", "[core]\n")
        try ws.write(".git/hooks/pre-commit.sample", "#!/bin/sh\n")
        try ws.write(".git/modules/lib/config", "[core]\n")
        try ws.write(".git/modules/lib/hooks/README", "\n")
        let command = """
            echo evil > .git/hooks/pre-commit; echo '[core] hooksPath = /tmp' >> .git/config; \
            echo evil > .git/modules/lib/hooks/pre-commit; echo x >> .git/modules/lib/config; \
            mv .git .git-old; rm -rf .git/hooks; echo ok > .git/index && echo index written
            """
        let result = await ws.call(RunCommandTool(sandbox: .detected), ["command": .string(command)])
        #expect(ws.read(".git/config") == "[core]\n")
        #expect(ws.read(".git/modules/lib/config") == "[core]\n")
        #expect(ws.read(".git/hooks/pre-commit") == nil)
        #expect(ws.read(".git/modules/lib/hooks/pre-commit") == nil)
        #expect(ws.read(".git/hooks/pre-commit.sample") == "#!/bin/sh\n")
        #expect(ws.read(".git/index") == "ok\n")
        #expect(result.text.contains("index written"), "\(result.text)")
    }

    /// The folder core.hooksPath names inside the workspace is read-only to commands too (git runs its hooks),
    /// also when it does not exist yet; the rest of the workspace stays writable.
    @Test(.enabled(if: hasBubblewrap, "needs a working bwrap (Linux)"))
    func bubblewrapKeepsTheCoreHooksPathFolderReadOnly() async throws {
        for existing in [true, false] {
            let ws = try TempWorkspace()
            try ws.write(".git/config", "[core]\n\thooksPath = .githooks\n")
            if existing { try ws.write(".githooks/pre-push", "#!/bin/sh\n") }
            let command = "echo evil > .githooks/pre-commit; echo evil >> .githooks/pre-push; echo ok > a.txt"
            let result = await ws.call(RunCommandTool(sandbox: .detected), ["command": .string(command)])
            #expect(ws.read(".githooks/pre-commit") == nil, "\(result.text)")
            #expect(ws.read(".githooks/pre-push") == (existing ? "#!/bin/sh\n" : nil))
            #expect(ws.read("a.txt") == "ok\n")
        }
    }

    @Test func bubblewrapHooksPathArguments() {
        let host = HostFiles(kind: { ["/w/.githooks": .directory][$0] ?? .missing }, entries: { _ in [] },
                             runtimeDirectory: nil)
        let argv = Bubblewrap.arguments(executable: "bwrap", workspace: "/w", host: host, hooksFolder: "/w/.githooks")
        #expect(argv.joined(separator: " ").contains("--bind /w /w --ro-bind /w/.githooks /w/.githooks --dev"))
        let missing = Bubblewrap.arguments(executable: "bwrap", workspace: "/w", host: host, hooksFolder: "/w/hooks")
        #expect(missing.joined(separator: " ").contains("--tmpfs /w/hooks --remount-ro /w/hooks --dev"))
        #expect(!Bubblewrap.arguments(executable: "bwrap", workspace: "/w", host: host).contains("/w/.githooks"))
    }

    /// Everyday git still works with hooks, config and pointers read-only: add, commit, checkout -b, stash, merge.
    @Test(.enabled(if: hasBubblewrap && CommandSandbox.findExecutable("git") != nil, "needs bwrap and git"))
    func bubblewrapLetsGitCommit() async throws {
        let ws = try TempWorkspace()
        let git = Process()
        git.executableURL = URL(fileURLWithPath: "/bin/sh")
        git.arguments = ["-c", "cd \"$0\" && git init -q", ws.path]
        try git.run()
        await onOwnThread { git.waitUntilExit() }
        // add, commit, checkout -b, stash (and pop), merge: what git writes for them stays writable.
        let command = """
            g() { git -c user.name=t -c user.email=t@example.com "$@"; }; \
            echo hi > a.txt && g add a.txt && g commit -qm one && g branch topic && g checkout -qb side \
            && echo t > t.txt && g add t.txt && g commit -qm two && g checkout -q topic \
            && echo more >> a.txt && g stash -q && g stash pop -q && g stash -q \
            && g merge -q --no-ff -m merged side && g stash pop -q \
            && g log --oneline | wc -l && g status --short
            """
        let result = await ws.call(RunCommandTool(sandbox: .detected), ["command": .string(command)])
        #expect(result.text == "exit code 0\n3\n M a.txt\n", "\(result.text)")
    }

    /// `swift build` and `swift test` of a package in the workspace work: with the home folder's ~/.cache read-only,
    /// clang's module cache and SwiftPM's need a writable cache folder of the command's own.
    @Test(.enabled(if: hasBubblewrap && CommandSandbox.findExecutable("swift") != nil, "needs bwrap and swift"))
    func bubblewrapBuildsAndTestsASwiftPackage() async throws {
        let ws = try TempWorkspace()
        try ws.write("tiny/Package.swift", """
            // swift-tools-version:5.9
            import PackageDescription
            let package = Package(name: "tiny", targets: [
                .target(name: "TinyLib"), .executableTarget(name: "tiny", dependencies: ["TinyLib"]),
                .testTarget(name: "TinyLibTests", dependencies: ["TinyLib"]),
            ])

            """)
        try ws.write("tiny/Sources/TinyLib/TinyLib.swift", "public func twice(_ x: Int) -> Int { 2 * x }\n")
        try ws.write("tiny/Sources/tiny/main.swift", "import TinyLib\nprint(\"tiny built \\(twice(21))\")\n")
        try ws.write("tiny/Tests/TinyLibTests/TinyTests.swift", """
            import XCTest
            @testable import TinyLib
            final class TinyTests: XCTestCase { func testTwice() { XCTAssertEqual(twice(2), 4) } }

            """)
        let command = "cd tiny && swift build --disable-sandbox >build.log 2>&1; tail -3 build.log; .build/debug/tiny; "
            + "swift test --disable-sandbox 2>&1 | grep -m1 -o 'Executed 1 test, with 0 failures'; "
            + "echo \"$XDG_CACHE_HOME $CLANG_MODULE_CACHE_PATH\"; touch ~/.cache/x 2>/dev/null || echo home cache read-only"
        let result = await ws.call(RunCommandTool(sandbox: .detected),
                                   ["command": .string(command), "timeout": 600])
        #expect(result.text.contains("tiny built 42\nExecuted 1 test, with 0 failures\n"
                                     + "/tmp/.cache /tmp/.cache/clang/ModuleCache\n"), "\(result.text)")
        if Workspace.fileKind(NSHomeDirectory() + "/.cache") == .directory, !NSHomeDirectory().hasPrefix("/tmp/") {
            #expect(result.text.contains("home cache read-only"), "\(result.text)")
        }
    }

    /// On Linux: make, python3 and npm run inside the sandbox (each where installed).
    @Test(.enabled(if: hasBubblewrap, "needs a working bwrap (Linux)"))
    func bubblewrapRunsEverydayTools() async throws {
        let ws = try TempWorkspace()
        try ws.write("Makefile", "all:\n\techo built > out.txt\n")
        try ws.write("package.json", #"{"name": "x", "version": "1.0.0", "scripts": {"test": "echo npm-ok"}}"#)
        var steps: [(command: String, says: String)] = []
        for (tool, command, says) in [("make", "make -s && cat out.txt", "built"),
                                      ("python3", "python3 -c 'print(6 * 7)'", "42"),
                                      ("npm", "npm test --silent", "npm-ok")]
        where CommandSandbox.findExecutable(tool) != nil {
            steps.append((command, says))
        }
        for step in steps {
            let result = await ws.call(RunCommandTool(sandbox: .detected), ["command": .string(step.command)])
            #expect(result.text == "exit code 0\n\(step.says)\n", "\(step.command): \(result.text)")
        }
    }

    /// A repository without a hooks folder gets an empty read-only one for the command.
    @Test(.enabled(if: hasBubblewrap, "needs a working bwrap (Linux)"))
    func bubblewrapBlocksANewHooksFolder() async throws {
        let ws = try TempWorkspace()
        try ws.write(".git/config", "[core]\n")
        let result = await ws.call(RunCommandTool(sandbox: .detected),
                                   ["command": "mkdir -p .git/hooks; echo evil > .git/hooks/pre-commit; true"])
        #expect(ws.read(".git/hooks/pre-commit") == nil, "\(result.text)")
    }

    /// A `.git` file (a worktree's or a submodule's pointer to its repository) cannot be changed or replaced.
    @Test(.enabled(if: hasBubblewrap, "needs a working bwrap (Linux)"))
    func bubblewrapKeepsAGitFileReadOnly() async throws {
        let ws = try TempWorkspace()
        try ws.write(".git", "gitdir: ../repo/.git/worktrees/ws\n")
        let result = await ws.call(RunCommandTool(sandbox: .detected),
                                   ["command": "echo 'gitdir: evil' > .git; rm -f .git; true"])
        #expect(ws.read(".git") == "gitdir: ../repo/.git/worktrees/ws\n", "\(result.text)")
    }

    @Test func bubblewrapGitArguments() {
        let files: [String: Workspace.FileKind] = [
            "/w/.git": .directory, "/w/.git/config": .file, "/w/.git/hooks": .directory,
            "/w/.git/modules": .directory, "/w/.git/modules/lib": .directory, "/w/.git/modules/lib/config": .file,
            "/w/.git/modules/lib/hooks": .directory, "/w/.git/worktrees": .directory,
            "/w/.git/worktrees/wt": .directory, "/w/.git/worktrees/wt/config.worktree": .file,
            "/w/.git/modules/lib/HEAD": .file, "/w/.git/worktrees/wt/HEAD": .file,
        ]
        let listing = ["/w/.git/modules": ["lib"], "/w/.git/worktrees": ["wt"]]
        let host = HostFiles(kind: { files[$0] ?? .missing }, entries: { listing[$0] ?? [] }, runtimeDirectory: nil)
        #expect(Bubblewrap.gitProtection(workspace: "/w", host: host) == [
            "--bind", "/w/.git", "/w/.git",
            "--ro-bind", "/w/.git/config", "/w/.git/config",
            "--ro-bind", "/w/.git/hooks", "/w/.git/hooks",
            "--ro-bind", "/w/.git/modules/lib/config", "/w/.git/modules/lib/config",
            "--ro-bind", "/w/.git/modules/lib/hooks", "/w/.git/modules/lib/hooks",
            "--ro-bind", "/w/.git/worktrees/wt/config.worktree", "/w/.git/worktrees/wt/config.worktree",
        ])
        let noHooks = HostFiles(kind: { ["/w/.git": .directory, "/w/.git/config": .file][$0] ?? .missing },
                                entries: { _ in [] }, runtimeDirectory: nil)
        #expect(Bubblewrap.gitProtection(workspace: "/w", host: noHooks) == [
            "--bind", "/w/.git", "/w/.git", "--ro-bind", "/w/.git/config", "/w/.git/config",
            "--tmpfs", "/w/.git/hooks", "--remount-ro", "/w/.git/hooks",
        ])
        let file = HostFiles(kind: { $0 == "/w/.git" ? .file : .missing }, entries: { _ in [] }, runtimeDirectory: nil)
        #expect(Bubblewrap.gitProtection(workspace: "/w", host: file) == ["--ro-bind", "/w/.git", "/w/.git"])
        let symlink = HostFiles(kind: { $0 == "/w/.git" ? .symlink : .missing }, entries: { _ in [] },
                                runtimeDirectory: nil)
        #expect(Bubblewrap.gitProtection(workspace: "/w", host: symlink) == [])
    }

    /// Every repository under the workspace, and a submodule whose name holds a slash (its git folder is
    /// `.git/modules/libs/a`): their config, pointers and hooks are bound read-only.
    @Test func bubblewrapGitArgumentsReachNestedRepositoriesAndSlashedSubmodules() {
        let files: [String: Workspace.FileKind] = [
            "/w/.git": .directory, "/w/.git/config": .file, "/w/.git/hooks": .directory, "/w/.git/info": .directory,
            "/w/.git/modules": .directory, "/w/.git/modules/libs": .directory,
            "/w/.git/modules/libs/a": .directory, "/w/.git/modules/libs/a/HEAD": .file,
            "/w/.git/modules/libs/a/config": .file, "/w/.git/modules/libs/a/commondir": .file,
            "/w/.git/worktrees": .directory, "/w/.git/worktrees/wt": .directory, "/w/.git/worktrees/wt/HEAD": .file,
            "/w/.git/worktrees/wt/commondir": .file, "/w/.git/worktrees/wt/gitdir": .file,
            "/w/vendor": .directory, "/w/vendor/x": .directory, "/w/vendor/x/.git": .directory,
            "/w/vendor/x/.git/config": .file, "/w/vendor/x/.git/hooks": .directory, "/w/sub": .directory,
            "/w/sub/.git": .file,
        ]
        let listing = ["/w": [".git", "vendor", "sub"], "/w/vendor": ["x"], "/w/vendor/x": [".git"],
                       "/w/.git/modules": ["libs"], "/w/.git/modules/libs": ["a"], "/w/.git/worktrees": ["wt"]]
        let host = HostFiles(kind: { files[$0] ?? .missing }, entries: { listing[$0] ?? [] }, runtimeDirectory: nil)
        let found = GitPointers.find(in: "/w", host: host)
        #expect(found.gitFolders == ["/w/.git", "/w/vendor/x/.git"])
        #expect(found.gitFiles == ["/w/sub/.git"])
        #expect(found.allGitFolders == ["/w/.git", "/w/.git/worktrees/wt", "/w/.git/modules/libs/a",
                                        "/w/vendor/x/.git"])
        #expect(Bubblewrap.gitProtection(workspace: "/w", host: host) == [
            "--bind", "/w/.git", "/w/.git", "--bind", "/w/vendor/x/.git", "/w/vendor/x/.git",
            "--ro-bind", "/w/.git/config", "/w/.git/config",
            "--ro-bind", "/w/.git/hooks", "/w/.git/hooks",
            "--ro-bind", "/w/.git/info", "/w/.git/info",
            "--ro-bind", "/w/.git/worktrees/wt/commondir", "/w/.git/worktrees/wt/commondir",
            "--ro-bind", "/w/.git/worktrees/wt/gitdir", "/w/.git/worktrees/wt/gitdir",
            "--ro-bind", "/w/.git/modules/libs/a/config", "/w/.git/modules/libs/a/config",
            "--ro-bind", "/w/.git/modules/libs/a/commondir", "/w/.git/modules/libs/a/commondir",
            "--ro-bind", "/w/vendor/x/.git/config", "/w/vendor/x/.git/config",
            "--ro-bind", "/w/vendor/x/.git/hooks", "/w/vendor/x/.git/hooks",
            "--ro-bind", "/w/sub/.git", "/w/sub/.git",
        ])
        // The pointer files missing now are watched: a command that makes one has it removed afterwards.
        #expect(found.missingPointers(host: host) == [
            "/w/.git/commondir", "/w/.git/config.worktree", "/w/.git/gitdir",
            "/w/.git/worktrees/wt/config.worktree",
            "/w/.git/modules/libs/a/config.worktree", "/w/.git/modules/libs/a/gitdir",
            "/w/vendor/x/.git/commondir", "/w/vendor/x/.git/config.worktree", "/w/vendor/x/.git/gitdir",
        ])
    }

    /// In the real sandbox: no config, pointer, hook or info of any repository under the workspace can be
    /// written, and a `commondir` a command makes is gone after it (with a note that says why).
    @Test(.enabled(if: hasBubblewrap, "needs a working bwrap (Linux)"))
    func bubblewrapKeepsGitPointersReadOnly() async throws {
        let ws = try TempWorkspace()
        let files = [".git/config": "[core]\n", ".git/HEAD": "ref: refs/heads/main\n", ".git/info/exclude": "x\n",
                     ".git/worktrees/wt/HEAD": "ref: refs/heads/wt\n", ".git/worktrees/wt/commondir": "../..\n",
                     ".git/worktrees/wt/gitdir": "/elsewhere/wt/.git\n", ".git/modules/libs/a/HEAD": "ref: x\n",
                     ".git/modules/libs/a/config": "[core]\n", "vendor/x/.git/HEAD": "ref: x\n",
                     "vendor/x/.git/config": "[core]\n", "sub/.git": "gitdir: ../.git/modules/libs/a\n"]
        for (path, text) in files { try ws.write(path, text) }
        let command = """
            mkdir -p /tmp/evil; echo /tmp/evil > .git/commondir; echo /tmp/evil > .git/modules/libs/a/commondir; \
            for f in .git/config .git/info/exclude .git/worktrees/wt/commondir .git/worktrees/wt/gitdir \
                .git/modules/libs/a/config vendor/x/.git/config sub/.git; do echo evil >> $f; done; \
            echo evil > .git/info/attributes; mv vendor/x/.git vendor/x/.git-old; echo ok > .git/index && echo index
            """
        let result = await ws.call(RunCommandTool(sandbox: .detected), ["command": .string(command)])
        for (path, text) in files { #expect(ws.read(path) == text, "\(path): \(result.text)") }
        for path in [".git/commondir", ".git/modules/libs/a/commondir", ".git/info/attributes", "vendor/x/.git-old"] {
            #expect(!ws.exists(ws.path + "/" + path), "\(path): \(result.text)")
        }
        #expect(ws.read(".git/index") == "ok\n")
        #expect(result.text.contains("Note: removed .git/commondir, .git/modules/libs/a/commondir, which this command "
                                     + "created"), "\(result.text)")
    }

    @Test func bubblewrapArguments() {
        let debian = HostFiles(kind: { ["/run": .directory, "/var/run": .symlink][$0] ?? .missing },
                               entries: { _ in [] }, runtimeDirectory: "/run/user/1000")
        let argv = Bubblewrap.arguments(executable: "/usr/bin/bwrap", workspace: "/w s", host: debian)
        #expect(argv == ["/usr/bin/bwrap", "--ro-bind", "/", "/", "--tmpfs", "/tmp",
                         "--tmpfs", "/run", "--ro-bind-try", "/run/current-system", "/run/current-system",
                         "--dir", "/run/user/1000",
                         "--bind", "/w s", "/w s",
                         "--dev", "/dev", "--proc", "/proc", "--unshare-net", "--unshare-pid", "--as-pid-1",
                         "--cap-drop", "ALL", "--new-session", "--die-with-parent",
                         "--setenv", "TMPDIR", "/tmp", "--setenv", "XDG_CACHE_HOME", "/tmp/.cache",
                         "--setenv", "CLANG_MODULE_CACHE_PATH", "/tmp/.cache/clang/ModuleCache", "--chdir", "/w s"])
        // Run by root: a user namespace of its own too.
        let asRoot = Bubblewrap.arguments(executable: "/usr/bin/bwrap", workspace: "/w s", host: debian,
                                          userNamespace: true)
        #expect(asRoot.joined(separator: " ").contains("--proc /proc --unshare-user --unshare-net"))
        // An old layout with /var/run a folder of its own; no /run at all; a runtime folder elsewhere.
        let old = HostFiles(kind: { ["/var/run": .directory][$0] ?? .missing }, entries: { _ in [] },
                            runtimeDirectory: "/tmp/rt")
        let oldArgv = Bubblewrap.arguments(executable: "/usr/bin/bwrap", workspace: "/w", host: old)
        #expect(oldArgv.contains("/var/run") && !oldArgv.contains("/run") && !oldArgv.contains("/tmp/rt"))
        let command = CommandSandbox.bubblewrap(executable: "/usr/bin/bwrap").argv(command: "make test", workspace: "/w")
        #expect(command.suffix(3) == ["/bin/sh", "-c", "make test"])
        #expect(CommandSandbox.none(reason: "x").argv(command: "ls", workspace: "/w") == ["/bin/sh", "-c", "ls"])
    }
}

/// The macOS sandbox is probed by running the profile once, not by finding sandbox-exec. Here
/// stand-in `sandbox-exec` scripts play its three answers: it works, it is refused because apple-code already runs
/// in a sandbox (exit 71, `sandbox_apply`), or it rejects the profile.
@Suite struct SandboxProbeTests {
    /// A stand-in that records its argv, then skips -p PROFILE, -DKEY=value and -- and runs the command.
    static let working = """
        #!/bin/sh
        printf '%s\\n' "$@" > "$(dirname "$0")/argv"
        while [ $# -gt 0 ]; do case $1 in -p) shift 2 ;; -D*) shift ;; --) shift; break ;; *) break ;; esac; done
        exec "$@"
        """
    static let nested = """
        #!/bin/sh
        echo 'sandbox-exec: sandbox_apply: Operation not permitted' >&2; exit 71
        """
    static let rejecting = """
        #!/bin/sh
        echo 'sandbox-exec: unbound variable: WORKSPACE' >&2; exit 65
        """

    /// Writes the stand-in with a close-on-exec descriptor: a command another test spawns at that moment must
    /// not inherit it open for writing, or running the stand-in fails with "Text file busy".
    static func standIn(_ script: String, in ws: TempWorkspace) throws -> String {
        let path = ws.outside + "/sandbox-exec-\(UUID().uuidString)"
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o755)
        guard fd >= 0 else { throw ToolFailure("cannot create \(path)") }
        let bytes = Array(script.utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == bytes.count else { throw ToolFailure("cannot write \(path)") }
        return path
    }

    static let folders = SeatbeltFolders(tmp: "/tmp", varTmp: "/var/tmp", tmpdir: "/tmp", userTemp: "/tmp",
                                         userCache: "/tmp")

    @Test func aWorkingSandboxIsUsedAndGetsTheProfileOnce() async throws {
        let ws = try TempWorkspace()
        let executable = try Self.standIn(Self.working, in: ws)
        let outside = ws.outside
        let sandbox = await onOwnThread {
            CommandSandbox.probeSeatbelt(executable: executable, folders: Self.folders, workspace: outside)
        }
        #expect(sandbox == .seatbelt(executable: executable, folders: Self.folders))
        let probed = try String(contentsOfFile: ws.outside + "/argv", encoding: .utf8)
        #expect(probed == (["-p", SeatbeltProfile.text(), "-DWORKSPACE=\(ws.outside)", "-DTMP=/tmp", "-DVAR_TMP=/var/tmp",
                            "-DTMPDIR=/tmp", "-DUSER_TEMP=/tmp", "-DUSER_CACHE=/tmp",
                            "-DGIT_HOOKS_PATH=\(ws.outside)/.git/hooks", "--", "/usr/bin/true"]
                           .joined(separator: "\n") + "\n"))
        // Commands then go through it whole: the argv carries the command intact.
        let result = await ws.call(RunCommandTool(sandbox: sandbox), ["command": "echo \"$0\" 'a b'; pwd"])
        #expect(result.text == "exit code 0\n/bin/sh a b\n\(ws.path)\n")
    }

    /// apple-code inside another sandbox: commands run without apple-code's own (the outer one still applies),
    /// and --check, --verbose and every command's result say so.
    @Test func aNestedSandboxFallsBackToRunningWithoutOneAndSaysSo() async throws {
        let ws = try TempWorkspace()
        let (executable, outside) = (try Self.standIn(Self.nested, in: ws), ws.outside)
        let sandbox = await onOwnThread {
            CommandSandbox.probeSeatbelt(executable: executable, folders: Self.folders, workspace: outside)
        }
        guard case .none(let reason) = sandbox else {
            Issue.record("expected no sandbox, got \(sandbox)")
            return
        }
        #expect(reason.contains("sandbox_apply: Operation not permitted"))
        #expect(reason.contains("another sandbox"))
        #expect(sandbox.label.hasPrefix("none ("))
        let lines = LogLines()
        let tool = RunCommandTool(sandbox: sandbox, announcesMissingSandbox: true)
        let result = await tool.call(raw: ["command": "echo hi"], context: ws.context(log: { lines.append($0) }))
        #expect(result.text == "exit code 0\nNote: this command ran without a sandbox: \(reason).\nhi\n")
        #expect(lines.all == ["runCommand sandbox: \(sandbox.label)"])
    }

    /// A profile sandbox-exec rejects is apple-code's own bug: commands are refused, never run unconfined.
    @Test func aRejectedProfileRefusesCommands() async throws {
        let ws = try TempWorkspace()
        let (executable, outside) = (try Self.standIn(Self.rejecting, in: ws), ws.outside)
        let sandbox = await onOwnThread {
            CommandSandbox.probeSeatbelt(executable: executable, folders: Self.folders, workspace: outside)
        }
        guard case .broken(let reason) = sandbox else {
            Issue.record("expected a broken sandbox, got \(sandbox)")
            return
        }
        #expect(reason.contains("unbound variable: WORKSPACE") && reason.contains("exit 65"))
        let result = await ws.call(RunCommandTool(sandbox: sandbox), ["command": "touch ran.txt"])
        #expect(result.text.hasPrefix("Error: runCommand: the command sandbox does not work here"))
        #expect(result.commandsRun == 0)
        #expect(ws.read("ran.txt") == nil)
    }

    @Test func aMissingSandboxExecIsNoSandbox() {
        let sandbox = CommandSandbox.probeSeatbelt(executable: "/nonexistent/sandbox-exec", folders: Self.folders,
                                                   workspace: "/tmp")
        #expect(sandbox == .none(reason: "/nonexistent/sandbox-exec not found"))
    }
}

/// `apple-code --sandbox-check`: every check can fail, and says why.
@Suite struct SandboxSelfTestTests {
    /// A stand-in that ignores the profile and runs the command unconfined: the escape checks must fail, and the
    /// write aimed at the (stand-in) home folder is removed again.
    @Test func aSandboxThatConfinesNothingFailsTheEscapeChecks() async throws {
        let ws = try TempWorkspace()
        let executable = try SandboxProbeTests.standIn(SandboxProbeTests.working, in: ws)
        let sandbox = CommandSandbox.seatbelt(executable: executable, folders: SandboxProbeTests.folders)
        let checks = await SandboxSelfTest.run(sandbox: sandbox, home: ws.outside, swift: nil)
        let failed = checks.filter { !$0.passed }.map(\.name)
        #expect(failed.contains("a write outside the workspace is refused"))
        #expect(failed.contains(".git/hooks and .git/config cannot be written"))
        // The secrets, the daemon's port and the processes outside are all within reach of it.
        #expect(failed.contains { $0.hasPrefix("every hidden path is unreadable") })
        #expect(failed.contains("`kill` of a process outside the sandbox is refused"))
        #expect(failed.contains("a folder holding a hidden path cannot be renamed"))
        #expect(failed.contains(".git/commondir and a nested submodule's config cannot be written"))
        if hasPython { #expect(failed.contains("a denied loopback port (the daemon's web page) is refused")) }
        if CommandSandbox.findExecutable("git") != nil {
            #expect(failed.contains("`git config core.hooksPath x` is refused"))
        }
        #expect(checks.first { $0.name.hasPrefix("a write outside") }?.detail.contains(ws.outside) == true)
        #expect(ws.outsideEntries().filter { $0.hasPrefix(".apple-code") } == [])
        #if os(macOS)
        #expect(failed.contains("`open` cannot start a program outside the sandbox"))
        #endif
    }

    @Test func noSandboxIsOneFailedCheckAndRunsNothing() async throws {
        let ws = try TempWorkspace()
        let checks = await SandboxSelfTest.run(sandbox: .none(reason: "bwrap not installed"), home: ws.outside,
                                               swift: nil)
        #expect(checks == [.init(name: "a working command sandbox", passed: false,
                                 detail: "none (bwrap not installed)")])
        #expect(SandboxSelfTest.report(checks, sandbox: .none(reason: "bwrap not installed"))
            == "sandbox: none (bwrap not installed)\nFAIL  a working command sandbox: none (bwrap not installed)")
    }

    @Test(.enabled(if: hasBubblewrap, "needs a working bwrap (Linux)"))
    func bubblewrapPassesEveryCheck() async throws {
        let ws = try TempWorkspace()
        let checks = await SandboxSelfTest.run(sandbox: .detected, home: ws.outside, swift: nil)
        #expect(checks.allSatisfy { $0.passed }, "\(checks)")
        #expect(checks.count >= 12)
        // The Mac-only checks are there, skipped, and say why.
        let skipped = checks.filter(\.skipped)
        #expect(skipped.count == 4 && skipped.allSatisfy { $0.detail.hasPrefix("macOS only") }, "\(skipped)")
        #expect(SandboxSelfTest.report(checks, sandbox: .detected).contains("\nskip  `open` cannot start"))
        #expect(ws.outsideEntries() == ["secret.txt"])
    }
}
