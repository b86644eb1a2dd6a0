import AppleCodeCore
import Foundation
import Testing
@testable import AppleCodeTools

/// The sandboxes to run command tests under: always none, and the machine's own where it has a working one
/// (bwrap on Linux, sandbox-exec on macOS).
let commandSandboxes: [CommandSandbox] = {
    var list: [CommandSandbox] = [.none(reason: "test")]
    if case .none = CommandSandbox.detected {} else { list.append(.detected) }
    return list
}()

/// Which sandbox this machine has: tests that need one are skipped (and reported as skipped) without it.
let hasBubblewrap: Bool = { if case .bubblewrap = CommandSandbox.detected { true } else { false } }()
let hasSeatbelt: Bool = { if case .seatbelt = CommandSandbox.detected { true } else { false } }()

/// Whether a process is gone: no such pid, or a zombie nobody reaped yet (in a container PID 1 may not reap).
func processIsGone(_ pid: pid_t) -> Bool {
    if kill(pid, 0) != 0 { return errno == ESRCH }
    #if os(Linux)
    // /proc files report size 0, so read them through a handle rather than String(contentsOfFile:).
    guard let handle = FileHandle(forReadingAtPath: "/proc/\(pid)/stat") else { return true }
    defer { try? handle.close() }
    let stat = String(decoding: (try? handle.readToEnd()) ?? Data(), as: UTF8.self)
    guard let close = stat.lastIndex(of: ")"), stat.distance(from: close, to: stat.endIndex) > 2 else {
        return false  // unreadable while the process exists: count it as running
    }
    return stat[stat.index(close, offsetBy: 2)] == "Z"
    #else
    return false
    #endif
}

/// Waits up to `seconds` for every process carrying `marker` to be gone; kills and returns those still there.
func survivors(of marker: String, seconds: Int = 3) async throws -> [pid_t] {
    let start = ContinuousClock.now
    var left = await onOwnThread { processes(withMarker: marker) }
    while !left.isEmpty, ContinuousClock.now - start < .seconds(seconds) {
        try await Task.sleep(for: .milliseconds(100))
        left = await onOwnThread { processes(withMarker: marker) }
    }
    for pid in left { _ = killpg(pid, SIGKILL); _ = kill(pid, SIGKILL) }  // a failing test leaves nothing behind
    return left
}

@Suite struct RunCommandTests {
    @Test func processIsGoneSeesLiveAndDeadProcesses() {
        #expect(!processIsGone(getpid()))
        #expect(processIsGone(99_999_999))
    }

    @Test(arguments: commandSandboxes)
    func outputAndExitCode(sandbox: CommandSandbox) async throws {
        let ws = try TempWorkspace()
        try ws.write("a.txt", "hello")
        let result = await ws.call(RunCommandTool(sandbox: sandbox), ["command": "cat a.txt; echo; echo err >&2; pwd"])
        #expect(result.ok)
        #expect(result.text == "exit code 0\nhello\nerr\n\(ws.path)\n")
        #expect(result.commandsRun == 1)
        let failed = await ws.call(RunCommandTool(sandbox: sandbox), ["command": "echo nope; exit 3"])
        #expect(!failed.ok)
        #expect(failed.text == "exit code 3\nnope\n")
        #expect(failed.commandsRun == 1)
    }

    @Test(arguments: commandSandboxes)
    func emptyOutputIsStated(sandbox: CommandSandbox) async throws {
        let ws = try TempWorkspace()
        let ok = await ws.call(RunCommandTool(sandbox: sandbox), ["command": "true"])
        #expect(ok.text == "Command succeeded with no output (exit code 0).")
        let failed = await ws.call(RunCommandTool(sandbox: sandbox), ["command": "exit 2"])
        #expect(failed.text == "Command failed with exit code 2 and no output.")
    }

    /// SwiftPM cannot start its own sandbox inside apple-code's (macOS refuses a nested one, exit
    /// 71): the result tells the model exactly how to run it instead, in one line, once per run.
    @Test func nestedSandboxFailureExplainsTheWayAroundOnce() async throws {
        let ws = try TempWorkspace()
        let tool = RunCommandTool(sandbox: .none(reason: "test"))
        let command = "echo 'error: manifest parse error'; echo 'sandbox-exec: sandbox_apply: Operation not permitted' >&2; exit 71"
        let result = await ws.call(tool, ["command": .string(command)])
        let lines = result.text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines[0] == "exit code 71")
        #expect(lines[1] == "Hint: macOS refuses a sandbox inside apple-code's; add --disable-sandbox (swift build, "
                + "test, run, package; xcodebuild: -IDEPackageSupportDisableManifestSandbox=YES).")
        #expect(result.text.hasSuffix("sandbox-exec: sandbox_apply: Operation not permitted\n"))
        // The same failure again in this run: the model has the hint already.
        let again = await ws.call(tool, ["command": .string(command)])
        #expect(again.text.hasPrefix("exit code 71\nerror: manifest parse error"), "\(again.text)")
        let plain = await ws.call(tool, ["command": "echo fine; exit 71"])
        #expect(plain.text == "exit code 71\nfine\n")
        // A copy of the tool is the same run: it does not say it again either.
        let copy = tool
        #expect(!(await ws.call(copy, ["command": .string(command)])).text.contains("Hint:"))
    }

    /// `swift test` with only the Command Line Tools: no Swift Testing. The hint says what to do instead, once,
    /// and only when the command failed (a passing command that prints the words gets none).
    @Test func missingSwiftTestingIsAnsweredWithXCTestOrXcodeOnce() async throws {
        let ws = try TempWorkspace()
        let tool = RunCommandTool(sandbox: .none(reason: "test"))
        let passing = await ws.call(tool, ["command": "echo \"error: no such module 'Testing'\""])
        #expect(!passing.text.contains("Hint:"))
        let failing = "echo \"Tests/AppTests/AppTests.swift:1:8: error: no such module 'Testing'\" >&2; exit 1"
        let result = await ws.call(tool, ["command": .string(failing)])
        #expect(result.text.hasPrefix("exit code 1\nHint: Swift Testing needs Xcode, which this Mac lacks; write "
                                      + "the tests with XCTest (import XCTest) or ask the user to install Xcode.\n"),
                "\(result.text)")
        #expect(!(await ws.call(tool, ["command": .string(failing)])).text.contains("Hint:"))
        // Another run (a new tool): told again.
        let next = await ws.call(RunCommandTool(sandbox: .none(reason: "test")), ["command": .string(failing)])
        #expect(next.text.contains("Hint: Swift Testing needs Xcode"))
    }

    /// A command gets stdin, stdout and stderr and nothing else of apple-code's: a descriptor apple-code (or a
    /// library in it) left without close-on-exec, such as one end of a pipe or a file outside the workspace,
    /// would let a command write past the sandbox, or hold the pipe another command's output is read from.
    @Test(arguments: commandSandboxes)
    func noOtherDescriptorIsInherited(sandbox: CommandSandbox) async throws {
        let ws = try TempWorkspace()
        let leaked = open(ws.outside + "/secret.txt", O_RDWR)  // deliberately without O_CLOEXEC
        try #require(leaked > 2)
        defer { close(leaked) }
        let result = await ws.call(RunCommandTool(sandbox: sandbox),
                                   ["command": .string("echo pwned >&\(leaked) && echo leaked \(leaked); ls /dev/fd")])
        #expect(try String(contentsOfFile: ws.outside + "/secret.txt", encoding: .utf8) == "secret\n")
        #expect(!result.text.contains("leaked"), "\(result.text)")
    }

    @Test func stdinIsClosed() async throws {
        let ws = try TempWorkspace()
        // `cat` with no file reads stdin: with /dev/null it ends at once instead of waiting for a terminal.
        let result = await ws.call(RunCommandTool(sandbox: .none(reason: "test")), ["command": "cat; echo done"])
        #expect(result.text == "exit code 0\ndone\n")
    }

    @Test func commandsGetOnlyTheAllowlistedEnvironment() async throws {
        // A pure check: setenv here would race with commands other tests start concurrently.
        let entries = CommandRunner.commandEnvironment([
            "PATH": "/bin", "APPLE_CODE_API_KEY": "sk-x", "HOME": "/h", "APPLE_FLOW_WEB_TOKEN": "t",
            "ANTHROPIC_API_KEY": "a", "LC_ALL": "C", "LANG": "C.UTF-8", "TMPDIR": "/t", "XDG_RUNTIME_DIR": "/run/u",
        ])
        #expect(entries == ["HOME=/h", "LANG=C.UTF-8", "LC_ALL=C", "PATH=/bin", "PYTHONDONTWRITEBYTECODE=1", "TMPDIR=/t"])
        let ws = try TempWorkspace()
        let result = await ws.call(RunCommandTool(sandbox: .none(reason: "test")), ["command": "echo \"$PATH\""])
        #expect(result.text == "exit code 0\n\(ProcessInfo.processInfo.environment["PATH"] ?? "")\n")
    }

    @Test func aSameSizeEditInTheSameSecondIsWhatTheNextPythonRunImports() async throws {
        // Python's .pyc cache is keyed on whole-second mtime and size: with a cache, the second run printed 1.
        let ws = try TempWorkspace()
        let runs = JSONValue.string("python3 -c 'import m; print(m.v)'")
        try ws.write("m.py", "v = 1\n")
        let first = await ws.call(RunCommandTool(sandbox: .none(reason: "test")), ["command": runs])
        try ws.write("m.py", "v = 2\n")
        let second = await ws.call(RunCommandTool(sandbox: .none(reason: "test")), ["command": runs])
        #expect(first.text == "exit code 0\n1\n")
        #expect(second.text == "exit code 0\n2\n")
        #expect(!FileManager.default.fileExists(atPath: ws.path + "/__pycache__"))
    }

    @Test func commandRunsInItsOwnProcessGroup() async throws {
        let ws = try TempWorkspace()
        let result = await ws.call(RunCommandTool(sandbox: .none(reason: "test")),
                                   ["command": "ps -o pgid= -p $$; echo $$"])
        let numbers = result.text.split(whereSeparator: \.isWhitespace).compactMap { Int32($0) }
        #expect(numbers.count == 3)  // exit code 0, pgid, pid
        #expect(numbers.count == 3 && numbers[1] == numbers[2] && numbers[1] != getpgrp())
    }

    /// A command starts in a session of its own, so it has no controlling terminal and cannot
    /// push input into the terminal apple-code runs in (TIOCSTI); it still leads its own process group.
    @Test(arguments: commandSandboxes)
    func commandStartsItsOwnSession(sandbox: CommandSandbox) async throws {
        let ws = try TempWorkspace()
        let result = await ws.call(RunCommandTool(sandbox: sandbox),
                                   ["command": "echo $$ $(ps -o sid= -p $$) $(ps -o pgid= -p $$)"])
        let numbers = result.text.split(whereSeparator: \.isWhitespace).compactMap { Int32($0) }
        #expect(numbers.count == 4, "\(result.text)")  // exit code 0, pid, session, group
        #expect(numbers.count == 4 && numbers[1] == numbers[2] && numbers[1] == numbers[3], "\(result.text)")
        #expect(!result.text.contains(" \(getsid(0)) "))
    }

    @Test(arguments: commandSandboxes)
    func timeoutKillsTheGroup(sandbox: CommandSandbox) async throws {
        let ws = try TempWorkspace()
        let start = ContinuousClock.now
        // A timeout of 5 s, not 1: on a loaded machine the sandbox and shell took over a second to print `before`.
        let result = await ws.call(RunCommandTool(sandbox: sandbox), ["command": "echo before; sleep 120", "timeout": 5])
        let elapsed = ContinuousClock.now - start
        #expect(!result.ok)
        // Under bwrap the shell is its namespace's PID 1, which outlives its `sleep` long enough to say
        // "Terminated" when the sleep gets SIGTERM.
        let expected = "Command timed out after 5 s; it and everything it started were killed.\nbefore\n"
        #expect(result.text == expected || result.text == expected + "Terminated\n")
        // Far below the 120 s the command would take, with room for a stalled machine.
        #expect(elapsed < .seconds(60), "took \(elapsed)")
    }

    /// A grandchild that ignores SIGTERM and keeps the output pipe open cannot hang the tool;
    /// it returns within seconds (timeout 1 s, SIGKILL a second later, on 2 busy cores) and nothing of the command
    /// is left running.
    @Test(arguments: commandSandboxes)
    func grandchildIgnoringTermAndHoldingThePipeIsKilled(sandbox: CommandSandbox) async throws {
        let ws = try TempWorkspace()
        // Found by a marker in its arguments: under bwrap `$$` is a pid in the command's own PID namespace.
        let marker = "apple-code-marker-\(UUID().uuidString)"
        let command = #"sh -c 'trap "" TERM; sleep 120; true' "# + marker + " & sleep 120"
        let start = ContinuousClock.now
        let result = await ws.call(RunCommandTool(sandbox: sandbox), ["command": .string(command), "timeout": 1])
        let elapsed = ContinuousClock.now - start
        #expect(elapsed < .seconds(60), "took \(elapsed)")  // far below the 120 s of a grandchild left to run
        #expect(result.text.hasPrefix("Command timed out after 1 s"))
        let left = try await survivors(of: marker, seconds: 1)
        #expect(left.isEmpty, "grandchild \(left) is still running")
    }

    /// A process that leaves the command's process group and session (setsid), or that
    /// daemonizes (its parent exits, it is reparented), does not outlive the command, with or without a sandbox.
    @Test(arguments: commandSandboxes)
    func nothingTheCommandStartedOutlivesIt(sandbox: CommandSandbox) async throws {
        let ws = try TempWorkspace()
        let marker = "apple-code-marker-\(UUID().uuidString)"
        // perl's setsid works on Linux and macOS (which has no setsid command).
        let detached = #"perl -MPOSIX -e 'POSIX::setsid(); exec @ARGV' sh -c 'sleep 120; true' "#
        let command = """
            \(detached)\(marker)-session </dev/null >/dev/null 2>&1 &
            (\(detached)\(marker)-daemon </dev/null >/dev/null 2>&1 &)
            sleep 0.5; echo started
            """
        let result = await ws.call(RunCommandTool(sandbox: sandbox), ["command": .string(command), "timeout": 30])
        #expect(result.text == "exit code 0\nstarted\n")
        let left = try await survivors(of: marker)
        #expect(left.isEmpty, "still running after the command: \(left)")
    }

    /// The same for a command that is stopped at its timeout while the detached processes run.
    @Test(arguments: commandSandboxes)
    func nothingOutlivesACommandThatTimesOut(sandbox: CommandSandbox) async throws {
        let ws = try TempWorkspace()
        let marker = "apple-code-marker-\(UUID().uuidString)"
        let command = #"perl -MPOSIX -e 'POSIX::setsid(); exec @ARGV' sh -c 'trap "" TERM; sleep 120; true' "#
            + marker + " </dev/null >/dev/null 2>&1 & sleep 60"
        let result = await ws.call(RunCommandTool(sandbox: sandbox), ["command": .string(command), "timeout": 1])
        #expect(result.text.hasPrefix("Command timed out after 1 s"))
        let left = try await survivors(of: marker)
        #expect(left.isEmpty, "still running after the command: \(left)")
    }

    @Test func backgroundJobHoldingThePipeDoesNotHangAFinishedCommand() async throws {
        let ws = try TempWorkspace()
        let start = ContinuousClock.now
        let result = await ws.call(RunCommandTool(sandbox: .none(reason: "test")),
                                   ["command": "(sleep 60; echo late) & echo $! > bg.pid; echo quick", "timeout": 30])
        #expect(ContinuousClock.now - start < .seconds(20))  // the command alone would take 30 s or more
        #expect(result.text == "exit code 0\nquick\n")
        let pid = try #require(pid_t(ws.read("bg.pid")?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""))
        // Gone soon after; polled, a loaded machine may take a moment.
        for _ in 0..<100 where !processIsGone(pid) { try await Task.sleep(for: .milliseconds(100)) }
        #expect(processIsGone(pid))
    }

    @Test func longOutputKeepsHeadAndTail() async throws {
        let ws = try TempWorkspace()
        let result = await ws.call(RunCommandTool(sandbox: .none(reason: "test")), ["command": "seq 1 100000"],
                                   tokens: 5000)
        #expect(result.ok)
        #expect(result.text.hasPrefix("exit code 0\n1\n2\n3\n"))
        #expect(result.text.hasSuffix("99999\n100000\n"))
        // Digits cost a token each (TokenEstimator), so the budget cut may replace the runner's own marker.
        #expect(result.text.contains("bytes of output cut ...]") || result.text.contains("cut to fit the context"))
        #expect(TokenEstimator.estimate(result.text) <= 5000)
        let small = await ws.call(RunCommandTool(sandbox: .none(reason: "test")), ["command": "seq 1 100000"],
                                  tokens: 300)
        #expect(small.truncated)
        #expect(small.text.hasPrefix("exit code 0\n1\n"))
        #expect(small.text.hasSuffix("100000\n"))
        #expect(TokenEstimator.estimate(small.text) <= 300)
    }

    /// A command that writes without pause must still be stopped at its timeout, with bounded memory.
    @Test func endlessOutputStillTimesOut() async throws {
        let ws = try TempWorkspace()
        let start = ContinuousClock.now
        let result = await ws.call(RunCommandTool(sandbox: .none(reason: "test")), ["command": "yes", "timeout": 1],
                                   tokens: 5000)
        #expect(ContinuousClock.now - start < .seconds(20))  // the command alone would take 30 s or more
        #expect(result.text.hasPrefix("Command timed out after 1 s; it and everything it started were killed.\ny\ny\n"))
        #expect(result.text.contains("bytes of output cut ...]"))
        #expect(TokenEstimator.estimate(result.text) <= 5000)
    }

    @Test func capturedOutputCountsWhatItCut() {
        var output = CapturedOutput(headBytes: 4, tailBytes: 3)
        for piece in ["ab", "cdef", "ghij", "kl"] {
            Array(piece.utf8).withUnsafeBytes { output.append($0) }
        }
        #expect(output.totalBytes == 12)
        #expect(output.text == "abcd\n[... 5 bytes of output cut ...]\njkl")
    }

    @Test func taskCancellationKillsTheCommand() async throws {
        let ws = try TempWorkspace()
        let tool = RunCommandTool(sandbox: .none(reason: "test"))
        let context = ws.context()
        let start = ContinuousClock.now
        let task = Task { await tool.call(raw: ["command": "sleep 30"], context: context) }
        try await Task.sleep(for: .milliseconds(300))
        task.cancel()
        let result = await task.value
        #expect(ContinuousClock.now - start < .seconds(20))  // the command alone would take 30 s or more
        #expect(result.text.hasPrefix("Command stopped"))
    }

    /// The CLI's SIGINT/SIGTERM path (`killAllRunning`) relies on every running command's group being
    /// registered while it runs and removed after. (Calling killAllRunning here would kill the commands of
    /// tests running in parallel.)
    @Test func runningCommandsAreRegisteredForKillAll() async throws {
        let ws = try TempWorkspace()
        let tool = RunCommandTool(sandbox: .none(reason: "test"))
        let context = ws.context()
        let start = ContinuousClock.now
        let task = Task { await tool.call(raw: ["command": "echo $$ > leader.pid; sleep 30"], context: context) }
        var leader: pid_t?
        while leader == nil, ContinuousClock.now - start < .seconds(25) {
            try await Task.sleep(for: .milliseconds(20))
            leader = ws.read("leader.pid").flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }
        let pid = try #require(leader)
        #expect(CommandRunner.running.withLock { $0[pid] != nil })
        #expect(killpg(pid, SIGKILL) == 0)
        let result = await task.value
        #expect(result.text == "Command was killed by signal 9.")
        #expect(CommandRunner.running.withLock { $0[pid] == nil })
    }

    @Test func runDeadlineStopsTheCommand() async throws {
        let ws = try TempWorkspace()
        let context = ws.context(deadline: .now + .milliseconds(500))
        let start = ContinuousClock.now
        let result = await RunCommandTool(sandbox: .none(reason: "test")).call(raw: ["command": "sleep 30"],
                                                                               context: context)
        #expect(ContinuousClock.now - start < .seconds(20))  // the command alone would take 30 s or more
        #expect(result.text.hasPrefix("Command stopped"))
        let late = await RunCommandTool(sandbox: .none(reason: "test")).call(
            raw: ["command": "true"], context: ws.context(deadline: .now - .seconds(1)))
        #expect(late.text == "Error: runCommand: no time is left in this run to start a command")
        #expect(late.commandsRun == 0)
    }

    @Test(arguments: ["rm -rf /", "rm -rf ~", "rm -fr $HOME/", "sudo ls", "echo x; shutdown -h now",
                      ":(){ :|:& };:", "mkfs.ext4 /dev/sda1", "dd if=/dev/zero of=/dev/sda"])
    func courtesyBlocklistRefusesTheObvious(command: String) async throws {
        let ws = try TempWorkspace()
        let result = await ws.call(RunCommandTool(sandbox: .none(reason: "test")), ["command": .string(command)])
        #expect(result.text.hasPrefix("Error: runCommand: refused:"))
        #expect(result.commandsRun == 0)
    }

    @Test(arguments: ["rm -rf build", "rm -rf ./dist/*", "grep -r sudo .", "echo reboot"])
    func blocklistLeavesOrdinaryCommandsAlone(command: String) {
        #expect(CommandPolicy.refusal(for: command) == nil)
    }

    @Test func missingCommandArgumentIsAnError() async throws {
        let ws = try TempWorkspace()
        let result = await ws.call(RunCommandTool(sandbox: .none(reason: "test")), [:])
        #expect(result.text == "Error: runCommand: missing required argument 'command'")
        let blank = await ws.call(RunCommandTool(sandbox: .none(reason: "test")), ["command": "  "])
        #expect(blank.text == "Error: runCommand: the command is empty")
    }

    @Test func sandboxChoiceIsLogged() async throws {
        let ws = try TempWorkspace()
        let lines = LogLines()
        _ = await RunCommandTool(sandbox: .none(reason: "bwrap not installed")).call(
            raw: ["command": "true"], context: ws.context(log: { lines.append($0) }))
        #expect(lines.all == ["runCommand sandbox: none (bwrap not installed)"])
    }
}

final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}
