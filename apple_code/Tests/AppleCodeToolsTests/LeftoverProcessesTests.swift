import Foundation
import Testing
@testable import AppleCodeTools

/// How the processes a command left behind are found.
@Suite struct LeftoverProcessesTests {
    @Test func markerMustBeAWholeString() {
        let entry = Array("APPLE_CODE_COMMAND=abc".utf8)
        func strings(_ items: [String]) -> [UInt8] { Array(items.joined(separator: "\0").utf8) }
        #expect(LeftoverProcesses.holds(strings(["PATH=/bin", "APPLE_CODE_COMMAND=abc", "HOME=/h"]), entry: entry))
        #expect(LeftoverProcesses.holds(strings(["APPLE_CODE_COMMAND=abc"]), entry: entry))
        #expect(LeftoverProcesses.holds(strings(["A=1", "APPLE_CODE_COMMAND=abc"]) + [0], entry: entry))
        #expect(!LeftoverProcesses.holds(strings(["APPLE_CODE_COMMAND=abcd"]), entry: entry))
        #expect(!LeftoverProcesses.holds(strings(["XAPPLE_CODE_COMMAND=abc"]), entry: entry))
        #expect(!LeftoverProcesses.holds(strings(["APPLE_CODE_COMMAND=ab"]), entry: entry))
        #expect(!LeftoverProcesses.holds([], entry: entry))
    }

    /// macOS reads KERN_PROCARGS2: argc (4 bytes), the executable path, NUL padding, argv, then the environment.
    @Test func markerIsFoundInAKernProcArgs2Block() {
        let strings = "/bin/sleep\0\0\0\0sleep\060\0PATH=/usr/bin\0APPLE_CODE_COMMAND=t1\0HOME=/Users/me\0\0\0"
        let block: [UInt8] = [2, 0, 0, 0] + Array(strings.utf8)
        #expect(LeftoverProcesses.holds(block, entry: Array("APPLE_CODE_COMMAND=t1".utf8)))
        #expect(!LeftoverProcesses.holds(block, entry: Array("APPLE_CODE_COMMAND=t2".utf8)))
    }

    @Test func descendantsFollowParentLinks() {
        let table: [ProcessTable.Entry] = [
            .init(pid: 10, ppid: 1), .init(pid: 11, ppid: 10), .init(pid: 12, ppid: 11), .init(pid: 13, ppid: 1),
            .init(pid: 20, ppid: 1), .init(pid: 21, ppid: 20),
        ]
        #expect(LeftoverProcesses.descendants(of: [10], in: table) == [10, 11, 12])
        #expect(LeftoverProcesses.descendants(of: [11, 20], in: table) == [11, 12, 20, 21])
        #expect(LeftoverProcesses.descendants(of: [], in: table).isEmpty)
    }

    #if os(Linux)
    @Test func parentIsReadFromProcStat() {
        #expect(ProcessTable.parentFromStat(Array("42 (sh) S 7 42 42 0 -1".utf8)) == 7)
        // A command name may hold spaces and parentheses.
        #expect(ProcessTable.parentFromStat(Array("42 (a) b (c) R 9 1 1".utf8)) == 9)
        #expect(ProcessTable.parentFromStat(Array("garbage".utf8)) == nil)
    }
    #endif

    /// The real process table: a child started with the marker is found, with its own child, and killed.
    @Test func markedProcessesAndTheirChildrenAreFoundAndKilled() async throws {
        let token = LeftoverProcesses.newToken()
        let marker = "apple-code-marker-\(UUID().uuidString)"
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/sh")
        // The inner child clears its environment: it is found as a descendant of the marked shell.
        child.arguments = ["-c", "env -i sh -c 'sleep 120; true' \(marker)-inner & sleep 120; true", marker]
        child.environment = ["PATH": "/usr/bin:/bin", LeftoverProcesses.variable: token]
        try child.run()
        defer { if child.isRunning { child.terminate() } }
        var found: Set<pid_t> = []
        for _ in 0..<50 where found.count < 4 {
            try await Task.sleep(for: .milliseconds(50))
            found = await onOwnThread { LeftoverProcesses.find(token: token) }
        }
        #expect(found.contains(child.processIdentifier))
        #expect(found.count == 4, "both shells and their sleeps: \(found)")
        #expect(!found.contains(getpid()))
        await onOwnThread { LeftoverProcesses.killAll(token: token) }
        #expect(try await survivors(of: marker).isEmpty)
        #expect(await onOwnThread { LeftoverProcesses.find(token: token) }.isEmpty)
    }

    /// Under bwrap even a process that clears its environment and leaves the session dies with the command: it
    /// is in the command's PID namespace. (Without bwrap such a process is the one case that can survive.)
    @Test(.enabled(if: hasBubblewrap, "needs a working bwrap (Linux)"))
    func bubblewrapKillsAProcessThatClearedItsEnvironment() async throws {
        let ws = try TempWorkspace()
        let marker = "apple-code-marker-\(UUID().uuidString)"
        let command = "env -i /usr/bin/perl -MPOSIX -e 'POSIX::setsid(); exec @ARGV' /bin/sh -c 'sleep 120; true' "
            + marker + " </dev/null >/dev/null 2>&1 & sleep 0.5; echo started"
        let result = await ws.call(RunCommandTool(sandbox: .detected), ["command": .string(command)])
        #expect(result.text == "exit code 0\nstarted\n")
        #expect(try await survivors(of: marker).isEmpty)
    }
}
