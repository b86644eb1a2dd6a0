// apple-flow-launcher: the executable of `Apple Flow.app`, the program the launchd job runs.
//
//     apple-flow-launcher PROGRAM [ARGUMENT ...]
//
// It starts PROGRAM (the daemon's Python) as its child and stays its parent. macOS charges a process's file access
// and Apple events to its *responsible* app, which for a launchd job is the job's own executable and, for the
// children it spawns, still that executable. So Full Disk Access and Automation are granted to "Apple Flow" (an app
// with a stable identifier), not to a versioned Python binary that the next `brew upgrade` replaces. Spawning
// rather than exec'ing is what keeps it responsible: after an exec the process would be Python again.
//
// While the child runs, SIGTERM and SIGINT (launchd's stop, Ctrl-C) are passed on to it, and the launcher exits
// with the child's status (128 + N when a signal N ended it). A child that cannot be started (exit 127 when the
// program is missing, 126 otherwise) or that fails gets one line on stderr saying what happened and what to do.
// The child's environment is the launcher's plus APPLE_FLOW_LAUNCHER, this executable's path, by which the daemon
// knows the name macOS shows for it.
//
// Only the toolchain's C library: no Foundation, so the bundle stays small and its bytes change only when this
// file does (a changed binary means a new code signature, and macOS asks for the grants again).

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

enum Launcher {
    static let name = "apple-flow-launcher"
    /// The signals passed on to the child.
    static let forwarded: [Int32] = [SIGTERM, SIGINT]
}

/// One line on stderr, prefixed with this program's name (launchd writes it to the service's error log).
func say(_ text: String) {
    let line = "\(Launcher.name): \(text)\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
}

func errorText(_ code: Int32) -> String {
    String(cString: strerror(code))
}

func signalName(_ number: Int32) -> String {
    switch number {
    case SIGTERM: "SIGTERM"
    case SIGINT: "SIGINT"
    case SIGKILL: "SIGKILL"
    case SIGHUP: "SIGHUP"
    case SIGQUIT: "SIGQUIT"
    case SIGABRT: "SIGABRT"
    case SIGSEGV: "SIGSEGV"
    case SIGBUS: "SIGBUS"
    default: "signal \(number)"
    }
}

/// This executable's absolute path: launchd passes the full path as argv[0]; a relative one (a test, a shell) is
/// made absolute against the working folder.
func ownPath() -> String {
    var given = CommandLine.arguments[0]
    if given.hasPrefix("/") || !given.contains("/") { return given }
    while given.hasPrefix("./") { given.removeFirst(2) }
    guard let folder = getcwd(nil, 0) else { return given }
    defer { free(folder) }
    return String(cString: folder) + "/" + given
}

/// The child's environment: this process's, with APPLE_FLOW_LAUNCHER set to this executable.
func childEnvironment() -> [String] {
    var entries: [String] = []
    #if canImport(Darwin)
    let start: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = _NSGetEnviron().pointee  // not in its headers
    #else
    let start: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = environ
    #endif
    guard var cursor = start else { return ["APPLE_FLOW_LAUNCHER=\(ownPath())"] }
    while let entry = cursor.pointee {
        let text = String(cString: entry)
        if !text.hasPrefix("APPLE_FLOW_LAUNCHER=") { entries.append(text) }
        cursor += 1
    }
    entries.append("APPLE_FLOW_LAUNCHER=\(ownPath())")
    return entries
}

/// Starts `argv` with this process's descriptors, default dispositions and an empty signal mask (the launcher
/// blocks the signals it forwards; the child must not inherit that). Same process group: when launchd kills the
/// job's group after its exit timeout, the child goes too.
func spawn(_ argv: [String], environment: [String]) -> Result<pid_t, SpawnFailure> {
    #if os(Linux)
    var attributes = posix_spawnattr_t()
    #else
    var attributes: posix_spawnattr_t?
    #endif
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var defaults = sigset_t()
    var mask = sigset_t()
    sigemptyset(&defaults)
    for number in Launcher.forwarded + [SIGCHLD] { sigaddset(&defaults, number) }
    sigemptyset(&mask)
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setsigmask(&attributes, &mask)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

    var cArguments = argv.map { strdup($0) } + [nil]
    defer { for pointer in cArguments { free(pointer) } }
    var cEnvironment = environment.map { strdup($0) } + [nil]
    defer { for pointer in cEnvironment { free(pointer) } }
    var pid: pid_t = 0
    // posix_spawnp: a bare name is looked up on PATH, as a shell would.
    let code = posix_spawnp(&pid, argv[0], nil, &attributes, &cArguments, &cEnvironment)
    return code == 0 ? .success(pid) : .failure(SpawnFailure(code: code))
}

struct SpawnFailure: Error {
    let code: Int32
}

/// Waits for `child`, passing SIGTERM and SIGINT on to it, and returns its wait status. The signals are blocked
/// and taken with sigwait, so nothing runs in a signal handler and none is lost between two waits.
func supervise(_ child: pid_t, waitingFor signals: sigset_t) -> Int32 {
    var set = signals
    while true {
        var status: Int32 = 0
        let done = waitpid(child, &status, WNOHANG)
        if done == child { return status }
        if done < 0 && errno != EINTR {
            say("lost track of the daemon (pid \(child)): \(errorText(errno))")
            return 1 << 8  // as an exit status of 1
        }
        var number: Int32 = 0
        guard sigwait(&set, &number) == 0 else { continue }
        if Launcher.forwarded.contains(number) { kill(child, number) }
        // SIGCHLD: loop round to reap.
    }
}

func run() -> Int32 {
    let argv = Array(CommandLine.arguments.dropFirst())
    guard !argv.isEmpty else {
        say("usage: \(Launcher.name) PROGRAM [ARGUMENT ...] (starts PROGRAM as its child; "
            + "`apple-flow service install` writes the launchd job that runs it)")
        return 64  // EX_USAGE
    }
    // SIGCHLD needs a handler of its own: with the default disposition (ignore) some systems drop it even while
    // it is blocked, and sigwait would never see the child end.
    signal(SIGCHLD) { _ in }
    var signals = sigset_t()
    sigemptyset(&signals)
    for number in Launcher.forwarded + [SIGCHLD] { sigaddset(&signals, number) }
    // Blocked before the spawn, so a stop that arrives while the child starts waits for it instead of killing
    // the launcher alone.
    sigprocmask(SIG_BLOCK, &signals, nil)

    let child: pid_t
    switch spawn(argv, environment: childEnvironment()) {
    case .success(let pid):
        child = pid
    case .failure(let failure):
        let missing = failure.code == ENOENT
        say("cannot start \(argv[0]): \(errorText(failure.code)). "
            + (missing
                ? "The daemon's Python is not there (a moved checkout or a rebuilt .venv): run "
                    + "`apple-flow service install` again from the checkout."
                : "Check that it is an executable file, then run `apple-flow service install` again."))
        return missing ? 127 : 126
    }

    let status = supervise(child, waitingFor: signals)
    // WIFEXITED / WEXITSTATUS / WTERMSIG are macros Swift does not import; these are their definitions.
    let termination = status & 0x7f
    if termination == 0 {
        let code = (status >> 8) & 0xff
        if code != 0 { say("the daemon (pid \(child)) exited with status \(code); its log above says why") }
        return code
    }
    say("the daemon (pid \(child)) was ended by \(signalName(termination))")
    return 128 + termination
}

exit(run())
