#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import AppleCodeCore

/// `readFile(path, startLine?, endLine?)`: numbered lines in a window of at most 100 lines that also fits the
/// budget, with the file's line count and where to read on. Streams the file, so a 50 MB file costs one chunk.
public struct ReadFileTool: WorkspaceTool {
    public static let windowLines = 100

    public let spec = ToolSpec(
        name: "readFile",
        description: "Read a text file (numbered lines).",
        parameters: [
            ParameterSpec("path", .string, ""),
            ParameterSpec("startLine", .integer, "", required: false),
            ParameterSpec("endLine", .integer, "", required: false),
        ])

    public init() {}

    public func perform(_ arguments: ToolArguments, in workspace: Workspace, context: ToolContext) async throws
        -> ToolResult {
        let target = try workspace.resolve(arguments.string("path") ?? "")
        let first = max(1, arguments.int("startLine") ?? 1)
        let requestedLast = arguments.int("endLine")
        if let requestedLast, requestedLast < first {
            throw ToolFailure("endLine \(requestedLast) is before startLine \(first)")
        }
        let result = try read(target, in: workspace, first: first,
                              last: min(requestedLast ?? Int.max, first + Self.windowLines - 1), context: context)
        // A range inside a file that fits one window is widened to the whole file: small models page through
        // short files a few lines at a time (or ask for a range and miss the line that matters), and the rest of
        // a short file costs little.
        guard (first > 1 || requestedLast != nil), result.total <= Self.windowLines,
              result.first > 1 || result.last < result.total,
              let whole = try? read(target, in: workspace, first: 1, last: result.total, context: context),
              whole.last == whole.total else { return result.tool }
        return whole.tool
    }

    private struct Read {
        let tool: ToolResult
        let first: Int
        let last: Int
        let total: Int
    }

    private func read(_ target: Workspace.Resolved, in workspace: Workspace, first: Int, last: Int,
                      context: ToolContext) throws -> Read {
        let name = target.relative
        let fd = try FileIO.openText(target, in: workspace)
        defer { close(fd) }

        var window = BudgetedLines(tokens: context.maxResultTokens)
        var shownLast = first - 1
        let scan = try FileIO.scanLines(fd: fd, from: first, countAll: true) { number, text, cut in
            guard number <= last else { return false }
            let line = "\(number)\t\(text)" + (cut ? " [... line cut]" : "")
            // A first line too long for the budget is shown cut rather than not at all.
            guard window.add(line) || shownLast < first && window.addCut(line, marker: " [... line cut]") else {
                return false
            }
            shownLast = number
            return true
        }
        let total = scan.lines
        if total == 0 {
            return Read(tool: ToolResult(text: "(\(name) is empty)", summary: "\(name) is empty"), first: 1, last: 0,
                        total: 0)
        }
        if first > total {
            throw ToolFailure("startLine \(first) is past the end of \(name) (\(total) lines)")
        }
        if shownLast < first {
            throw ToolFailure("line \(first) of \(name) does not fit the remaining context budget")
        }
        let note = shownLast < total
            ? "[\(name) lines \(first)-\(shownLast) of \(total); read on with startLine \(shownLast + 1)]"
            : "[\(name) lines \(first)-\(shownLast) of \(total); end of file]"
        return Read(tool: ToolResult(text: window.text + "\n" + note,
                                     summary: "\(name) lines \(first)-\(shownLast) of \(total)",
                                     truncated: window.full),
                    first: first, last: shownLast, total: total)
    }
}
