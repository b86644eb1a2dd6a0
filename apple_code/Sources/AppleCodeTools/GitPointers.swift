#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The repositories under a workspace and the parts of their git folders that git reads as configuration or as a
/// pointer elsewhere. git reads them later, outside any sandbox (the owner's `git status`): a `commondir` pointing
/// at a folder whose `config` sets `core.fsmonitor` runs that program, and nothing shows as changed. bwrap binds
/// the ones that exist read-only (`Bubblewrap.gitProtection`) and, since it cannot keep a missing file from being
/// made, `created(since:)` finds those a command made and they are removed; the Seatbelt profile denies them by
/// pattern; the file tools refuse them (`GitInternals`).
struct GitPointers: Sendable, Equatable {
    /// What git reads in a git folder as configuration, code or a pointer elsewhere.
    static let protectedNames = ["config", "config.worktree", "commondir", "gitdir", "hooks", "info"]
    /// Of those, the files whose mere creation redirects git (so one a command made is removed again).
    static let pointerFiles = ["commondir", "config.worktree", "gitdir"]
    /// How far the search for repositories goes: folders deep, and folders looked at in all.
    static let maxDepth = 8
    static let maxFolders = 5000

    /// `.git` folders (each a repository's) under the workspace, the workspace's own first.
    var gitFolders: [String] = []
    /// `.git` files (a worktree's or submodule's pointer to its git folder) under the workspace.
    var gitFiles: [String] = []
    /// Every git folder to protect: the `.git` folders and those of their submodules and worktrees.
    var allGitFolders: [String] = []

    /// Finds them under `workspace` (a real path), never following symlinks.
    static func find(in workspace: String, host: HostFiles) -> GitPointers {
        var found = GitPointers()
        var queue: [(String, Int)] = [(workspace == "/" ? "" : workspace, 0)]
        var looked = 0
        while !queue.isEmpty, looked < maxFolders {
            let (folder, depth) = queue.removeFirst()
            looked += 1
            let git = folder + "/.git"
            switch host.kind(git) {
            case .directory: found.gitFolders.append(git)
            case .file: found.gitFiles.append(git)
            default: break
            }
            guard depth < maxDepth else { continue }
            for name in host.entries(folder.isEmpty ? "/" : folder).sorted() where name != ".git" {
                let path = folder + "/" + name
                if host.kind(path) == .directory { queue.append((path, depth + 1)) }
            }
        }
        for git in found.gitFolders {
            found.allGitFolders += [git] + nestedGitFolders(of: git, host: host)
        }
        return found
    }

    /// The git folders of submodules (`modules/<name>`, where a name may hold slashes, so at any depth; one is
    /// recognised by its `HEAD` or `config`) and worktrees (`worktrees/<name>`) inside a git folder, and theirs in turn (at most
    /// 256, 16 folders deep).
    static func nestedGitFolders(of git: String, host: HostFiles) -> [String] {
        // A git folder's own folders that hold no git folder of a name's part.
        let internals: Set<String> = ["objects", "refs", "logs", "hooks", "info", "lfs", "rr-cache", "modules",
                                      "worktrees"]
        var found: [String] = []
        var queue: [(String, Int)] = [(git + "/modules", 0), (git + "/worktrees", 0)]
        var looked = 0
        while !queue.isEmpty, found.count < 256, looked < 4096 {
            let (folder, depth) = queue.removeFirst()
            looked += 1
            guard depth < 16, host.kind(folder) == .directory else { continue }
            for name in host.entries(folder).sorted() where !internals.contains(name) {
                let nested = folder + "/" + name
                guard host.kind(nested) == .directory else { continue }
                if host.kind(nested + "/HEAD") == .file || host.kind(nested + "/config") == .file {
                    found.append(nested)
                    queue += [(nested + "/modules", depth + 1), (nested + "/worktrees", depth + 1)]
                }
                queue.append((nested, depth + 1))  // a name like `libs/a`: `libs` may be a git folder itself
            }
        }
        return found
    }

    /// The pointer files that do not exist now in any git folder: watched, because a command may make them.
    func missingPointers(host: HostFiles) -> [String] {
        allGitFolders.flatMap { folder in Self.pointerFiles.map { folder + "/" + $0 } }
            .filter { host.kind($0) == .missing }
    }

    /// Of `missing` (taken before a command), those that exist now.
    static func created(since missing: [String], host: HostFiles) -> [String] {
        missing.filter { host.kind($0) != .missing }
    }

    /// Removes what a command made at those paths (a file, or a folder and what it holds, never following a
    /// symlink), and says what it did, for the command's result.
    static func removeCreated(_ paths: [String], workspace: String) -> String? {
        guard !paths.isEmpty else { return nil }
        for path in paths { removeTree(path) }
        let shown = paths.map { path in
            path.hasPrefix(workspace + "/") ? String(path.dropFirst(workspace.count + 1)) : path
        }
        return "Note: removed \(shown.joined(separator: ", ")), which this command created: git reads such a file "
            + "as a pointer to another repository or its config, later and outside the sandbox, so commands may not "
            + "make one. If it is needed, tell the user."
    }

    private static func removeTree(_ path: String) {
        if Workspace.fileKind(path) == .directory {
            for name in (try? directoryEntries(path)) ?? [] { removeTree(path + "/" + name) }
            rmdir(path)
        } else {
            unlink(path)
        }
    }

    private static func directoryEntries(_ path: String) throws -> [String] {
        guard let directory = opendir(path) else { return [] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
