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
/// what is left of `tokens`, at most `maxFiles` (those named last, when more are), in the order the task names
/// them.
public enum TaskFiles {
    public static let maxFiles = 3

    /// The text to put after the task and the files it shows (workspace-relative), or nil when it names no such
    /// file.
    public static func shown(task: String, in root: Workspace, tokens: Int) -> (text: String, paths: [String])? {
        // The files named last come first: a caller's prompt may put earlier conversation before the message.
        let names = FileMentions.names(in: task)
        let latest = names.sorted { lastMention($0, in: task) > lastMention($1, in: task) }
        var left = tokens
        var chosen: [(name: String, relative: String, part: String)] = []
        var seen: Set<String> = []
        for name in latest where chosen.count < maxFiles {
            guard let target = try? root.resolve(name), target.kind == .file, seen.insert(target.absolute).inserted,
                  let text = whole(target, in: root) else { continue }
            let part = "\(target.relative):\n```\n\(text)\n```"
            let cost = TokenEstimator.estimate(part)
            guard cost <= left else { continue }
            left -= cost
            chosen.append((name, target.relative, part))
        }
        guard !chosen.isEmpty else { return nil }
        let ordered = names.compactMap { name in chosen.first { $0.name == name } }  // shown in the task's order
        return (ordered.map(\.part).joined(separator: "\n\n"), ordered.map(\.relative))
    }

    private static func lastMention(_ name: String, in task: String) -> String.Index {
        task.range(of: name, options: .backwards)?.lowerBound ?? task.startIndex
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
