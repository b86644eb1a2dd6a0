#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The OS sandbox runCommand wraps each command in (field notes §5): the protection against a command that
/// writes outside the workspace or uses the network. The blocklist in `CommandPolicy` is only a courtesy.
public enum CommandSandbox: Sendable, Equatable {
    /// Linux: bubblewrap (`Bubblewrap`). The whole file system read-only, the workspace writable, a private /tmp
    /// and /run, no network but a loopback of its own.
    case bubblewrap(executable: String)
    /// macOS: sandbox-exec with apple-code's profile (`SeatbeltProfile`): writes only to the workspace and the
    /// temp folders, no network.
    case seatbelt(executable: String, folders: SeatbeltFolders)
    /// Nothing available; commands run unconfined (said in --verbose).
    case none(reason: String)

    /// The argv that runs `command` with `sh -c` inside this sandbox; `workspace` is a real path.
    public func argv(command: String, workspace: String) -> [String] {
        switch self {
        case .bubblewrap(let executable):
            return Bubblewrap.arguments(executable: executable, workspace: workspace, host: .live)
                + ["/bin/sh", "-c", command]
        case .seatbelt(let executable, let folders):
            return SeatbeltProfile.argv(executable: executable, workspace: workspace, folders: folders)
                + ["/bin/sh", "-c", command]
        case .none:
            return ["/bin/sh", "-c", command]
        }
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
        return access(SeatbeltProfile.executable, X_OK) == 0
            ? .seatbelt(executable: SeatbeltProfile.executable, folders: .current())
            : .none(reason: "\(SeatbeltProfile.executable) not found")
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
