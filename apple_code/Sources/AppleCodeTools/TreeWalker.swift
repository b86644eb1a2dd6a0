#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Walks a folder inside the workspace for listDirectory, searchFiles and searchContent: depth-first in name
/// order, never following a symlink (so a walk cannot leave the workspace), skipping tool and dependency
/// folders, and bounded in the number of entries it visits.
struct TreeWalker {
    /// Folders nobody wants listed or searched: version control, dependencies, build output, caches.
    static let skippedNames: Set<String> = [
        ".git", ".hg", ".svn", "node_modules", ".build", ".swiftpm", "DerivedData", "__pycache__", ".venv",
        "venv", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".gradle", ".idea",
    ]
    /// Entries visited at most per walk, so a huge tree costs bounded time.
    static let maxVisits = 20_000

    struct Entry {
        let absolute: String
        /// Workspace-relative path.
        let relative: String
        let name: String
        let kind: Workspace.FileKind
    }

    struct Stats {
        var visited = 0
        var skipped: Set<String> = []
        /// True when the walk stopped at `maxVisits`.
        var capped = false

        /// Notes for a result: where the walk stopped early and, if wanted, which folders it skipped.
        func notes(namingSkipped: Bool) -> [String] {
            var notes: [String] = []
            if capped { notes.append("stopped after \(TreeWalker.maxVisits) entries") }
            if namingSkipped, !skipped.isEmpty { notes.append("skipped " + skipped.sorted().joined(separator: ", ")) }
            return notes
        }
    }

    let workspace: Workspace
    let recursive: Bool

    /// Visits the entries under `folder` (a resolved real path) until `visit` returns false.
    func walk(_ folder: String, visit: (Entry) -> Bool) -> Stats {
        var stats = Stats()
        var stack: [String] = [folder]
        var keepGoing = true
        while keepGoing, let current = stack.popLast() {
            var subfolders: [String] = []
            for name in Self.names(in: current) {
                if Self.skippedNames.contains(name) {
                    stats.skipped.insert(name)
                    continue
                }
                let absolute = (current == "/" ? "/" : current + "/") + name
                if workspace.isHidden(absolute) {  // the owner's secrets: not even named
                    continue
                }
                if stats.visited >= Self.maxVisits {
                    stats.capped = true
                    keepGoing = false
                    break
                }
                stats.visited += 1
                let entry = Entry(absolute: absolute, relative: workspace.relative(absolute), name: name,
                                  kind: Workspace.fileKind(absolute))
                if !visit(entry) {
                    keepGoing = false
                    break
                }
                if recursive, entry.kind == .directory { subfolders.append(absolute) }
            }
            // Depth-first in name order: the stack pops the first subfolder next.
            stack.append(contentsOf: subfolders.reversed())
        }
        return stats
    }

    /// The names in a folder, sorted, without `.` and `..`; empty when it cannot be read.
    static func names(in folder: String) -> [String] {
        guard let dir = opendir(folder) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
            }
            if name != ".", name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// The target text of a symlink (shown, never followed).
    static func linkTarget(_ path: String) -> String {
        var buffer = [CChar](repeating: 0, count: 4097)
        let count = readlink(path, &buffer, 4096)
        guard count >= 0 else { return "?" }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Shell-style globs (`*`, `?`, `[...]`, and `{a,b}` as in shells) for searchFiles and searchContent's
/// filePattern. A pattern without a slash matches the name; with a slash, the path below the searched folder,
/// where `**/` may also match nothing.
struct Glob: Sendable {
    /// The pattern as given (shown in results).
    let pattern: String
    /// The fnmatch patterns it stands for after brace expansion.
    let alternatives: [String]

    init(_ pattern: String) {
        var text = pattern
        while text.hasPrefix("./") { text.removeFirst(2) }
        self.pattern = text.isEmpty ? "*" : text
        alternatives = Self.expandBraces(self.pattern)
    }

    func matches(name: String, pathBelowRoot: String) -> Bool {
        alternatives.contains { Self.matches($0, name: name, pathBelowRoot: pathBelowRoot) }
    }

    private static func matches(_ pattern: String, name: String, pathBelowRoot: String) -> Bool {
        guard pattern.contains("/") else { return fnmatch(pattern, name, 0) == 0 }
        if fnmatch(pattern, pathBelowRoot, 0) == 0 { return true }
        return pattern.contains("**/") && fnmatch(pattern.replacing("**/", with: ""), pathBelowRoot, 0) == 0
    }

    /// `*.{js,ts}` -> `*.js`, `*.ts`; groups expand left to right, nested groups are left as written.
    /// At most `limit` alternatives, reached without building more, so no pattern can blow up.
    static func expandBraces(_ pattern: String, limit: Int = 64) -> [String] {
        guard let open = pattern.firstIndex(of: "{"),
              let close = pattern[open...].firstIndex(of: "}"),
              !pattern[pattern.index(after: open)..<close].contains("{") else { return [pattern] }
        let options = pattern[pattern.index(after: open)..<close].split(separator: ",", omittingEmptySubsequences: false)
        guard options.count > 1 else { return [pattern] }
        let head = pattern[..<open]
        let tails = expandBraces(String(pattern[pattern.index(after: close)...]), limit: limit)
        var alternatives: [String] = []
        for option in options {
            for tail in tails {
                alternatives.append(head + option + tail)
                if alternatives.count == limit { return alternatives }
            }
        }
        return alternatives
    }
}
