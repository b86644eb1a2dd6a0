#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// What a finished command left behind.
public struct CommandOutcome: Sendable, Equatable {
    public enum Ending: Sendable, Equatable {
        case exited(Int32)
        case signalled(Int32)
        /// The per-command timeout expired; the whole process group was killed.
        case timedOut
        /// The task was cancelled or the run's deadline passed; the whole process group was killed.
        case stopped
    }

    public var ending: Ending
    public var output: CapturedOutput
    public var seconds: Double
}

/// The head and tail of a command's combined stdout and stderr, with the count of everything in between.
public struct CapturedOutput: Sendable, Equatable {
    public static let defaultHeadBytes = 6000
    public static let defaultTailBytes = 4000

    public private(set) var head: [UInt8] = []
    public private(set) var tail: [UInt8] = []
    public private(set) var totalBytes = 0
    let headLimit: Int
    let tailLimit: Int

    public init(headBytes: Int = defaultHeadBytes, tailBytes: Int = defaultTailBytes) {
        headLimit = headBytes
        tailLimit = tailBytes
    }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        totalBytes += bytes.count
        var rest = bytes[...]
        if head.count < headLimit {
            let take = min(headLimit - head.count, rest.count)
            head.append(contentsOf: rest.prefix(take))
            rest = rest.dropFirst(take)
        }
        guard !rest.isEmpty else { return }
        tail.append(contentsOf: rest.suffix(tailLimit))
        if tail.count > 2 * tailLimit { tail.removeFirst(tail.count - tailLimit) }
    }

    /// The kept text; when output was cut, a marker between head and tail says how much.
    public var text: String {
        let keptTail = tail.suffix(tailLimit)
        let omitted = totalBytes - head.count - keptTail.count
        let headText = String(decoding: head, as: UTF8.self)
        guard omitted > 0 else { return headText + String(decoding: keptTail, as: UTF8.self) }
        return headText + "\n[... \(omitted) bytes of output cut ...]\n" + String(decoding: keptTail, as: UTF8.self)
    }

    public var isEmpty: Bool { totalBytes == 0 }
}

/// Runs a program in its own session and process group with stdin on /dev/null and stdout+stderr on one pipe, and never
/// hangs: the timeout, the run's deadline and task cancellation each SIGTERM the whole group, SIGKILL it a
/// second later, and stop draining the pipe half a second after that, even if a grandchild still holds it.
/// When the command ends, however it ends, everything it started is killed: its process group, and every process
/// that carries its marker (`LeftoverProcesses`), so a `setsid` or daemonized grandchild does not outlive it.
/// Supervision runs on its own thread so a long command never blocks Swift's cooperative thread pool.
public enum CommandRunner {
    /// SIGTERM-to-SIGKILL grace.
    static let killGrace: Duration = .seconds(1)
    /// How long output is still drained after the group was SIGKILLed or the leader exited.
    static let drainGrace: Duration = .milliseconds(500)
    static let pollMilliseconds: Int32 = 50

    public static func run(_ argv: [String], in directory: String, timeout: Duration,
                           deadline: ContinuousClock.Instant? = nil,
                           capture: CapturedOutput = CapturedOutput()) async throws -> CommandOutcome {
        let control = RunControl()
        let timeoutAt = ContinuousClock.now + timeout
        let result: Result<CommandOutcome, ToolFailure> = await withTaskCancellationHandler {
            await onOwnThread {
                Result {
                    try supervise(argv, directory: directory, timeoutAt: timeoutAt, deadline: deadline,
                                  capture: capture, control: control)
                }.mapError { $0 as? ToolFailure ?? ToolFailure("\($0)") }
            }
        } onCancel: {
            control.cancel()
        }
        return try result.get()
    }

    /// Sends SIGKILL to the process group of every command still running and to everything each one started
    /// (for the CLI's signal handling: children are killed before the process exits).
    public static func killAllRunning() {
        for (group, token) in running.withLock({ $0 }) { signalEverything(group, token: token, SIGKILL) }
    }

    /// The commands running now: process group (the leader's pid) to marker token.
    static let running = Mutex<[pid_t: String]>([:])

    /// `signal` to the command's process group and to every process holding its marker.
    private static func signalEverything(_ group: pid_t, token: String, _ signal: Int32) {
        _ = killpg(group, signal)
        LeftoverProcesses.send(signal, token: token)
    }

    static func supervise(_ argv: [String], directory: String, timeoutAt: ContinuousClock.Instant,
                          deadline: ContinuousClock.Instant?, capture: CapturedOutput,
                          control: RunControl) throws -> CommandOutcome {
        let start = ContinuousClock.now
        let token = LeftoverProcesses.newToken()
        // Spawned under the registry's lock, so killAllRunning cannot miss a command that has just started.
        let (pid, readEnd) = try running.withLock { groups in
            let started = try spawn(argv, directory: directory, marker: LeftoverProcesses.entry(token: token))
            groups[started.0] = token
            return started
        }
        defer {
            close(readEnd)
            running.withLock { _ = $0.removeValue(forKey: pid) }
        }
        var output = capture
        var endOfOutput = false
        var leaderExited = false
        var stopReason: CommandOutcome.Ending?
        var terminatedAt: ContinuousClock.Instant?
        var killedAt: ContinuousClock.Instant?
        var exitedAt: ContinuousClock.Instant?
        var buffer = [UInt8](repeating: 0, count: 1 << 16)

        while true {
            if !endOfOutput {
                var poller = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
                _ = poll(&poller, 1, pollMilliseconds)
                endOfOutput = drain(readEnd, into: &output, buffer: &buffer)
            } else {
                usleep(UInt32(pollMilliseconds) * 1000)
            }
            if !leaderExited, hasExited(pid) {
                leaderExited = true
                exitedAt = .now
            }
            let now = ContinuousClock.now
            if leaderExited, endOfOutput { break }
            if stopReason == nil {
                if control.isCancelled || deadline.map({ now >= $0 }) == true {
                    stopReason = .stopped
                } else if now >= timeoutAt {
                    stopReason = .timedOut
                }
                if stopReason != nil {
                    terminatedAt = now
                    signalEverything(pid, token: token, SIGTERM)
                }
            }
            if killedAt == nil {
                let graceOver = terminatedAt.map { now - $0 >= killGrace } ?? false
                // The leader is done but something it started still holds the pipe: the command is over.
                let leftovers = exitedAt.map { now - $0 >= drainGrace } ?? false
                if graceOver || leftovers {
                    signalEverything(pid, token: token, SIGKILL)
                    killedAt = now
                }
            } else if let killedAt, now - killedAt >= drainGrace {
                break
            }
        }
        // Whatever is left (background jobs that closed the pipe, processes in other groups or sessions) goes
        // too. The leader is a zombie until reaped below, so its process group id cannot have been reused.
        _ = killpg(pid, SIGKILL)
        LeftoverProcesses.killAll(token: token)
        let status = reap(pid)
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let ending: CommandOutcome.Ending
        if let stopReason {
            ending = stopReason
        } else if let status, status & 0x7f == 0 {
            ending = .exited((status >> 8) & 0xff)
        } else {
            ending = .signalled(status.map { $0 & 0x7f } ?? SIGKILL)
        }
        return CommandOutcome(ending: ending, output: output, seconds: seconds)
    }

    /// Reads what is available now, at most 16 chunks so a command that writes without pause (`yes`) cannot
    /// keep the loop from checking its timeout; true at end of file.
    private static func drain(_ fd: Int32, into output: inout CapturedOutput, buffer: inout [UInt8]) -> Bool {
        for _ in 0..<16 {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                buffer.withUnsafeBytes { output.append(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
                continue
            }
            if count == 0 { return true }
            if errno == EINTR { continue }
            return errno != EAGAIN && errno != EWOULDBLOCK
        }
        return false
    }

    /// Whether the leader has exited, leaving it a zombie (WNOWAIT) so its pid and group stay reserved.
    private static func hasExited(_ pid: pid_t) -> Bool {
        var info = siginfo_t()
        guard waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 else { return true }
        return info.si_signo == SIGCHLD
    }

    /// Reaps the leader (waiting at most about a second after SIGKILL) and returns its wait status.
    private static func reap(_ pid: pid_t) -> Int32? {
        var status: Int32 = 0
        for _ in 0..<100 {
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid { return status }
            if result < 0, errno != EINTR { return nil }
            usleep(10_000)
        }
        return nil
    }

    #if os(Linux)
    /// glibc's (and musl's) POSIX_SPAWN_SETSID, which Swift's Glibc module does not export (it needs _GNU_SOURCE).
    private static let spawnSetSID: Int32 = 0x80
    private static let closeOthers: Int32 = 0

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32)
        -> Int32
    /// glibc 2.34+'s posix_spawn_file_actions_addclosefrom_np (not exported to Swift either), looked up at run
    /// time so an older glibc still runs; there, descriptors without close-on-exec are inherited.
    private static let addCloseFrom: AddCloseFrom? = {
        guard let handle = dlopen(nil, RTLD_NOW),
              let symbol = dlsym(handle, "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: AddCloseFrom.self)
    }()
    #else
    private static let spawnSetSID = Int32(POSIX_SPAWN_SETSID)
    /// Darwin closes every descriptor the file actions do not set up.
    private static let closeOthers = Int32(POSIX_SPAWN_CLOEXEC_DEFAULT)
    #endif

    /// Starts `argv` in a new session and process group: stdin /dev/null, stdout and stderr on one pipe, default signal
    /// dispositions (the parent may ignore SIGPIPE), working directory `directory`, `marker` (`NAME=value`) added
    /// to the environment.
    private static func spawn(_ argv: [String], directory: String, marker: String) throws -> (pid_t, Int32) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw ToolFailure("cannot create a pipe (\(FileIO.errorText(errno)))") }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)

        #if os(Linux)
        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        #else
        var actions: posix_spawn_file_actions_t?
        var attributes: posix_spawnattr_t?
        #endif
        posix_spawn_file_actions_init(&actions)
        posix_spawnattr_init(&attributes)
        defer {
            posix_spawn_file_actions_destroy(&actions)
            posix_spawnattr_destroy(&attributes)
        }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_adddup2(&actions, fds[1], 2)
        // Nothing else of apple-code's: a descriptor some library left without close-on-exec (a pipe, a socket
        // to the model server, a file outside the workspace) would let a command write past the sandbox, or
        // hold another command's output pipe open.
        #if os(Linux)
        if let closeFrom = addCloseFrom { _ = closeFrom(&actions, 3) }
        #endif
        var defaults = sigset_t()
        var mask = sigset_t()
        sigfillset(&defaults)
        sigemptyset(&mask)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &mask)
        // A new session (which also makes it the leader of a new process group): no controlling terminal, so a
        // command cannot push input into the terminal apple-code runs in (TIOCSTI, CVE-2017-5226).
        posix_spawnattr_setflags(&attributes, Int16(spawnSetSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK
                                                    | closeOthers))

        // posix_spawn_file_actions_addchdir_np is not visible through Swift's Glibc module: a one-line shell
        // changes directory and then execs the real program (same process, same group).
        let wrapped = ["/bin/sh", "-c", "cd -- \"$0\" && exec \"$@\"", directory] + argv
        var cArguments = wrapped.map { strdup($0) } + [nil]
        defer { for pointer in cArguments { free(pointer) } }
        var pid: pid_t = 0
        var cEnvironment = (commandEnvironment() + [marker]).map { strdup($0) } + [nil]
        defer { for pointer in cEnvironment { free(pointer) } }
        let code = posix_spawn(&pid, "/bin/sh", &actions, &attributes, &cArguments, &cEnvironment)
        close(fds[1])
        guard code == 0 else {
            close(fds[0])
            throw ToolFailure("cannot start \(argv[0]) (\(FileIO.errorText(code)))")
        }
        return (pid, fds[0])
    }
}

extension CommandRunner {
    /// The variables a command inherits, and nothing else: what any program needs. apple-code's own (its API key)
    /// and whatever its caller had (a daemon's tokens, other agents' keys) stay out, so a command cannot print them.
    static let passedVariables: Set<String> = ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TMPDIR", "TERM"]

    /// Set for every command whatever the caller had. Python keys a cached .pyc on the source's mtime in whole
    /// seconds and its size, so a test run, then an edit of the same size in the same second (what an agent does),
    /// then a second test run imported the old code; with no cache written that cannot happen, and the user's
    /// repository gets no __pycache__ folders from the agent either.
    static let fixedVariables = ["PYTHONDONTWRITEBYTECODE=1"]

    /// `environment` as `NAME=value` entries: `passedVariables`, the locale's `LC_*` (default: this process's),
    /// and `fixedVariables`.
    static func commandEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment)
        -> [String] {
        (environment.filter { passedVariables.contains($0.key) || $0.key.hasPrefix("LC_") }
            .map { "\($0.key)=\($0.value)" } + fixedVariables).sorted()
    }
}

/// Runs blocking work (a command's supervision, a scan of the process table) on a thread of its own, so it never
/// holds one of Swift's few cooperative threads, which other tasks' timers and requests need.
func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: work()) }.start()
    }
}

/// Cancellation signal from the awaiting task to the supervising thread.
final class RunControl: Sendable {
    private let cancelled = Atomic<Bool>(false)
    func cancel() { cancelled.store(true, ordering: .relaxed) }
    var isCancelled: Bool { cancelled.load(ordering: .relaxed) }
}
