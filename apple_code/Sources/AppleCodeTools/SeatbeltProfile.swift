#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// apple-code's sandbox-exec profile (macOS), written from `(deny default)`: everything a command may do is allowed
/// below, by name, with the reason. Every path comes in as a parameter (`sandbox-exec -D WORKSPACE=/path`, read by
/// `(param "WORKSPACE")`), so no path is ever written into it and none needs escaping; the text only varies in how
/// many hidden paths it names and which loopback ports it refuses. Its text, parameters and argv are pure values,
/// tested on Linux (SeatbeltProfileTests); `apple-code --sandbox-check` runs it on a Mac.
///
/// In SBPL the last rule that matches an operation wins: the allows come first, the denies that carve exceptions
/// out of them last.
public enum SeatbeltProfile {
    /// Only this one: a `sandbox-exec` earlier on PATH could be anything.
    public static let executable = "/usr/bin/sandbox-exec"

    /// The Mach services a command may look up, each with the reason; every other one is denied (LaunchServices,
    /// Apple events, the pasteboard, the keychain's SecurityServer, DNS ...). Enough for the shell, git, python3,
    /// make, xcrun and swift.
    public static let machServices: [(name: String, reason: String)] = [
        ("com.apple.system.opendirectoryd.libinfo", "user and group names (getpwuid): the shell, git, python3, ls"),
        ("com.apple.system.notification_center", "notify(3), which libc and Foundation use (time zone changes)"),
        ("com.apple.cfprefsd.daemon", "reading system preferences (xcrun and swift: the selected developer folder)"),
        ("com.apple.cfprefsd.agent", "reading the user's preferences (writing them is denied below)"),
        ("com.apple.bsd.dirhelper", "confstr: the per-user temp and cache folders (clang's module cache, xcrun)"),
        ("com.apple.logd", "os_log of the toolchain (without it only their log lines are lost)"),
    ]

    /// The sysctl values a command may read (a name, or a prefix ending in `.`), each with the reason; every other one
    /// is denied: among them `kern.procargs2` and `kern.proc.*`, the arguments and environment of the user's other
    /// processes. Enough for the shell, swift, git, python3 and make.
    public static let sysctls: [(name: String, reason: String)] = [
        ("hw.", "the CPU and memory: core counts (make -j, swift-build, os.cpu_count), features, cache and page sizes"),
        ("machdep.cpu.", "the CPU's brand and features: clang's and swiftc's host checks, python's platform module"),
        ("kern.ostype", "uname -s: the shell, python's platform module, configure scripts"),
        ("kern.osrelease", "uname -r: the same"),
        ("kern.version", "uname -v: the same"),
        ("kern.hostname", "uname -n: git's default identity, python's socket.gethostname"),
        ("kern.osversion", "the OS build: xcrun, swift, python's platform.mac_ver"),
        ("kern.osproductversion", "the macOS version (and its compatibility form): the same"),
        ("kern.osvariant_status", "libSystem asks it as every program starts"),
        ("kern.secure_kernel", "libSystem asks it as every program starts"),
        ("kern.argmax", "the longest argument list: xargs, make, the shell"),
        ("kern.maxfilesperproc", "the open-file limit: python, swift-build"),
        ("kern.usrstack64", "the stack's address: language runtimes at start"),
        ("vm.loadavg", "the load average: make -l, python's os.getloadavg"),
        ("sysctl.proc_translated", "whether a program runs under Rosetta: python, swift, installers"),
        ("sysctl.proc_cputype", "a program's CPU type: the same"),
    ]

    /// Loopback ports refused whatever the caller says: Remote Login and Screen Sharing act as the user.
    public static let alwaysDeniedPorts = [22, 5900]

    /// The profile for a workspace that `holding` hidden folders hold (everything in them but the workspace is
    /// hidden) with `others` further hidden paths, refusing `deniedPorts` on loopback besides `alwaysDeniedPorts`.
    /// `lockedFolders`: the folders inside the workspace that hold a hidden path, which may not be renamed.
    /// `sockets`: whether the commands' own temporary folder is a parameter (`SOCKETS`), where they may bind and
    /// connect to Unix-domain sockets too.
    public static func text(holding: Int = 0, others: Int = 0, deniedPorts: [Int] = [], lockedFolders: Int = 0,
                            sockets: Bool = false) -> String {
        var lines = [
            "(version 1)",
            "(deny default)",
            "",
            "; Programs: any may run; the sandbox goes with them. Signals and process inspection only inside it.",
            "(allow process-exec)",
            "(allow process-fork)",
            "(allow signal (target same-sandbox))",
            "(allow process-info* (target same-sandbox))",
            "; POSIX semaphores: python3's multiprocessing locks.",
            "(allow ipc-posix-sem)",
            "; The shared memory notify(3) reads.",
            #"(allow ipc-posix-shm-read* (ipc-posix-name "apple.shm.notification_center"))"#,
            "; Preferences may be read, not written (below).",
            "(allow user-preference-read)",
            "; Creating a socket does nothing until it binds or connects: the network rules decide that.",
            "(allow system-socket)",
            "; JIT compilers (node's V8) map memory as code.",
            "(allow dynamic-code-generation)",
            "",
        ]
        lines.append("; sysctl reads: only these (another process's arguments, kern.procargs2, are not among them).")
        for sysctl in sysctls {
            let filter = sysctl.name.hasSuffix(".") ? "sysctl-name-prefix" : "sysctl-name"
            lines.append("; \(sysctl.reason)")
            lines.append(#"(allow sysctl-read ("# + filter + #" ""# + sysctl.name + #""))"#)
        }
        for service in machServices {
            lines.append("; \(service.reason)")
            lines.append(#"(allow mach-lookup (global-name ""# + service.name + #""))"#)
        }
        lines += [
            "",
            "; Reads: everywhere but the hidden paths (at the end). dyld maps programs and their libraries (and a",
            "; build runs what it links); a test of whether a path exists tells nothing more.",
            "(allow file-read*)",
            "(allow file-map-executable)",
            "(allow file-test-existence)",
            "",
            "; Writes: the workspace, the temp and per-user temp and cache folders, a few devices, and pseudo-terminals",
            "; made inside the sandbox (not the terminal apple-code runs in).",
            "(allow file-write*",
            #"    (subpath (param "WORKSPACE"))"#,
            #"    (subpath (param "TMP"))"#,
            #"    (subpath (param "VAR_TMP"))"#,
            #"    (subpath (param "TMPDIR"))"#,
            #"    (subpath (param "USER_TEMP"))"#,
            #"    (subpath (param "USER_CACHE"))"#,
            #"    (literal "/dev/null")"#,
            #"    (literal "/dev/zero")"#,
            #"    (literal "/dev/dtracehelper")"#,
            ##"    (regex #"^/dev/fd/"))"##,
            "(allow pseudo-tty)",
            #"(allow file-read* file-write* file-ioctl (literal "/dev/ptmx"))"#,
            "(allow file-read* file-write* file-ioctl",
            ##"    (require-all (regex #"^/dev/ttys[0-9]+$") (extension "com.apple.sandbox.pty")))"##,
            "",
            "; Network: loopback only, as under bwrap; Unix-domain sockets only inside the workspace.",
            #"(allow network-bind (local ip "*:*"))"#,
            #"(allow network-inbound (local ip "localhost:*"))"#,
            #"(allow network-outbound (remote ip "localhost:*"))"#,
            #"(allow network-bind (local unix-socket (subpath (param "WORKSPACE"))))"#,
            #"(allow network-outbound (remote unix-socket (subpath (param "WORKSPACE"))))"#,
        ]
        if sockets {
            lines += [
                "; And in the commands' own temporary folder (their TMPDIR): pytest's tmp_path, multiprocessing's",
                "; Manager. Not the shared /tmp or the user's $TMPDIR, where other programs' sockets live (tmux's, an",
                "; editor's), which would run commands outside the sandbox.",
                #"(allow network-bind (local unix-socket (subpath (param "SOCKETS"))))"#,
                #"(allow network-outbound (remote unix-socket (subpath (param "SOCKETS"))))"#,
            ]
        }
        lines += [
            "; The Mac's loopback is shared with its own services: those that act as the user, and the daemon's web",
            "; page (a command must not approve its own work), stay closed.",
        ]
        let ports = alwaysDeniedPorts + deniedPorts.filter { !alwaysDeniedPorts.contains($0) }
        lines.append("(deny network-outbound " + ports.map { #"(remote ip "localhost:\#($0)")"# }
            .joined(separator: " ") + ")")
        lines += [
            "",
            "; Code git runs later, outside any sandbox: inside the workspace no .git is made, replaced or removed, and",
            "; no repository's hooks, info, config or pointer to another git folder (commondir, gitdir; a submodule's",
            "; or worktree's too, at any depth) is made or written, in any letter case (the Mac's file system does not",
            "; tell .GIT/Hooks from .git/hooks).",
            #"(deny file-write* (require-all (subpath (param "WORKSPACE")) (regex #""# + gitFolderPattern + #"")))"#,
            #"(deny file-write* (require-all (subpath (param "WORKSPACE"))"#,
            #"    (regex #""# + gitInternalsPattern + #"")))"#,
            "; Nor the folder core.hooksPath names inside the workspace (.git/hooks when it names none there).",
            #"(deny file-write* (subpath (param "GIT_HOOKS_PATH")))"#,
            "",
            "; The owner's secrets. A hidden folder that holds the workspace: all of it but the workspace (its own",
            "; entry stays visible, so paths through it resolve).",
        ]
        for index in 0..<holding {
            lines.append(#"(deny file-read-data file-read-xattr file-map-executable file-write* (require-all (subpath (param ""#
                         + hiddenParameter(index) + #"")) (require-not (subpath (param "WORKSPACE")))))"#)
        }
        for index in holding..<(holding + others) {
            lines.append(#"(deny file-read* file-map-executable file-write* (subpath (param ""#
                         + hiddenParameter(index) + #"")))"#)
        }
        if lockedFolders > 0 {
            lines.append("; A folder inside the workspace that holds a hidden path is not renamed or removed: the hidden")
            lines.append("; path would be uncovered under the new name.")
        }
        for index in 0..<lockedFolders {
            lines.append(#"(deny file-write-unlink (literal (param ""# + lockedParameter(index) + #"")))"#)
        }
        lines += [
            "",
            "; Ways out: a program started through LaunchServices (open), an Apple event (osascript), a launchd job",
            "; (launchctl submit) or another program's preferences runs outside this profile. Denied by default",
            "; already; named so that no allow above can ever open them.",
            "(deny lsopen)",
            "(deny appleevent-send)",
            "(deny job-creation)",
            "(deny user-preference-write)",
            "(deny mach-lookup",
            #"    (global-name "com.apple.coreservices.launchservicesd")"#,
            #"    (global-name "com.apple.launchservicesd")"#,
            #"    (global-name "com.apple.coreservices.appleevents"))"#,
        ]
        return lines.joined(separator: "\n") + "\n"
    }

    /// `.git` itself, as the last name of a path, in any letter case.
    static let gitFolderPattern = "/" + anyCase(".git") + "$"
    /// What git reads as configuration, code or a pointer elsewhere (`GitPointers.protectedNames`: hooks, info,
    /// config, config.worktree, commondir, gitdir) in a repository's git folder, or anywhere below its `modules`
    /// and `worktrees` (a submodule's name may hold slashes, so its git folder may be at any depth), in any letter
    /// case. Made or written, both are denied.
    static let gitInternalsPattern = "/" + anyCase(".git") + "/((" + anyCase("modules") + "|" + anyCase("worktrees")
        + ")/(.+/)?)?(" + GitPointers.protectedNames.map(anyCase).joined(separator: "|") + ")(/.*)?$"

    /// A regex that matches `text` in any letter case: each letter as `[xX]`, a dot as `\.`.
    static func anyCase(_ text: String) -> String {
        text.map { character -> String in
            if character == "." { return "\\." }
            let lower = character.lowercased(), upper = character.uppercased()
            return lower == upper ? String(character) : "[\(lower)\(upper)]"
        }.joined()
    }

    static func hiddenParameter(_ index: Int) -> String { "HIDDEN_\(index)" }

    static func lockedParameter(_ index: Int) -> String { "HIDDEN_HOLDER_\(index)" }

    /// `executable -p <profile> -DKEY=value ... --`; the command follows. `hooksFolder`: the folder
    /// `core.hooksPath` names inside the workspace, if any; `hidden`: the paths commands may not read;
    /// `deniedPorts`: loopback ports they may not connect to (default: what this run was given).
    static func argv(executable: String, workspace: String, folders: SeatbeltFolders, hooksFolder: String? = nil,
                     hidden: HiddenPaths = HiddenPaths(paths: []), deniedPorts: [Int]? = nil) -> [String] {
        let hooks = hooksFolder ?? (workspace == "/" ? "" : workspace) + "/.git/hooks"
        let (holding, others) = hidden.split(for: workspace)
        let hiddenParameters = (holding + others).enumerated().map { (hiddenParameter($0.offset), $0.element) }
        var locked: [String] = []
        for path in others where Workspace.fileKind(path) != .missing {
            for folder in Bubblewrap.foldersBetween(workspace, path, host: .live) where !locked.contains(folder) {
                locked.append(folder)
            }
        }
        let parameters = [("WORKSPACE", workspace)] + folders.parameters + [("GIT_HOOKS_PATH", hooks)]
            + hiddenParameters + locked.enumerated().map { (lockedParameter($0.offset), $0.element) }
        let profile = text(holding: holding.count, others: others.count, deniedPorts: deniedPorts ?? configuredPorts,
                           lockedFolders: locked.count, sockets: !folders.sockets.isEmpty)
        return [executable, "-p", profile] + parameters.map { "-D\($0.0)=\($0.1)" } + ["--"]
    }

    private static let ports = Mutex<[Int]>([])

    /// The loopback ports this run's commands may not connect to (`--deny-port`).
    public static var configuredPorts: [Int] { ports.withLock { $0 } }

    public static func configure(deniedPorts: [Int]) { ports.withLock { $0 = deniedPorts } }

    /// The ports a run's commands are refused: those named (`--deny-port`), and the model server's when `modelURL`
    /// is on this machine, unless the owner allows it (`APPLE_CODE_MODEL_PORT_OPEN=1` in `environment`).
    public static func deniedPorts(named: [Int], modelURL: String?, environment: [String: String]) -> [Int] {
        guard environment["APPLE_CODE_MODEL_PORT_OPEN"] != "1",
              let model = modelURL.flatMap(SeatbeltFolders.loopbackPort(of:)), !named.contains(model) else {
            return named
        }
        return named + [model]
    }
}

/// The folders besides the workspace that commands may write under sandbox-exec, as real paths (the profile
/// matches real paths: /tmp is /private/tmp on macOS): the temp folders, and the per-user temp and cache folders
/// (`confstr`), where Apple's tools write whatever $TMPDIR says (xcrun's cache, the compiler's module cache).
public struct SeatbeltFolders: Sendable, Equatable {
    public var tmp: String
    public var varTmp: String
    public var tmpdir: String
    public var userTemp: String
    public var userCache: String
    /// The commands' own temporary folder (their TMPDIR), made by this process (0700) inside `tmpdir`; Unix-domain
    /// sockets may be bound there. Empty: none (sockets only in the workspace).
    public var sockets: String = ""

    /// The profile's parameters, in the order the profile names them.
    var parameters: [(String, String)] {
        [("TMP", tmp), ("VAR_TMP", varTmp), ("TMPDIR", tmpdir), ("USER_TEMP", userTemp), ("USER_CACHE", userCache)]
            + (sockets.isEmpty ? [] : [("SOCKETS", sockets)])
    }

    /// This process's folders.
    static func current() -> SeatbeltFolders {
        #if canImport(Darwin)
        let userTemp = confstrPath(_CS_DARWIN_USER_TEMP_DIR)
        let userCache = confstrPath(_CS_DARWIN_USER_CACHE_DIR)
        #else
        let userTemp: String? = nil
        let userCache: String? = nil
        #endif
        var folders = resolve(tmpdir: getenv("TMPDIR").map { String(cString: $0) }, userTemp: userTemp,
                              userCache: userCache, homes: CommandSandbox.homeFolders(), realPath: Workspace.realPath)
        folders.sockets = makeCommandsTemp(in: folders.tmpdir) ?? ""
        return folders
    }

    /// A new folder only this user can enter, for the commands' temporary files and sockets (left for the system's
    /// clean-up of the temp folder); nil when it cannot be made.
    static func makeCommandsTemp(in folder: String) -> String? {
        var template = Array((folder + "/apple-code-commands-XXXXXX").utf8CString)
        return template.withUnsafeMutableBufferPointer { buffer -> String? in
            guard let base = buffer.baseAddress, mkdtemp(base) != nil else { return nil }
            return String(cString: base)
        }
    }

    /// The port of a model server at `baseURL` when it listens on this machine's loopback (nil otherwise): commands
    /// are refused it unless the owner allows it, since a local server's API can fetch (Ollama's /api/pull) and so
    /// carry data out, which the sandbox's no-network rule is for.
    public static func loopbackPort(of baseURL: String) -> Int? {
        guard let components = URLComponents(string: baseURL), let host = components.host?.lowercased(),
              ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host) || host.hasPrefix("127.") else { return nil }
        return components.port ?? (components.scheme?.lowercased() == "https" ? 443 : 80)
    }

    /// Every folder as a real path. One that is unset, missing, or would make everything writable (`/`, a home
    /// folder or above one, as a $TMPDIR of $HOME would) is /tmp instead.
    static func resolve(tmpdir: String?, userTemp: String?, userCache: String?, homes: [String],
                        realPath: (String) -> String?) -> SeatbeltFolders {
        let tmp = realPath("/tmp") ?? "/tmp"
        func folder(_ path: String?) -> String {
            guard let real = path.flatMap(realPath),
                  CommandSandbox.broadFolderProblem(real, homes: homes) == nil else { return tmp }
            return real
        }
        return SeatbeltFolders(tmp: tmp, varTmp: realPath("/var/tmp") ?? "/var/tmp", tmpdir: folder(tmpdir),
                               userTemp: folder(userTemp), userCache: folder(userCache))
    }

    #if canImport(Darwin)
    /// A `confstr` value such as _CS_DARWIN_USER_CACHE_DIR (`/var/folders/…/C/`); nil when unavailable.
    private static func confstrPath(_ name: Int32) -> String? {
        let length = confstr(name, nil, 0)
        guard length > 1 else { return nil }
        var buffer = [CChar](repeating: 0, count: length)
        guard confstr(name, &buffer, length) == length else { return nil }
        return String(cString: buffer)
    }
    #endif
}
