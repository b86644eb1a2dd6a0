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
        /// Not run on this system (a macOS-only check on Linux): `detail` says why. Counts as passed.
        public let skipped: Bool

        public init(name: String, passed: Bool, detail: String, skipped: Bool = false) {
            self.name = name
            self.passed = passed
            self.detail = detail
            self.skipped = skipped
        }

        static func skip(_ name: String, _ why: String) -> Check {
            Check(name: name, passed: true, detail: why, skipped: true)
        }
    }

    /// Runs every check (none when there is no working sandbox: that is the one failure). `home` receives the
    /// write that must be refused; `swift` is the swift to build a tiny package with (nil: that check is left out);
    /// `hidden` and `deniedPorts`: what this run's commands may not read or connect to.
    public static func run(sandbox: CommandSandbox = .detected, home: String? = defaultHome,
                           swift: String? = defaultSwift, hidden: HiddenPaths = .current,
                           deniedPorts: [Int] = SeatbeltProfile.configuredPorts) async -> [Check] {
        switch sandbox {
        case .none, .broken: return [Check(name: "a working command sandbox", passed: false, detail: sandbox.label)]
        case .bubblewrap, .seatbelt: break
        }
        let base = (Workspace.realPath(NSTemporaryDirectory()) ?? "/tmp")
            + "/apple-code-sandbox-check-\(UUID().uuidString)"
        let workspace = base + "/ws"
        let canary = base + "/hidden-secret"  // a hidden file of the check's own, so that check is never empty
        // And one inside the workspace, two folders down, for the rename check.
        let held = workspace + "/" + Runner.heldSecret
        guard (try? FileManager.default.createDirectory(atPath: (held as NSString).deletingLastPathComponent,
                                                        withIntermediateDirectories: true)) != nil,
              (try? "apple-code-canary\n".write(toFile: canary, atomically: false, encoding: .utf8)) != nil,
              (try? "apple-code-canary\n".write(toFile: held, atomically: false, encoding: .utf8)) != nil else {
            return [Check(name: "a temporary workspace", passed: false, detail: "cannot create \(workspace)")]
        }
        defer { try? FileManager.default.removeItem(atPath: base) }
        let runner = Runner(sandbox: sandbox, workspace: workspace,
                            hidden: HiddenPaths(paths: hidden.paths + [canary, held]), deniedPorts: deniedPorts,
                            canary: canary)
        var checks = [await runner.writesInside(), await runner.writeOutsideIsRefused(home: home),
                      await runner.gitIsProtected(), await runner.gitConfigIsRefused(),
                      await runner.gitPointersAreRefused(),
                      await runner.caseFoldedGitHooksAreRefused(), await runner.hiddenPathsAreUnreadable(),
                      await runner.hiddenPathsCannotBeUnmounted(), await runner.remountReadWriteIsRefused(home: home),
                      await runner.foldersAroundAHiddenPathCannotBeRenamed(),
                      await runner.networkIsRefused(), await runner.nameLookupFails(), await runner.loopbackWorks(),
                      await runner.webPortIsRefused(), await runner.terminalInputCannotBePushed(),
                      await runner.processesOutsideCannotBeKilled()]
        if let check = await runner.nothingOutlivesTheCommand() { checks.append(check) }
        checks += [await runner.openIsRefused(), await runner.appleEventsAreRefused(),
                   await runner.launchdJobsAreRefused()]
        if let swift { checks.append(await runner.swiftBuildWorks(swift: swift)) }
        return checks
    }

    /// The report: the sandbox, then `ok    <check>`, `FAIL  <check>: <why>` or `skip  <check>: <why>`, one a line.
    public static func report(_ checks: [Check], sandbox: CommandSandbox) -> String {
        (["sandbox: \(sandbox.label)"] + checks.map { check in
            check.skipped ? "skip  \(check.name): \(check.detail)"
                : check.passed ? "ok    \(check.name)" : "FAIL  \(check.name): \(check.detail)"
        }).joined(separator: "\n")
    }

    public static var defaultSwift: String? { CommandSandbox.findExecutable("swift") }

    public static var defaultHome: String? {
        getenv("HOME").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
    }
}

/// Why a check does not run on this system.
private let macOSOnly = "macOS only"
/// Why a check of bwrap's mounts does not run under sandbox-exec.
private let bubblewrapOnly = "Linux only: it tries to undo bwrap's mounts, and macOS's sandbox has none"

private struct Runner {
    let sandbox: CommandSandbox
    let workspace: String
    let hidden: HiddenPaths
    let deniedPorts: [Int]
    /// A hidden file of the check's own, outside the workspace, holding `apple-code-canary`.
    let canary: String
    /// The check's hidden file inside the workspace, relative to it.
    static let heldSecret = "held/deeper/secret.txt"

    /// Runs `command` in the sandbox; its exit status (nil: it did not exit by itself) and output.
    func run(_ command: String, seconds: Int = 30, denying extraPort: Int? = nil) async
        -> (status: Int32?, output: String) {
        let argv = sandbox.argv(command: command, workspace: workspace, hidden: hidden,
                                deniedPorts: deniedPorts + (extraPort.map { [$0] } ?? []))
        let watched = sandbox.watchedGitPointers(workspace: workspace)
        let ran = try? await CommandRunner.run(argv, in: workspace, timeout: .seconds(seconds))
        _ = CommandSandbox.removeGitPointers(madeFrom: watched, workspace: workspace)  // as runCommand does
        guard let outcome = ran else { return (nil, "could not start the command") }
        if case .exited(let code) = outcome.ending { return (code, outcome.output.text) }
        return (nil, "it did not finish: \(outcome.ending); " + outcome.output.text)
    }

    func path(_ relative: String) -> String { workspace + "/" + relative }

    func read(_ relative: String) -> String? { try? String(contentsOfFile: path(relative), encoding: .utf8) }

    var python: String? { CommandSandbox.findExecutable("python3") }

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
            // A repository git recognises (HEAD, objects, refs), so `git config` below would work unconfined.
            for folder in [".git/hooks", ".git/objects", ".git/refs/heads"] {
                try FileManager.default.createDirectory(atPath: path(folder), withIntermediateDirectories: true)
            }
            try "ref: refs/heads/main\n".write(toFile: path(".git/HEAD"), atomically: false, encoding: .utf8)
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

    /// After `gitIsProtected`, which made the repository's `.git/config`.
    func gitConfigIsRefused() async -> SandboxSelfTest.Check {
        let name = "`git config core.hooksPath x` is refused"
        guard let git = CommandSandbox.findExecutable("git") else { return .skip(name, "no git here") }
        let before = read(".git/config")
        let (status, output) = await run("\(shellQuoted(git)) config core.hooksPath x")
        let after = read(".git/config")
        return .init(name: name, passed: after == before && !(after ?? "").contains("hooksPath = x"),
                     detail: "git exited \(status.map(String.init) ?? "without a status") and changed .git/config: "
                         + oneLine(output))
    }

    /// After `gitIsProtected`: a `commondir` (git would read the config of the folder it names: `core.fsmonitor`
    /// runs a program at the owner's next `git status`) and the config of a submodule whose name holds a slash.
    func gitPointersAreRefused() async -> SandboxSelfTest.Check {
        let name = ".git/commondir and a nested submodule's config cannot be written"
        let module = ".git/modules/libs/a"
        do {
            try FileManager.default.createDirectory(atPath: path(module), withIntermediateDirectories: true)
            try "ref: refs/heads/main\n".write(toFile: path(module + "/HEAD"), atomically: false, encoding: .utf8)
            try "[core]\n".write(toFile: path(module + "/config"), atomically: false, encoding: .utf8)
        } catch {
            return .init(name: name, passed: false, detail: "cannot make a submodule's git folder: \(error)")
        }
        _ = await run("mkdir -p /tmp/evil; echo /tmp/evil > .git/commondir; "
            + "echo '[core] fsmonitor = evil' >> \(module)/config; echo .. > \(module)/commondir")
        var written: [String] = []
        if Workspace.fileKind(path(".git/commondir")) != .missing { written.append(".git/commondir") }
        if read(module + "/config") != "[core]\n" { written.append(module + "/config") }
        if Workspace.fileKind(path(module + "/commondir")) != .missing { written.append(module + "/commondir") }
        return .init(name: name, passed: written.isEmpty, detail: "a command wrote " + written.joined(separator: ", "))
    }

    /// macOS's file system does not tell `.GIT` from `.git`: the same hooks, another spelling.
    func caseFoldedGitHooksAreRefused() async -> SandboxSelfTest.Check {
        let name = "a write to .GIT/hooks/pre-commit is refused"
        #if os(macOS)
        _ = await run("echo 'exit 1' > .GIT/hooks/pre-commit")
        let written = read(".git/hooks/pre-commit") != nil
        return .init(name: name, passed: !written, detail: "a command wrote .GIT/hooks/pre-commit")
        #else
        return .skip(name, "\(macOSOnly): here .GIT is another folder than .git, and git uses only .git")
        #endif
    }

    /// Each hidden path that exists here: a file reads as nothing, a folder lists nothing (or either is refused).
    func hiddenPathsAreUnreadable() async -> SandboxSelfTest.Check {
        let present = hidden.paths.filter { [.file, .directory].contains(Workspace.fileKind($0)) }
        var readable: [String] = []
        for hiddenPath in present {
            let quoted = shellQuoted(hiddenPath)
            let probe = Workspace.fileKind(hiddenPath) == .directory
                ? "ls -A \(quoted) 2>/dev/null | head -c 200" : "head -c 200 \(quoted) 2>/dev/null"
            let (_, output) = await run(probe)
            if !output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { readable.append(hiddenPath) }
        }
        return .init(name: "every hidden path is unreadable (\(present.count) here)", passed: readable.isEmpty,
                     detail: "a command read " + readable.joined(separator: ", "))
    }

    /// With a capability left (bwrap run by root keeps them all unless told), `umount` of what covers a hidden
    /// path uncovers it: every hidden path here, and the private /tmp over the check's own hidden file (which is
    /// then read). bwrap only: these are its mounts (and unconfined, they would be the host's).
    func hiddenPathsCannotBeUnmounted() async -> SandboxSelfTest.Check {
        let name = "`umount` of a hidden path is refused"
        guard case .bubblewrap = sandbox else { return .skip(name, bubblewrapOnly) }
        let targets = hidden.paths.filter { [.file, .directory].contains(Workspace.fileKind($0)) } + ["/tmp"]
        let attempts = targets.map { target in
            "umount -l \(shellQuoted(target)) 2>/dev/null && echo \(shellQuoted("unmounted " + target))"
        }
        let (_, output) = await run(attempts.joined(separator: "; ") + "; cat \(shellQuoted(canary)) 2>/dev/null")
        let through = output.split(separator: "\n")
            .filter { $0.hasPrefix("unmounted ") || $0.contains("apple-code-canary") }
        return .init(name: name, passed: through.isEmpty, detail: through.joined(separator: "; "))
    }

    /// Renaming a folder that holds a hidden path would carry it out from under its cover for the next command.
    func foldersAroundAHiddenPathCannotBeRenamed() async -> SandboxSelfTest.Check {
        let name = "a folder holding a hidden path cannot be renamed"
        _ = await run("mv held held2; mv held/deeper deeper2; true")
        let (_, output) = await run("cat held2/deeper/secret.txt deeper2/secret.txt \(Runner.heldSecret) 2>/dev/null")
        var through: [String] = []
        if Workspace.fileKind(path(Runner.heldSecret)) != .file { through.append("held/deeper was renamed") }
        if output.contains("apple-code-canary") { through.append("the next command read the hidden file") }
        if through.isEmpty == false {  // put back for the checks after this one
            _ = rename(path("held2"), path("held"))
            _ = rename(path("deeper2"), path("held/deeper"))
        }
        return .init(name: name, passed: through.isEmpty, detail: through.joined(separator: "; "))
    }

    /// A read-write remount of the host's file system (a capability would allow it), then a write aimed at the
    /// home folder through it; removed again if it got through. bwrap only, as above.
    func remountReadWriteIsRefused(home: String?) async -> SandboxSelfTest.Check {
        let name = "a read-write remount of the file system is refused"
        guard case .bubblewrap = sandbox else { return .skip(name, bubblewrapOnly) }
        guard let home else { return .init(name: name, passed: false, detail: "no home folder ($HOME) to aim at") }
        let target = home + "/.apple-code-sandbox-check-\(UUID().uuidString)"
        let (_, output) = await run("mount -o remount,bind,rw / 2>/dev/null && echo 'remounted /'; "
            + "echo escaped > \(shellQuoted(target)) 2>/dev/null; true")
        var through = output.split(separator: "\n").filter { $0.hasPrefix("remounted ") }.map(String.init)
        if Workspace.fileKind(target) != .missing {
            unlink(target)
            through.append("a command wrote \(target) (removed again)")
        }
        return .init(name: name, passed: through.isEmpty, detail: through.joined(separator: "; "))
    }

    func networkIsRefused() async -> SandboxSelfTest.Check {
        let name = "`curl https://example.com` fails"
        guard let curl = CommandSandbox.findExecutable("curl") else { return .skip(name, "no curl here") }
        let (status, output) = await run("\(shellQuoted(curl)) -sS --max-time 10 -o /dev/null https://example.com")
        return .init(name: name, passed: status != 0, detail: "curl reached example.com: \(oneLine(output))")
    }

    func nameLookupFails() async -> SandboxSelfTest.Check {
        let name = "a DNS lookup of example.com fails"
        #if os(macOS)
        let lookup = "/usr/bin/dscacheutil -q host -a name example.com"
        #else
        guard let getent = CommandSandbox.findExecutable("getent") else { return .skip(name, "no getent here") }
        let lookup = "\(shellQuoted(getent)) hosts example.com"
        #endif
        let (_, output) = await run(lookup)
        let resolved = output.contains(try! Regex(#"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+|[0-9a-fA-F]*:[0-9a-fA-F]*:"#))
        return .init(name: name, passed: !resolved, detail: "it resolved: \(oneLine(output))")
    }

    func loopbackWorks() async -> SandboxSelfTest.Check {
        let name = "a loopback server and its client inside the sandbox work"
        guard let python else { return .skip(name, "no python3 here") }
        let script = "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(1); "
            + "c=socket.create_connection(s.getsockname(), 5); a,_=s.accept(); c.sendall(b'ok'); print(a.recv(2).decode())"
        let (status, output) = await run("\(shellQuoted(python)) -c \(shellQuoted(script))")
        return .init(name: name, passed: status == 0 && output.contains("ok"),
                     detail: "exit \(status.map(String.init) ?? "none"): \(oneLine(output))")
    }

    /// A loopback server outside the sandbox on a port this run denies (as the daemon's web page is): the command
    /// cannot connect to it.
    func webPortIsRefused() async -> SandboxSelfTest.Check {
        let name = "a denied loopback port (the daemon's web page) is refused"
        guard let python else { return .skip(name, "no python3 here") }
        guard let listener = LoopbackListener() else {
            return .init(name: name, passed: false, detail: "cannot listen on 127.0.0.1 outside the sandbox")
        }
        defer { listener.close() }
        let script = "import socket,sys\ntry:\n socket.create_connection(('127.0.0.1',\(listener.port)),5)\n"
            + " print('connected')\nexcept OSError as e:\n print('refused:',e)"
        let (_, output) = await run("\(shellQuoted(python)) -c \(shellQuoted(script))", denying: listener.port)
        return .init(name: name, passed: !output.contains("connected"),
                     detail: "a command connected to 127.0.0.1:\(listener.port)")
    }

    /// TIOCSTI pushes input into a terminal, which its shell then runs outside the sandbox (CVE-2017-5226).
    func terminalInputCannotBePushed() async -> SandboxSelfTest.Check {
        let name = "TIOCSTI into a terminal fails"
        guard let python else { return .skip(name, "no python3 here") }
        // apple-code's own terminal when it has one, else whatever /dev/tty is for the command (none: it has no
        // controlling terminal).
        let terminal = [0, 1, 2].lazy.compactMap { fd -> String? in
            guard isatty(Int32(fd)) != 0, let name = ttyname(Int32(fd)) else { return nil }
            return String(cString: name)
        }.first ?? "/dev/tty"
        let script = "import fcntl,os,sys,termios\nfd=os.open(sys.argv[1],os.O_RDWR)\n"
            + "fcntl.ioctl(fd,termios.TIOCSTI,b' ')\nprint('pushed')"
        let (_, output) = await run("\(shellQuoted(python)) -c \(shellQuoted(script)) \(shellQuoted(terminal))")
        return .init(name: name, passed: !output.contains("pushed"), detail: "a command pushed input into \(terminal)")
    }

    func processesOutsideCannotBeKilled() async -> SandboxSelfTest.Check {
        let name = "`kill` of a process outside the sandbox is refused"
        guard let pid = startOutside(["/bin/sleep", "60"]) else {
            return .init(name: name, passed: false, detail: "cannot start a process outside the sandbox")
        }
        defer {  // SIGKILL: it inherits apple-code's signal mask, which may hold SIGTERM back
            kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
        }
        let (_, output) = await run("kill -9 \(pid); sleep 0.2")
        try? await Task.sleep(for: .milliseconds(200))
        var status: Int32 = 0
        let running = waitpid(pid, &status, WNOHANG) == 0  // killed, it would be a zombie waiting here
        return .init(name: name, passed: running, detail: "a command killed pid \(pid): \(oneLine(output))")
    }

    /// Starts `argv` outside any sandbox, stdin, stdout and stderr on /dev/null; its pid. Not Foundation's Process,
    /// whose SIGCHLD handling interrupts reads elsewhere in the process.
    private func startOutside(_ argv: [String]) -> pid_t? {
        #if os(Linux)
        var actions = posix_spawn_file_actions_t()
        #else
        var actions: posix_spawn_file_actions_t?
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd: Int32 in [0, 1, 2] {
            posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        var arguments = argv.map { strdup($0) } + [nil]
        defer { for pointer in arguments { free(pointer) } }
        var environment: [UnsafeMutablePointer<CChar>?] = [nil]
        var pid: pid_t = 0
        guard posix_spawn(&pid, argv[0], &actions, nil, &arguments, &environment) == 0 else { return nil }
        return pid
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
        let name = "`open` cannot start a program outside the sandbox"
        #if os(macOS)
        // Finder always runs: if this got through, it only comes forward in the background.
        let (status, output) = await run("/usr/bin/open -g -a Finder")
        return .init(name: name, passed: status != 0,
                     detail: "open exited \(status.map(String.init) ?? "without a status"): \(oneLine(output))")
        #else
        return .skip(name, "\(macOSOnly): LaunchServices")
        #endif
    }

    func appleEventsAreRefused() async -> SandboxSelfTest.Check {
        let name = #"`osascript -e 'tell app "Finder" to get name'` is refused"#
        #if os(macOS)
        let (status, output) = await run(#"/usr/bin/osascript -e 'tell app "Finder" to get name'"#)
        return .init(name: name, passed: status != 0,
                     detail: "osascript exited \(status.map(String.init) ?? "without a status"): \(oneLine(output))")
        #else
        return .skip(name, "\(macOSOnly): Apple events")
        #endif
    }

    /// `launchctl submit` and `launchctl bootstrap gui/<uid>` would start a job outside the sandbox; one that got
    /// through is removed again.
    func launchdJobsAreRefused() async -> SandboxSelfTest.Check {
        let name = "`launchctl submit` and `launchctl bootstrap gui/<uid>` are refused"
        #if os(macOS)
        let label = "com.apple-code.sandbox-check.\(UUID().uuidString)"
        let plist = """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict><key>Label</key><string>\(label).b</string>
            <key>ProgramArguments</key><array><string>/usr/bin/true</string></array></dict></plist>

            """
        try? plist.write(toFile: path("job.plist"), atomically: false, encoding: .utf8)
        let uid = getuid()
        let (submitted, submitOutput) = await run("/bin/launchctl submit -l \(label).s -- /usr/bin/true")
        let (bootstrapped, bootstrapOutput) = await run("/bin/launchctl bootstrap gui/\(uid) job.plist")
        var through: [String] = []
        if submitted == 0 { through.append("submit: \(oneLine(submitOutput))") }
        if bootstrapped == 0 { through.append("bootstrap: \(oneLine(bootstrapOutput))") }
        // Whatever got through goes again (from outside the sandbox).
        _ = try? await CommandRunner.run(["/bin/launchctl", "remove", "\(label).s"], in: "/", timeout: .seconds(10))
        _ = try? await CommandRunner.run(["/bin/launchctl", "bootout", "gui/\(uid)/\(label).b"], in: "/",
                                         timeout: .seconds(10))
        return .init(name: name, passed: through.isEmpty, detail: through.joined(separator: "; ") + " (removed again)")
        #else
        return .skip(name, "\(macOSOnly): launchd")
        #endif
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

/// A TCP socket listening on 127.0.0.1 (a port of the system's choosing), outside any sandbox.
private final class LoopbackListener {
    let fd: Int32
    let port: Int

    init?() {
        #if canImport(Darwin)
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #else
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #endif
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(fd, raw, length) == 0 && listen(fd, 4) == 0 && getsockname(fd, raw, &length) == 0
            }
        }
        guard bound else { Glibc_close(fd); return nil }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() { Glibc_close(fd) }
}

private func Glibc_close(_ fd: Int32) {
    #if canImport(Glibc)
    _ = Glibc.close(fd)
    #else
    _ = Darwin.close(fd)
    #endif
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
