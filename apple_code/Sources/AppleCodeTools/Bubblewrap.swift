#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

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
    /// - `hooksFolder`: the folder `core.hooksPath` names inside the workspace, read-only like `.git/hooks`.
    /// - `hidden`: the owner's secrets, each covered by an empty read-only folder or file (`hiddenPaths`).
    /// - `--cap-drop ALL`: no capabilities, whoever runs apple-code. Run by root, bwrap would otherwise hand the
    ///   command every capability, and with them `umount` of what covers a hidden path and a read-write remount
    ///   of the host. `userNamespace` (root, where the kernel allows it): a user namespace of its own as well, so
    ///   the bounding set is empty too and no capability of the host's namespace is left to regain.
    static func arguments(executable: String, workspace: String, host: HostFiles, hooksFolder: String? = nil,
                          hidden: HiddenPaths = HiddenPaths(paths: []), userNamespace: Bool = false) -> [String] {
        var arguments = [executable, "--ro-bind", "/", "/", "--tmpfs", "/tmp"]
        if host.kind("/run") == .directory {
            arguments += ["--tmpfs", "/run", "--ro-bind-try", "/run/current-system", "/run/current-system"]
            // Programs expect $XDG_RUNTIME_DIR to exist; this one is empty and private to the command.
            if let runtime = host.runtimeDirectory, runtime.hasPrefix("/run/"), !runtime.contains("/../") {
                arguments += ["--dir", runtime]
            }
        }
        if host.kind("/var/run") == .directory { arguments += ["--tmpfs", "/var/run"] }
        let (holding, all) = hidden.split(for: workspace)
        // What a covered folder holds is covered with it (and a mount point inside it could not be made).
        let others = all.filter { path in
            !all.contains { $0 != path && HiddenPaths.isWithin(path, $0) }
                && !holding.contains { HiddenPaths.isWithin(path, $0) && !HiddenPaths.isWithin(path, workspace) }
        }
        // A hidden folder that holds the workspace is emptied first; the workspace is bound back inside it.
        arguments += hiddenPaths(holding, workspace: workspace, host: host, holding: true)
        arguments += ["--bind", workspace, workspace]
        // Before anything mounted inside them: a bind of a folder over itself covers what was mounted below it.
        arguments += renameLocks(others, workspace: workspace, host: host)
        arguments += gitProtection(workspace: workspace, host: host)
        if let hooksFolder {
            switch host.kind(hooksFolder) {
            case .directory, .file: arguments += ["--ro-bind", hooksFolder, hooksFolder]
            // Not there yet: an empty read-only folder (left behind empty), so a command cannot make it.
            case .missing: arguments += ["--tmpfs", hooksFolder, "--remount-ro", hooksFolder]
            default: break
            }
        }
        arguments += hiddenPaths(others, workspace: workspace, host: host)
        arguments += ["--dev", "/dev", "--proc", "/proc"] + (userNamespace ? ["--unshare-user"] : [])
            + ["--unshare-net", "--unshare-pid", "--as-pid-1", "--cap-drop", "ALL", "--new-session",
               "--die-with-parent", "--setenv", "TMPDIR", "/tmp"] + cacheEnvironment + ["--chdir", workspace]
        return arguments
    }
}

extension Bubblewrap {
    /// A writable cache folder in the command's private /tmp: the home folder's ~/.cache is read-only, and without
    /// one `swift build` fails (clang cannot write its module cache: "could not build C module 'SwiftShims'"), as
    /// would pip and others. XDG_CACHE_HOME is where SwiftPM, pip and most tools on Linux keep theirs;
    /// CLANG_MODULE_CACHE_PATH is clang's (swiftc's C modules). They vanish with the command, like /tmp.
    static let cacheEnvironment = ["--setenv", "XDG_CACHE_HOME", "/tmp/.cache",
                                   "--setenv", "CLANG_MODULE_CACHE_PATH", "/tmp/.cache/clang/ModuleCache"]

    /// An empty read-only folder over each hidden folder, /dev/null over each hidden file (read: nothing). A
    /// missing path needs nothing (the rest of the file system is read-only: a command cannot make it), nor does
    /// a symlink (its real path is in the list too), nor anything under the private /tmp and /run outside the
    /// workspace (the command sees none of the host's there). A folder that holds the workspace stays writable
    /// (writes there vanish with the command): the workspace is bound into it afterwards, which needs its mount point.
    static func hiddenPaths(_ paths: [String], workspace: String, host: HostFiles, holding: Bool = false)
        -> [String] {
        var arguments: [String] = []
        for path in paths {
            let private_ = ["/tmp", "/run", "/var/run"].contains { HiddenPaths.isWithin(path, $0) }
            if private_, !HiddenPaths.isWithin(path, workspace), !HiddenPaths.isWithin(workspace, path) { continue }
            switch host.kind(path) {
            case .directory: arguments += ["--tmpfs", path] + (holding ? [] : ["--remount-ro", path])
            case .missing, .symlink: break
            default: arguments += ["--ro-bind", "/dev/null", path]
            }
        }
        return arguments
    }

    /// `--bind F F` for each folder between the workspace and an existing hidden path inside it (`foldersBetween`).
    static func renameLocks(_ paths: [String], workspace: String, host: HostFiles) -> [String] {
        var arguments: [String] = []
        var bound: Set<String> = []
        for path in paths where host.kind(path) != .missing {
            for folder in foldersBetween(workspace, path, host: host) where bound.insert(folder).inserted {
                arguments += ["--bind", folder, folder]
            }
        }
        return arguments
    }

    /// The folders strictly between the workspace and a hidden path inside it, outermost first. Each is bound over
    /// itself: a mount point cannot be renamed (EBUSY), so `mv sub sub2` cannot carry `sub/secret.txt` out from
    /// under its cover to where the next command would find it uncovered.
    static func foldersBetween(_ workspace: String, _ path: String, host: HostFiles) -> [String] {
        guard workspace != "/", workspace != path, HiddenPaths.isWithin(path, workspace) else { return [] }
        let prefix = workspace == "/" ? "" : workspace
        var folders: [String] = []
        var current = prefix
        for name in path.dropFirst(prefix.count).split(separator: "/").dropLast() {
            current += "/" + name
            guard host.kind(current) == .directory else { break }
            folders.append(current)
        }
        return folders
    }

    /// git runs .git/hooks, and what .git/config names, later and outside any sandbox, and follows `commondir`
    /// and `gitdir` pointers to other git folders, whose config it then reads: so in every repository under the
    /// workspace (`GitPointers`) these are bound read-only over themselves (`GitPointers.protectedNames`: config,
    /// config.worktree, commondir, gitdir, hooks, info), in its submodules' and worktrees' git folders too. A
    /// repository without hooks gets an empty read-only folder (left behind empty). Each `.git` folder is bound over
    /// itself: a mount point cannot be renamed or removed, so a command cannot swap in a repository of its own. A
    /// `.git` file (a worktree's or submodule's pointer) is read-only. What does not exist cannot be bound: a
    /// pointer file a command makes is removed after it (`GitPointers.created`); a workspace with no `.git` can
    /// get one.
    static func gitProtection(workspace: String, host: HostFiles) -> [String] {
        gitProtection(GitPointers.find(in: workspace, host: host), host: host)
    }

    static func gitProtection(_ repositories: GitPointers, host: HostFiles) -> [String] {
        var arguments: [String] = []
        for git in repositories.gitFolders { arguments += ["--bind", git, git] }
        for folder in repositories.allGitFolders {
            for name in GitPointers.protectedNames {
                let path = folder + "/" + name
                switch host.kind(path) {
                case .file, .directory: arguments += ["--ro-bind", path, path]
                case .missing where name == "hooks" && repositories.gitFolders.contains(folder):
                    arguments += ["--tmpfs", path, "--remount-ro", path]
                default: break
                }
            }
        }
        for file in repositories.gitFiles { arguments += ["--ro-bind", file, file] }
        return arguments
    }
}

/// What the sandbox's arguments depend on in the host's file system.
struct HostFiles: Sendable {
    /// What is at a path, without following a final symlink.
    var kind: @Sendable (String) -> Workspace.FileKind
    /// The names in a folder.
    var entries: @Sendable (String) -> [String]
    /// $XDG_RUNTIME_DIR.
    var runtimeDirectory: String?

    static var live: HostFiles {
        HostFiles(kind: { Workspace.fileKind($0) },
                  entries: { (try? FileManager.default.contentsOfDirectory(atPath: $0)) ?? [] },
                  runtimeDirectory: getenv("XDG_RUNTIME_DIR").map { String(cString: $0) })
    }
}
