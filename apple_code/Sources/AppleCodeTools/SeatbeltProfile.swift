#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// apple-code's sandbox-exec profile (macOS). The text is a constant: every path comes in as a parameter
/// (`sandbox-exec -D WORKSPACE=/path`, read by `(param "WORKSPACE")`), so no path is ever written into it and
/// none needs escaping. Its text, parameters and argv are pure values, tested on Linux.
public enum SeatbeltProfile {
    /// Only this one: a `sandbox-exec` earlier on PATH could be anything.
    public static let executable = "/usr/bin/sandbox-exec"

    public static let text = #"""
        (version 1)
        (allow default)

        ; Ways out: a program started through LaunchServices (open), an Apple event (osascript), a launchd job
        ; (launchctl submit) or another program's preferences runs outside this profile.
        (deny lsopen)
        (deny appleevent-send)
        (deny job-creation)
        (deny user-preference-write)
        (deny mach-lookup
            (global-name "com.apple.coreservices.launchservicesd")
            (global-name "com.apple.launchservicesd")
            (global-name "com.apple.coreservices.appleevents"))

        ; Network: loopback only, as under bwrap; Unix-domain sockets only inside the workspace. The Mac's loopback
        ; is shared with its own services: Remote Login and Screen Sharing act as the user, so they stay closed.
        (deny network*)
        (allow network-bind (local ip "*:*"))
        (allow network-inbound (local ip "localhost:*"))
        (allow network-outbound (remote ip "localhost:*"))
        (allow network-bind (local unix-socket (subpath (param "WORKSPACE"))))
        (allow network-outbound (remote unix-socket (subpath (param "WORKSPACE"))))
        (deny network-outbound (remote ip "localhost:22") (remote ip "localhost:5900"))

        ; Writes: the workspace, the temp and per-user temp and cache folders, a few devices, and pseudo-terminals
        ; made inside the sandbox (not the terminal apple-code runs in).
        (deny file-write*)
        (allow file-write*
            (subpath (param "WORKSPACE"))
            (subpath (param "TMP"))
            (subpath (param "VAR_TMP"))
            (subpath (param "TMPDIR"))
            (subpath (param "USER_TEMP"))
            (subpath (param "USER_CACHE"))
            (literal "/dev/null")
            (literal "/dev/zero")
            (literal "/dev/dtracehelper")
            (regex #"^/dev/fd/"))
        (allow pseudo-tty)
        (allow file-read* file-write* file-ioctl (literal "/dev/ptmx"))
        (allow file-read* file-write* file-ioctl
            (require-all (regex #"^/dev/ttys[0-9]+$") (extension "com.apple.sandbox.pty")))

        ; Code git runs later, outside any sandbox: inside the workspace no .git is made, replaced or removed, and
        ; no repository's hooks or config (or a submodule's or worktree's) are written.
        (deny file-write* (require-all (subpath (param "WORKSPACE")) (regex #"/\.git$")))
        (deny file-write* (require-all (subpath (param "WORKSPACE"))
            (regex #"/\.git/((modules|worktrees)/[^/]+/)*(hooks|config|config\.worktree)(/.*)?$")))
        ; Nor the folder core.hooksPath names inside the workspace (.git/hooks when it names none there).
        (deny file-write* (subpath (param "GIT_HOOKS_PATH")))
        """#

    /// `executable -p <profile> -DKEY=value ... --`; the command follows. `hooksFolder`: the folder
    /// `core.hooksPath` names inside the workspace, if any.
    static func argv(executable: String, workspace: String, folders: SeatbeltFolders, hooksFolder: String? = nil)
        -> [String] {
        let hooks = hooksFolder ?? (workspace == "/" ? "" : workspace) + "/.git/hooks"
        let parameters = [("WORKSPACE", workspace)] + folders.parameters + [("GIT_HOOKS_PATH", hooks)]
        return [executable, "-p", text] + parameters.map { "-D\($0.0)=\($0.1)" } + ["--"]
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

    /// The profile's parameters, in the order the profile names them.
    var parameters: [(String, String)] {
        [("TMP", tmp), ("VAR_TMP", varTmp), ("TMPDIR", tmpdir), ("USER_TEMP", userTemp), ("USER_CACHE", userCache)]
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
        return resolve(tmpdir: getenv("TMPDIR").map { String(cString: $0) }, userTemp: userTemp,
                       userCache: userCache, homes: CommandSandbox.homeFolders(), realPath: Workspace.realPath)
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
