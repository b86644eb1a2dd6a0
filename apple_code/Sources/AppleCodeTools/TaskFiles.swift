#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import AppleCodeCore

/// The files a task names, shown with it: "Fix the bug in calc.py" goes to the model with calc.py's text below
/// it, the way a person would paste it. Small models asked about a file otherwise answer without opening it, or
/// run the check again instead of reading the code it names; shown the code, they answer with its fix. Only
/// whole text files that the file tools would read (inside the workspace, not hidden, not binary) and that fit
/// what is left of `tokens`, at most `maxFiles`, in the order the task names them.
public enum TaskFiles {
    public static let maxFiles = 3

    /// The text to put after the task and the files it shows (workspace-relative), or nil when it names no such
    /// file.
    public static func shown(task: String, in root: Workspace, tokens: Int) -> (text: String, paths: [String])? {
        var left = tokens
        var parts: [String] = []
        var paths: [String] = []
        var seen: Set<String> = []
        for name in FileMentions.names(in: task) where parts.count < maxFiles {
            guard let target = try? root.resolve(name), target.kind == .file, seen.insert(target.absolute).inserted,
                  let text = whole(target, in: root) else { continue }
            let part = "\(target.relative):\n```\n\(text)\n```"
            let cost = TokenEstimator.estimate(part)
            guard cost <= left else { continue }
            left -= cost
            parts.append(part)
            paths.append(target.relative)
        }
        return parts.isEmpty ? nil : (parts.joined(separator: "\n\n"), paths)
    }

    /// The file's text without its final newline; nil for a binary file or one past 64 KiB (never shown whole).
    private static func whole(_ target: Workspace.Resolved, in workspace: Workspace) -> String? {
        guard let fd = try? FileIO.openText(target, in: workspace) else { return nil }
        defer { close(fd) }
        var lines: [String] = []
        var bytes = 0
        guard let scan = try? FileIO.scanLines(fd: fd, countAll: false, visit: { _, text, cut in
            bytes += text.utf8.count + 1
            guard !cut, bytes <= 64 * 1024 else { return false }
            lines.append(text)
            return true
        }), scan.complete, lines.count == scan.lines else { return nil }
        return lines.joined(separator: "\n")
    }
}
