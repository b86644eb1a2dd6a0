#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// What the file tools must not write because git runs it later, outside any sandbox: a repository's hooks, info
/// and config, and its pointers to other git folders (`commondir`, `gitdir`), also those of submodules and
/// worktrees under `.git/modules`, `.git/worktrees` at any depth (`GitPointers.protectedNames`), a `.git` file (it
/// points git at a repository whose hooks then run), and the folder `core.hooksPath` names when that is inside
/// the workspace. Commands are kept from them by the sandbox (Bubblewrap, SeatbeltProfile); this is the same
/// rule for writeFile and editFile.
enum GitInternals {
    /// Throws a failure saying why when `target` (a resolved real path) is one of those.
    static func refuseWrite(to target: Workspace.Resolved, in workspace: Workspace) throws {
        if isRepositoryInternal(target.absolute) {
            throw ToolFailure("\(target.relative) is refused: git runs a repository's hooks, and programs its "
                + "config names, later and outside the sandbox, and follows its pointers to other repositories, so "
                + "the file tools do not write .git/hooks, .git/info, .git/config, .git/commondir, a gitdir file or "
                + "a .git file. If the change is needed, tell the user what to change.")
        }
        if let hooks = hooksFolder(for: workspace), target.absolute == hooks || target.absolute.hasPrefix(hooks + "/") {
            throw ToolFailure("\(target.relative) is refused: it is in \(workspace.relative(hooks)), the folder "
                + "core.hooksPath names, and git runs the hooks there later, outside the sandbox. If the change is "
                + "needed, tell the user what to change.")
        }
    }

    /// Whether an absolute path is a `.git` itself, or one of `GitPointers.protectedNames` (or inside one) in a git
    /// folder. Names are compared without case: macOS's usual file system does not tell `.GIT/Hooks` from
    /// `.git/hooks`.
    static func isRepositoryInternal(_ path: String) -> Bool {
        let names = path.split(separator: "/").map { $0.lowercased() }
        let protected = Set(GitPointers.protectedNames)
        for (index, name) in names.enumerated() where name == ".git" {
            let rest = names[(index + 1)...]
            guard let first = rest.first else { return true }
            if protected.contains(first) { return true }
            // Submodule names may hold slashes, so anything named like a hook or config below these counts.
            if first == "modules" || first == "worktrees", rest.dropFirst(2).contains(where: protected.contains) {
                return true
            }
        }
        return false
    }

    // MARK: - core.hooksPath

    /// `hooksFolder(for:)` for a workspace given as its real path (the command sandbox's); nil when it is no folder.
    static func hooksFolder(root: String) -> String? {
        (try? Workspace(root)).flatMap(hooksFolder(for:))
    }

    /// The real path of the folder `core.hooksPath` names for the repository holding the workspace, when set and
    /// inside the workspace. Read from the repository's config (and a worktree's) over the user's global ones,
    /// as git does; a relative value is relative to the repository's top folder.
    static func hooksFolder(for workspace: Workspace) -> String? {
        let home = getenv("HOME").map { String(cString: $0) }
        var configs: [String] = []
        if let home {
            let xdg = getenv("XDG_CONFIG_HOME").map { String(cString: $0) } ?? home + "/.config"
            configs += [xdg + "/git/config", home + "/.gitconfig"]
        }
        let repository = enclosingRepository(of: workspace.root)
        if let repository {
            configs += repository.configs
        }
        guard let value = configs.compactMap({ readSmallFile($0).flatMap(hooksPath(inConfig:)) }).last,
              !value.isEmpty else { return nil }
        let joined: String
        if value.hasPrefix("/") {
            joined = value
        } else if value == "~" || value.hasPrefix("~/") {
            guard let home else { return nil }
            joined = home + value.dropFirst()
        } else {
            guard let repository else { return nil }
            joined = (repository.top == "/" ? "" : repository.top) + "/" + value
        }
        guard let real = try? Workspace.resolveAllowingMissingTail(joined, shown: value),
              workspace.contains(real) else { return nil }
        return real
    }

    /// The top folder of the repository at or above `folder`, and its config files in the order git reads them.
    static func enclosingRepository(of folder: String) -> (top: String, configs: [String])? {
        var current = folder
        while true {
            let git = (current == "/" ? "" : current) + "/.git"
            switch Workspace.fileKind(git) {
            case .directory:
                return (current, [git + "/config", git + "/config.worktree"])
            case .file:
                // A worktree or submodule: `gitdir: <path>`; a worktree's shared config is in its commondir.
                guard let pointer = readSmallFile(git), pointer.hasPrefix("gitdir:") else { return nil }
                var gitdir = pointer.dropFirst("gitdir:".count).trimmingCharacters(in: .whitespacesAndNewlines)
                if !gitdir.hasPrefix("/") { gitdir = current + "/" + gitdir }
                var configs: [String] = []
                if let common = readSmallFile(gitdir + "/commondir")?.trimmingCharacters(in: .whitespacesAndNewlines),
                   !common.isEmpty {
                    configs.append((common.hasPrefix("/") ? common : gitdir + "/" + common) + "/config")
                }
                return (current, configs + [gitdir + "/config", gitdir + "/config.worktree"])
            default:
                guard current != "/", let slash = current.lastIndex(of: "/") else { return nil }
                current = slash == current.startIndex ? "/" : String(current[..<slash])
            }
        }
    }

    /// The last `core.hooksPath` in a git config text (git's format: `[section]` or `[section "sub"]`, keys
    /// without case, `#`/`;` comments, double-quoted values); nil when it sets none.
    static func hooksPath(inConfig text: String) -> String? {
        var inCore = false
        var found: String?
        for rawLine in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            var line = Substring(rawLine.drop(while: { $0 == " " || $0 == "\t" }))
            if line.first == "[" {
                guard let close = line.firstIndex(of: "]") else { inCore = false; continue }
                let header = line[line.index(after: line.startIndex)..<close]
                    .trimmingCharacters(in: .whitespaces).lowercased()
                inCore = header == "core"
                line = line[line.index(after: close)...].drop(while: { $0 == " " || $0 == "\t" })
            }
            guard inCore, let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            guard key == "hookspath" else { continue }
            found = configValue(line[line.index(after: equals)...])
        }
        return found
    }

    /// A config value: quotes removed, `\"`, `\\`, `\t`, `\n` unescaped, a comment outside quotes dropped.
    private static func configValue(_ raw: Substring) -> String {
        var value = ""
        var quoted = false
        var escaped = false
        for character in raw {
            if escaped {
                switch character {
                case "t": value.append("\t")
                case "n": value.append("\n")
                default: value.append(character)
                }
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "\"" {
                quoted.toggle()
            } else if !quoted, character == "#" || character == ";" {
                break
            } else {
                value.append(character)
            }
        }
        return value.trimmingCharacters(in: .whitespaces)
    }

    /// A regular file of at most 64 KB as text, else nil.
    private static func readSmallFile(_ path: String) -> String? {
        // Followed when a symlink: a ~/.gitconfig kept with one's dotfiles usually is.
        guard let real = Workspace.realPath(path), Workspace.fileKind(real) == .file,
              let fd = try? FileIO.openForReading(real, shown: path) else { return nil }
        defer { close(fd) }
        guard let bytes = try? FileIO.readAll(fd: fd, limit: 64 << 10) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}
