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

        (deny file-write*)
        (allow file-write*
            (subpath (param "WORKSPACE"))
            (subpath (param "TMP"))
            (subpath (param "VAR_TMP"))
            (subpath (param "TMPDIR"))
            (literal "/dev/null")
            (literal "/dev/zero")
            (literal "/dev/dtracehelper")
            (regex #"^/dev/fd/"))
        """#

    /// `executable -p <profile> -DKEY=value ... --`; the command follows.
    static func argv(executable: String, workspace: String, folders: SeatbeltFolders) -> [String] {
        let parameters = [("WORKSPACE", workspace)] + folders.parameters
        return [executable, "-p", text] + parameters.map { "-D\($0.0)=\($0.1)" } + ["--"]
    }
}

/// The folders besides the workspace that commands may write under sandbox-exec, as real paths (the profile
/// matches real paths: /tmp is /private/tmp on macOS).
public struct SeatbeltFolders: Sendable, Equatable {
    public var tmp: String
    public var varTmp: String
    public var tmpdir: String

    /// The profile's parameters, in the order the profile names them.
    var parameters: [(String, String)] { [("TMP", tmp), ("VAR_TMP", varTmp), ("TMPDIR", tmpdir)] }

    /// This process's folders ($TMPDIR from the environment).
    static func current() -> SeatbeltFolders {
        resolve(tmpdir: getenv("TMPDIR").map { String(cString: $0) }, realPath: Workspace.realPath)
    }

    /// Every folder as a real path; $TMPDIR falls back to /tmp when unset or missing.
    static func resolve(tmpdir: String?, realPath: (String) -> String?) -> SeatbeltFolders {
        let tmp = realPath("/tmp") ?? "/tmp"
        return SeatbeltFolders(tmp: tmp, varTmp: realPath("/var/tmp") ?? "/var/tmp",
                               tmpdir: tmpdir.flatMap(realPath) ?? tmp)
    }
}
