#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A tool failure: the text (without the `Error:` prefix) goes back to the model; the run goes on.
struct ToolFailure: Error, Sendable, Equatable {
    let message: String
    init(_ message: String) { self.message = message }
}

/// The workspace every file tool and command is confined to (contract: Tools, Confinement).
///
/// A path is resolved to its real path, symlinks followed (for a path that does not exist yet: its deepest
/// existing parent), and must stay inside the workspace's real path. Comparing real paths is what stops
/// `ln -s / ws/escape` and macOS's `/tmp` -> `/private/tmp`; lexical normalisation would not.
public struct Workspace: Sendable, Equatable {
    /// The real path of the workspace (no symlinks, no trailing slash unless it is `/`).
    public let root: String
    /// The owner's secrets: refused by every file tool, skipped by listings and searches (`HiddenPaths`).
    public let hidden: HiddenPaths

    /// Longest path text accepted from the model; real paths are bounded by PATH_MAX anyway.
    static let maxPathBytes = 1024
    /// Longest single path component most file systems accept.
    static let maxComponentBytes = 255

    public init(_ path: String, hidden: HiddenPaths = .current) throws {
        guard let real = Self.realPath(path) else {
            throw ToolFailure("the workspace \(path) does not exist or cannot be resolved")
        }
        guard Self.fileKind(real) == .directory else { throw ToolFailure("the workspace \(path) is not a folder") }
        root = real
        self.hidden = hidden
    }

    /// A path inside the workspace: its real path and the workspace-relative form shown to the model.
    public struct Resolved: Sendable, Equatable {
        public let absolute: String
        /// Relative to the workspace root; `.` for the root itself.
        public let relative: String
        /// What is at the path now (`.missing` for a file about to be created).
        public let kind: FileKind
    }

    /// Resolves `path` (relative to the workspace, or absolute) to a real path inside the workspace, or throws
    /// a `ToolFailure` that says why not. Never touches anything outside the workspace beyond resolving names.
    public func resolve(_ path: String) throws -> Resolved {
        try Self.checkText(path)
        let joined = path.hasPrefix("/") ? path : (root == "/" ? "/" : root + "/") + path
        let real = try Self.resolveAllowingMissingTail(joined, shown: path)
        guard contains(real) else {
            throw ToolFailure("\(path) is outside the workspace; only paths inside \(root) are allowed")
        }
        if hidden.hidesAnyPart(of: real, workspace: root) {
            throw ToolFailure("\(path) is hidden: it holds the owner's secrets, which no tool or command may read. "
                              + "Do without it, or tell the user what you need from it")
        }
        return Resolved(absolute: real, relative: relative(real), kind: Self.fileKind(real))
    }

    /// Whether a real path inside the workspace is one of the hidden paths (or inside one).
    public func isHidden(_ realPath: String) -> Bool { hidden.hides(realPath, workspace: root) }

    /// Whether a real path lies inside (or is) the workspace root.
    public func contains(_ realPath: String) -> Bool {
        root == "/" || realPath == root || realPath.hasPrefix(root + "/")
    }

    /// The workspace-relative form of a real path inside the workspace.
    public func relative(_ realPath: String) -> String {
        if realPath == root { return "." }
        let prefix = root == "/" ? "/" : root + "/"
        return realPath.hasPrefix(prefix) ? String(realPath.dropFirst(prefix.count)) : realPath
    }

    // MARK: - Checks on the text of a path

    static func checkText(_ path: String) throws {
        if path.isEmpty { throw ToolFailure("the path is empty") }
        if path.utf8.contains(0) { throw ToolFailure("the path contains a NUL character") }
        if path.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D }) {
            throw ToolFailure("the path contains a line break")
        }
        if path.utf8.count > maxPathBytes {
            throw ToolFailure("the path is too long (\(path.utf8.count) bytes; at most \(maxPathBytes))")
        }
        if path.split(separator: "/").contains(where: { $0.utf8.count > maxComponentBytes }) {
            throw ToolFailure("a name in the path is longer than \(maxComponentBytes) bytes")
        }
    }

    // MARK: - Resolution

    /// The real path of `path` if it exists; if not, the real path of its deepest existing parent followed by
    /// the missing names (which may not contain `..`, and whose first name may not be a dangling symlink).
    static func resolveAllowingMissingTail(_ path: String, shown: String) throws -> String {
        errno = 0
        if let real = realPath(path) { return real }
        try explain(errno, shown: shown)
        var parent = Substring(path)
        var missing: [Substring] = []
        while true {
            guard let slash = parent.lastIndex(of: "/") else { throw ToolFailure("cannot resolve \(shown)") }
            let name = parent[parent.index(after: slash)...]
            if !name.isEmpty { missing.insert(name, at: 0) }
            parent = parent[..<slash]
            let parentText = parent.isEmpty ? "/" : String(parent)
            errno = 0
            if let realParent = realPath(parentText) {
                return try append(missing, to: realParent, shown: shown)
            }
            try explain(errno, shown: shown)
        }
    }

    private static func append(_ missing: [Substring], to realParent: String, shown: String) throws -> String {
        guard fileKind(realParent) == .directory else { throw ToolFailure("\(shown): a parent is not a folder") }
        var result = realParent
        for name in missing where name != "." {
            if name == ".." { throw ToolFailure("\(shown): '..' after a folder that does not exist") }
            result = (result == "/" ? "/" : result + "/") + name
        }
        // realpath failed, so the first missing name is absent or a symlink to nowhere; writing through a
        // dangling symlink would create its target wherever it points.
        if let first = missing.first(where: { $0 != "." }) {
            let candidate = (realParent == "/" ? "/" : realParent + "/") + first
            if fileKind(candidate) == .symlink {
                throw ToolFailure("\(shown) goes through a symlink whose target does not exist")
            }
        }
        return result
    }

    /// Turns a resolution error other than "does not exist" into a clear failure.
    private static func explain(_ code: Int32, shown: String) throws {
        switch code {
        case 0, ENOENT: return
        case ENOTDIR: throw ToolFailure("\(shown): a parent is not a folder")
        case ELOOP: throw ToolFailure("\(shown): too many levels of symlinks")
        case EACCES: throw ToolFailure("\(shown): permission denied")
        case ENAMETOOLONG: throw ToolFailure("\(shown): the path is too long")
        default: throw ToolFailure("\(shown): cannot resolve (\(String(cString: strerror(code))))")
        }
    }

    static func realPath(_ path: String) -> String? {
        guard let pointer = realpath(path, nil) else { return nil }
        defer { free(pointer) }
        return String(cString: pointer)
    }

    // MARK: - Kinds

    public enum FileKind: Sendable, Equatable {
        case missing, file, directory, symlink, fifo, device, socket, other
    }

    /// What is at `path`, without following a final symlink.
    static func fileKind(_ path: String) -> FileKind {
        var info = stat()
        guard lstat(path, &info) == 0 else { return .missing }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return .file
        case S_IFDIR: return .directory
        case S_IFLNK: return .symlink
        case S_IFIFO: return .fifo
        case S_IFCHR, S_IFBLK: return .device
        case S_IFSOCK: return .socket
        default: return .other
        }
    }

    /// Size in bytes of a file (0 when it cannot be read).
    static func fileSize(_ path: String) -> Int {
        var info = stat()
        guard lstat(path, &info) == 0 else { return 0 }
        return Int(info.st_size)
    }
}

extension Workspace {
    /// Names shown at most when a path is missing.
    static let missingHintNames = 20

    /// Throws unless `target` is an existing regular file; when it is missing, the failure names what the nearest
    /// existing folder holds, so a model that guessed a name (small ones do: `input.txt`, `path/to/file`) sees
    /// the real ones in the same result.
    func requireFile(_ target: Resolved) throws {
        guard target.kind == .missing else { return try target.requireFile() }
        throw ToolFailure("\(target.relative) does not exist. " + nearest(target.absolute))
    }

    /// "FOLDER holds: a.py, b/, ..." for the deepest existing folder above `absolute` (inside the workspace),
    /// hidden and skipped names left out.
    func nearest(_ absolute: String) -> String {
        var folder = absolute
        repeat {
            folder = folder.lastIndex(of: "/").map { $0 == folder.startIndex ? "/" : String(folder[..<$0]) } ?? root
        } while folder != root && contains(folder) && Self.fileKind(folder) != .directory
        if !contains(folder) { folder = root }
        var shown: [String] = []
        var total = 0
        _ = TreeWalker(workspace: self, recursive: false).walk(folder) { entry in
            total += 1
            if shown.count < Self.missingHintNames {
                shown.append(entry.name + (entry.kind == .directory ? "/" : ""))
            }
            return total <= 1000
        }
        let place = relative(folder)
        if shown.isEmpty { return "\(place) is empty." }
        let more = total > shown.count ? ", and \(total - shown.count) more" : ""
        return "\(place == "." ? "The workspace" : place) holds: " + shown.joined(separator: ", ") + more + "."
    }
}

extension Workspace.Resolved {
    /// Throws unless this is an existing regular file (FIFOs and devices would block or never end).
    func requireFile() throws {
        switch kind {
        case .file: return
        case .missing: throw ToolFailure("\(relative) does not exist")
        case .directory: throw ToolFailure("\(relative) is a folder, not a file (use listDirectory)")
        default: throw ToolFailure("\(relative) is not a regular file (\(kind.label)); refused")
        }
    }

    /// Throws unless this is an existing folder.
    func requireDirectory() throws {
        switch kind {
        case .directory: return
        case .missing: throw ToolFailure("\(relative) does not exist")
        case .file: throw ToolFailure("\(relative) is a file, not a folder (use readFile)")
        default: throw ToolFailure("\(relative) is not a folder (\(kind.label)); refused")
        }
    }
}

extension Workspace.FileKind {
    var label: String {
        switch self {
        case .missing: "missing"
        case .file: "file"
        case .directory: "folder"
        case .symlink: "symlink"
        case .fifo: "FIFO"
        case .device: "device"
        case .socket: "socket"
        case .other: "special file"
        }
    }
}
