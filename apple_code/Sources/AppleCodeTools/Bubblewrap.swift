#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The bwrap command line that runs one command (Linux). What it depends on in the host's file system comes in
/// as `HostFiles`, so tests compute it for any host.
enum Bubblewrap {
    /// - The whole file system read-only; the workspace writable.
    /// - A private, writable /tmp that vanishes with the command, so even a workspace under /tmp leaves the
    ///   rest of the host's /tmp untouched (the workspace bind comes after it and wins).
    /// - A private /run: the sockets of system and session services live there (D-Bus, whose systemd can start
    ///   a program outside the sandbox; Docker; databases). NixOS's /run/current-system stays visible.
    /// - `--unshare-net`: no network but a loopback interface of its own.
    /// - `--unshare-pid --as-pid-1`: the command is PID 1 of its own PID namespace, so when it exits the kernel
    ///   kills everything it started, whatever session or group that moved to; `--die-with-parent` does the same
    ///   when bwrap (killed at a timeout) or apple-code goes. `--new-session`: no controlling terminal (TIOCSTI).
    static func arguments(executable: String, workspace: String, host: HostFiles) -> [String] {
        var arguments = [executable, "--ro-bind", "/", "/", "--tmpfs", "/tmp"]
        if host.kind("/run") == .directory {
            arguments += ["--tmpfs", "/run", "--ro-bind-try", "/run/current-system", "/run/current-system"]
            // Programs expect $XDG_RUNTIME_DIR to exist; this one is empty and private to the command.
            if let runtime = host.runtimeDirectory, runtime.hasPrefix("/run/"), !runtime.contains("/../") {
                arguments += ["--dir", runtime]
            }
        }
        if host.kind("/var/run") == .directory { arguments += ["--tmpfs", "/var/run"] }
        arguments += ["--bind", workspace, workspace]
        arguments += ["--dev", "/dev", "--proc", "/proc", "--unshare-net", "--unshare-pid", "--as-pid-1",
                      "--new-session", "--die-with-parent", "--setenv", "TMPDIR", "/tmp", "--chdir", workspace]
        return arguments
    }
}

/// What the sandbox's arguments depend on in the host's file system.
struct HostFiles: Sendable {
    /// What is at a path, without following a final symlink.
    var kind: @Sendable (String) -> Workspace.FileKind
    /// $XDG_RUNTIME_DIR.
    var runtimeDirectory: String?

    static var live: HostFiles {
        HostFiles(kind: { Workspace.fileKind($0) },
                  runtimeDirectory: getenv("XDG_RUNTIME_DIR").map { String(cString: $0) })
    }
}
