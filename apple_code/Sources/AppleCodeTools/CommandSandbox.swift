#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The OS sandbox runCommand wraps each command in (field notes §5): the protection against a command that
/// writes outside the workspace or uses the network. The blocklist in `CommandPolicy` is only a courtesy.
public enum CommandSandbox: Sendable, Equatable {
    /// Linux: bubblewrap. The whole file system read-only, the workspace writable, a private /tmp, no network.
    case bubblewrap(executable: String)
    /// macOS: sandbox-exec with a generated profile (writes only to the workspace and temp folders, no network).
    case seatbelt
    /// Nothing available; commands run unconfined (said in --verbose).
    case none(reason: String)

    /// The argv that runs `command` with `sh -c` inside this sandbox; `workspace` is a real path.
    public func argv(command: String, workspace: String) -> [String] {
        switch self {
        case .bubblewrap(let executable):
            return Self.bubblewrapArguments(executable: executable, workspace: workspace) + ["/bin/sh", "-c", command]
        case .seatbelt:
            let profile = SeatbeltProfile.text(workspace: workspace, tempFolders: SeatbeltProfile.tempFolders())
            return ["/usr/bin/sandbox-exec", "-p", profile, "/bin/sh", "-c", command]
        case .none:
            return ["/bin/sh", "-c", command]
        }
    }

    /// `--tmpfs /tmp` gives each command a private, writable /tmp that vanishes with it, so even a workspace
    /// under /tmp leaves the rest of the host's /tmp untouched. The workspace bind comes after it and wins.
    /// `--unshare-pid --as-pid-1`: the command is PID 1 of its own PID namespace, so when it exits the kernel
    /// kills everything it started, whatever session or group that moved to; `--die-with-parent` does the same
    /// when bwrap (killed at a timeout) or apple-code goes.
    static func bubblewrapArguments(executable: String, workspace: String) -> [String] {
        [executable, "--ro-bind", "/", "/", "--tmpfs", "/tmp", "--bind", workspace, workspace,
         "--dev", "/dev", "--proc", "/proc", "--unshare-net", "--unshare-pid", "--as-pid-1", "--die-with-parent",
         "--setenv", "TMPDIR", "/tmp", "--chdir", workspace]
    }

    public var label: String {
        switch self {
        case .bubblewrap: "bwrap (workspace and a private /tmp writable, no network)"
        case .seatbelt: "sandbox-exec (workspace and temp writable, no network)"
        case .none(let reason): "none (\(reason))"
        }
    }

    /// The sandbox this machine offers, probed once per process.
    public static var detected: CommandSandbox { probed }

    private static let probed: CommandSandbox = probe()

    private static func probe() -> CommandSandbox {
        #if os(macOS)
        return access("/usr/bin/sandbox-exec", X_OK) == 0
            ? .seatbelt : .none(reason: "/usr/bin/sandbox-exec not found")
        #else
        guard let executable = findExecutable("bwrap") else {
            return .none(reason: "bwrap not installed; install the bubblewrap package")
        }
        // bwrap may be installed yet unable to start (no user namespaces in a container): try it once.
        let sandbox = CommandSandbox.bubblewrap(executable: executable)
        let status = runBlocking(sandbox.argv(command: "true", workspace: "/"), seconds: 10)
        return status == 0 ? sandbox : .none(reason: "bwrap is installed but cannot start a sandbox here")
        #endif
    }

    static func findExecutable(_ name: String) -> String? {
        let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
        for folder in path.split(separator: ":") where !folder.isEmpty {
            let candidate = "\(folder)/\(name)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// Runs a probe on the calling thread; its exit status, or nil when it could not run or took too long.
    private static func runBlocking(_ argv: [String], seconds: Int) -> Int32? {
        guard let outcome = try? CommandRunner.supervise(argv, directory: "/",
                                                         timeoutAt: .now + .seconds(seconds), deadline: nil,
                                                         capture: CapturedOutput(), control: RunControl()),
              case .exited(let code) = outcome.ending else { return nil }
        return code
    }
}

/// The macOS sandbox-exec profile: everything allowed except network use and writes outside the workspace,
/// the temp folders and a few devices. A pure function of its inputs, so it is tested on Linux.
public enum SeatbeltProfile {
    public static func text(workspace: String, tempFolders: [String]) -> String {
        let writable = ([workspace] + tempFolders).map { "    (subpath \(quoted($0)))" }
        return """
        (version 1)
        (allow default)
        (deny network*)
        (deny file-write*)
        (allow file-write*
        \(writable.joined(separator: "\n"))
            (literal "/dev/null")
            (literal "/dev/zero")
            (literal "/dev/tty")
            (literal "/dev/dtracehelper")
            (regex #"^/dev/fd/"))
        """
    }

    /// The real paths of the temp folders a command may write: /tmp, /var/tmp and $TMPDIR (/tmp is
    /// /private/tmp on macOS; the profile matches real paths).
    static func tempFolders() -> [String] {
        var folders = ["/tmp", "/var/tmp"]
        if let tmp = getenv("TMPDIR") { folders.append(String(cString: tmp)) }
        var seen: [String] = []
        for folder in folders {
            let real = Workspace.realPath(folder) ?? folder
            if !seen.contains(real) { seen.append(real) }
        }
        return seen
    }

    /// A profile string literal: backslashes and double quotes escaped; control characters cannot occur in
    /// a path that passed `Workspace` checks, but are escaped anyway rather than trusted.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            case let c where c.value < 0x20: out += "\\x" + String(c.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
