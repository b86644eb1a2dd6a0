#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// The owner's secrets, which neither a command nor a file tool may read (contract: Hidden paths): keys and
/// tokens under the home folder, on macOS the Messages, Mail and Safari data and the keychains, and whatever the
/// caller names (`--hide`, `APPLE_CODE_HIDE`). Under bwrap an empty folder or file is mounted over each; the
/// Seatbelt profile denies reading them; the file tools refuse them and listings and searches skip them.
///
/// The workspace is never hidden: when a hidden folder holds it, everything in that folder but the workspace
/// stays hidden (a project kept under ~/.apple-flow is usable, the state database beside it is not).
public struct HiddenPaths: Sendable, Equatable {
    /// Under the home folder, on every system.
    public static let homeSecrets = [
        ".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".config/gh", ".netrc", ".git-credentials",
        ".docker/config.json", ".kube", ".npmrc", ".pypirc", ".apple-flow",
    ]
    /// Under the home folder, on macOS.
    public static let macSecrets = [
        "Library/Messages", "Library/Mail", "Library/Safari", "Library/Cookies", "Library/Keychains",
        "Library/Application Support/AddressBook",
    ]
    /// The environment variable that names more, `:`-separated.
    public static let variable = "APPLE_CODE_HIDE"

    /// Absolute paths without a trailing slash: each as named and, when different, its real path (a symlinked
    /// ~/.ssh is hidden at both ends).
    public let paths: [String]
    /// What each existing path was when the list was made (device and inode), so a hidden file or folder stays
    /// hidden from the file tools under another name: renaming a folder around it (`mv sub sub2`, or the daemon's
    /// folder inside a workspace) or a hard link.
    public let identities: [(path: String, identity: FileIdentity)]

    public init(paths: [String]) {
        var unique: [String] = []
        for path in paths where !unique.contains(path) { unique.append(path) }
        self.paths = unique
        identities = unique.compactMap { path in FileIdentity(following: path).map { (path, $0) } }
    }

    public static func == (left: HiddenPaths, right: HiddenPaths) -> Bool {
        left.paths == right.paths && left.identities.map(\.identity) == right.identities.map(\.identity)
    }

    /// The standard list for `home` (none without one) and this system, then `extra`, made absolute against
    /// `current`; each also as its real path where that differs.
    static func standard(home: String?, extra: [String], macOS: Bool, current: String = "/",
                                realPath: (String) -> String? = { Workspace.realPath($0) }) -> HiddenPaths {
        var named: [String] = []
        if let home, home.hasPrefix("/"), home != "/" {
            let base = trimmed(home)
            named += (homeSecrets + (macOS ? macSecrets : [])).map { base + "/" + $0 }
        }
        for path in extra where !path.isEmpty {
            let absolute = trimmed(path.hasPrefix("/") ? path : trimmed(current) + "/" + path)
            if absolute != "/" { named.append(absolute) }  // hiding everything would leave no system to run on
        }
        var all: [String] = []
        for path in named {
            all.append(path)
            if let real = realPath(path), real != path { all.append(real) }
        }
        return HiddenPaths(paths: all)
    }

    /// Whether `path` (absolute, real) is hidden from a run in `workspace` (a real path): it is, or is inside,
    /// a hidden path that is not the workspace or a folder above it; or it is inside a hidden folder that holds
    /// the workspace, but not inside the workspace.
    public func hides(_ path: String, workspace: String) -> Bool {
        paths.contains { hidden in
            guard Self.isWithin(path, hidden) else { return false }
            return !Self.isWithin(workspace, hidden) || !Self.isWithin(path, workspace)
        } || isHiddenFile(path, workspace: workspace)
    }

    /// Whether `path` (inside `workspace`) is, by device and inode, a hidden file or folder that is not the
    /// workspace or above it: one moved or linked to another name.
    public func isHiddenFile(_ path: String, workspace: String) -> Bool {
        guard !identities.isEmpty, path != workspace, let identity = FileIdentity(of: path) else { return false }
        return identities.contains { $0.identity == identity && !Self.isWithin(workspace, $0.path) }
    }

    /// `hides` for `path` or any folder between the workspace and it (the file tools: a hidden folder renamed
    /// makes what it holds hidden under the new name too).
    public func hidesAnyPart(of path: String, workspace: String) -> Bool {
        if hides(path, workspace: workspace) { return true }
        guard !identities.isEmpty, Self.isWithin(path, workspace) else { return false }
        var current = path
        while let slash = current.lastIndex(of: "/"), current != workspace {
            current = slash == current.startIndex ? "/" : String(current[..<slash])
            guard current != workspace, Self.isWithin(current, workspace) else { break }
            if isHiddenFile(current, workspace: workspace) { return true }
        }
        return false
    }

    /// The hidden paths a sandbox must cover for `workspace`: those that hold it (`holdingWorkspace`: everything in
    /// them but the workspace is hidden, so they are covered before the workspace is made visible again) and the
    /// others.
    public func split(for workspace: String) -> (holdingWorkspace: [String], others: [String]) {
        (paths.filter { Self.isWithin(workspace, $0) }, paths.filter { !Self.isWithin(workspace, $0) })
    }

    static func isWithin(_ path: String, _ folder: String) -> Bool {
        folder == "/" || path == folder || path.hasPrefix(folder + "/")
    }

    private static func trimmed(_ path: String) -> String {
        var path = path
        while path.count > 1, path.hasSuffix("/") { path.removeLast() }
        return path
    }

    // MARK: - This run's

    private static let configured = Mutex<HiddenPaths?>(nil)

    /// The paths hidden in this run: set once at start from the options (`configure`); before that, the standard
    /// list for $HOME.
    public static var current: HiddenPaths {
        configured.withLock { $0 } ?? standard(home: homeFromEnvironment(), extra: [], macOS: isMacOS)
    }

    /// Sets this run's hidden paths: the standard list for $HOME and this system, plus `extra`.
    public static func configure(extra: [String], current: String) {
        let paths = standard(home: homeFromEnvironment(), extra: extra, macOS: isMacOS, current: current)
        configured.withLock { $0 = paths }
    }

    static var isMacOS: Bool {
        #if os(macOS)
        true
        #else
        false
        #endif
    }

    private static func homeFromEnvironment() -> String? {
        getenv("HOME").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
    }
}

/// A file's device and inode: the same file under any name.
public struct FileIdentity: Sendable, Hashable {
    public let device: UInt64
    public let inode: UInt64

    /// Of what is at `path` itself (a symlink is itself); nil when nothing is.
    init?(of path: String) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    /// Of what `path` leads to, links followed (a symlinked ~/.ssh: the folder it names).
    init?(following path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }
}
