#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The OS sandbox runCommand wraps each command in (field notes §5): the protection against a command that
/// writes outside the workspace, uses the network or starts a program outside the sandbox. The blocklist in
/// `CommandPolicy` is only a courtesy. CONTRACT.md lists what each one allows and denies.
public enum CommandSandbox: Sendable, Equatable {
    /// Linux: bubblewrap (`Bubblewrap`). The whole file system read-only, the workspace writable, a private /tmp
    /// and /run, no network but a loopback of its own, no capabilities. `userNamespace`: run by root, the command
    /// also gets a user namespace of its own (where the kernel allows one), which empties its bounding set.
    case bubblewrap(executable: String, userNamespace: Bool = false)
    /// macOS: sandbox-exec with apple-code's profile (`SeatbeltProfile`): writes only to the workspace and the
    /// temp and per-user cache folders, loopback only, no way to start programs outside it.
    case seatbelt(executable: String, folders: SeatbeltFolders)
    /// No sandbox here (none installed, or refused where apple-code runs): commands run without one, and
    /// --check, --verbose and (when detected) every result say so.
    case none(reason: String)
    /// The sandbox is there but rejects apple-code's profile, which is apple-code's own fault: commands are
    /// refused rather than run without it.
    case broken(reason: String)

    /// The argv that runs `command` with `sh -c` inside this sandbox; `workspace` is a real path; `hidden`: the
    /// paths the command must not read; `deniedPorts`: loopback ports it may not connect to (nil: this run's; under
    /// bwrap the host's loopback is out of reach anyway).
    public func argv(command: String, workspace: String, hidden: HiddenPaths = .current,
                     deniedPorts: [Int]? = nil) -> [String] {
        switch self {
        case .bubblewrap(let executable, let userNamespace):
            return Bubblewrap.arguments(executable: executable, workspace: workspace, host: .live,
                                        hooksFolder: GitInternals.hooksFolder(root: workspace), hidden: hidden,
                                        userNamespace: userNamespace)
                + ["/bin/sh", "-c", command]
        case .seatbelt(let executable, let folders):
            // The commands' own temporary folder, where they may also bind Unix-domain sockets.
            let temporary = folders.sockets.isEmpty ? [] : ["/usr/bin/env", "TMPDIR=" + folders.sockets + "/"]
            return SeatbeltProfile.argv(executable: executable, workspace: workspace, folders: folders,
                                        hooksFolder: GitInternals.hooksFolder(root: workspace), hidden: hidden,
                                        deniedPorts: deniedPorts)
                + temporary + ["/bin/sh", "-c", command]
        case .none:
            return ["/bin/sh", "-c", command]
        case .broken:
            // RunCommandTool refuses before this; should anything get here, it runs nothing.
            return ["/bin/sh", "-c", "echo 'the command sandbox does not work here' >&2; exit 126"]
        }
    }

    /// The git pointer files missing now under `workspace` that bwrap cannot keep a command from making
    /// (`GitPointers`): looked at again after the command, and removed when made. None elsewhere: the Seatbelt
    /// profile denies making them, and without a sandbox nothing is kept.
    public func watchedGitPointers(workspace: String) -> [String] {
        guard case .bubblewrap = self else { return [] }
        return GitPointers.find(in: workspace, host: .live).missingPointers(host: .live)
    }

    /// After a command: removes the watched pointer files it made; the note for its result, if it made any.
    public static func removeGitPointers(madeFrom watched: [String], workspace: String) -> String? {
        GitPointers.removeCreated(GitPointers.created(since: watched, host: .live), workspace: workspace)
    }

    public var label: String {
        switch self {
        case .bubblewrap: "bwrap (writes: the workspace and a private /tmp; network: its own loopback only; "
            + "no capabilities)"
        case .seatbelt: "sandbox-exec (writes: the workspace and the temp folders; network: loopback only)"
        case .none(let reason): "none (\(reason))"
        case .broken(let reason): "broken (\(reason)); commands are refused"
        }
    }

    /// The sandbox this machine offers, probed once per process (on the first command, or by --check).
    public static var detected: CommandSandbox { probed }

    private static let probed: CommandSandbox = probe()

    private static func probe() -> CommandSandbox {
        #if os(macOS)
        let folders = SeatbeltFolders.current()
        return probeSeatbelt(executable: SeatbeltProfile.executable, folders: folders, workspace: folders.tmp)
        #else
        guard let executable = findExecutable("bwrap") else {
            return .none(reason: "bwrap not installed; install the bubblewrap package")
        }
        // bwrap may be installed yet unable to start (no user namespaces in a container): try it. Run by root, a
        // user namespace is tried first; where the kernel refuses one, `--cap-drop ALL` alone still leaves the
        // command no capability (and bwrap's no_new_privs keeps it from gaining any).
        var output = ""
        for userNamespace in geteuid() == 0 ? [true, false] : [false] {
            let sandbox = CommandSandbox.bubblewrap(executable: executable, userNamespace: userNamespace)
            // No hidden paths: covering them is not what is probed (and under "/" there is no workspace to keep).
            let probe = sandbox.argv(command: "true", workspace: "/", hidden: HiddenPaths(paths: []))
            let (status, said) = runBlocking(probe, seconds: 10)
            if status == 0 { return sandbox }
            if output.isEmpty { output = said }
        }
        return .none(reason: "bwrap is installed but cannot start a sandbox here (\(firstLine(output)))")
        #endif
    }

    /// Runs apple-code's profile once on /usr/bin/true: finding sandbox-exec says nothing about whether it can
    /// apply the profile. Refused because apple-code itself already runs in a sandbox (macOS allows no sandbox
    /// inside another: `sandbox_apply: Operation not permitted`, exit 71): commands run without apple-code's own
    /// sandbox, still inside the outer one. Any other failure is a profile sandbox-exec rejects: `.broken`.
    static func probeSeatbelt(executable: String, folders: SeatbeltFolders, workspace: String) -> CommandSandbox {
        guard access(executable, X_OK) == 0 else { return .none(reason: "\(executable) not found") }
        let argv = SeatbeltProfile.argv(executable: executable, workspace: workspace, folders: folders)
            + ["/usr/bin/true"]
        let (status, output) = runBlocking(argv, seconds: 10)
        if status == 0 { return .seatbelt(executable: executable, folders: folders) }
        let said = firstLine(output)
        if output.contains("sandbox_apply") {
            return .none(reason: "sandbox-exec cannot apply apple-code's profile (\(said)): apple-code itself runs "
                         + "inside another sandbox, which still confines the commands")
        }
        let ending = status.map { "exit \($0)" } ?? "no exit status"
        return .broken(reason: "sandbox-exec rejected apple-code's profile (\(ending): \(said))")
    }

    /// Why `path` cannot be a workspace whose commands may write (nil when it can): it is `/`, a home folder or
    /// a folder above one, where shell start-up files and ~/Library/LaunchAgents would be writable and run later
    /// outside any sandbox, or ~/Library itself or its LaunchAgents. `path` and `homes` are real paths.
    public static func broadFolderProblem(_ path: String, homes: [String]) -> String? {
        if path == "/" { return "is the root folder" }
        if homes.contains(path) { return "is the home folder" }
        if let home = homes.first(where: { $0.hasPrefix(path + "/") }) { return "holds the home folder \(home)" }
        // ~/Library holds LaunchAgents (started at login), preferences and other programs' state.
        for home in homes {
            if path == home + "/Library" { return "is the home folder's Library" }
            let agents = home + "/Library/LaunchAgents"
            if path == agents || path.hasPrefix(agents + "/") { return "is in the home folder's Library/LaunchAgents" }
        }
        return nil
    }

    /// `broadFolderProblem` for this user's home folders ($HOME and the account's), as a whole sentence.
    public static func broadWorkspaceProblem(_ workspace: String) -> String? {
        let real = Workspace.realPath(workspace) ?? workspace
        guard let problem = broadFolderProblem(real, homes: homeFolders()) else { return nil }
        return "\(real) \(problem): commands and file writes there could change shell start-up files and "
            + "~/Library/LaunchAgents, which run later outside any sandbox; use a project folder, or --read-only"
    }

    /// The real paths of $HOME and of the account's home folder.
    static func homeFolders() -> [String] {
        var homes: [String] = []
        if let home = getenv("HOME") { homes.append(String(cString: home)) }
        if let entry = getpwuid(getuid()), let directory = entry.pointee.pw_dir { homes.append(String(cString: directory)) }
        return Array(Set(homes.filter { !$0.isEmpty }.compactMap { Workspace.realPath($0) }))
    }

    static func findExecutable(_ name: String) -> String? {
        let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
        for folder in path.split(separator: ":") where !folder.isEmpty {
            let candidate = "\(folder)/\(name)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// Runs a probe on the calling thread: its exit status (nil when it could not run or took too long) and
    /// its output.
    private static func runBlocking(_ argv: [String], seconds: Int) -> (Int32?, String) {
        guard let outcome = try? CommandRunner.supervise(argv, directory: "/",
                                                         timeoutAt: .now + .seconds(seconds), deadline: nil,
                                                         capture: CapturedOutput(), control: RunControl()) else {
            return (nil, "it could not be started")
        }
        guard case .exited(let code) = outcome.ending else { return (nil, outcome.output.text) }
        return (code, outcome.output.text)
    }

    private static func firstLine(_ text: String) -> String {
        let line = text.split(separator: "\n").first.map(String.init) ?? ""
        return line.isEmpty ? "no output" : String(line.prefix(300))
    }
}
