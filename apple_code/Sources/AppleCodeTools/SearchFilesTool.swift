import AppleCodeCore

/// `searchFiles(pattern, path=".")`: workspace-relative paths whose name (or, for a pattern with `/`, path)
/// matches the glob; at most 200, fewer when the budget is short.
public struct SearchFilesTool: WorkspaceTool {
    public static let maxPaths = 200

    public let spec = ToolSpec(
        name: "searchFiles",
        description: "Find files by glob, e.g. *.py",
        parameters: [
            ParameterSpec("pattern", .string, ""),
            ParameterSpec("path", .string, "", required: false),
        ])

    public init() {}

    public func perform(_ arguments: ToolArguments, in workspace: Workspace, context: ToolContext) async throws
        -> ToolResult {
        let glob = Glob(arguments.string("pattern") ?? "*")
        let folder = try workspace.resolve(arguments.string("path") ?? ".")
        try folder.requireDirectory()
        let walker = TreeWalker(workspace: workspace, recursive: true)
        let prefix = folder.absolute == "/" ? "/" : folder.absolute + "/"
        var lines = BudgetedLines(tokens: context.maxResultTokens)
        var total = 0
        let stats = walker.walk(folder.absolute) { entry in
            guard glob.matches(name: entry.name, pathBelowRoot: String(entry.absolute.dropFirst(prefix.count)))
            else { return true }
            total += 1
            if lines.count < Self.maxPaths { _ = lines.add(entry.relative + (entry.kind == .directory ? "/" : "")) }
            return true
        }
        let shown = lines.count
        var note = "[\(total) paths match \(glob.pattern) in \(folder.relative)"
        if shown < total { note += "; \(shown) shown, \(total - shown) left out" }
        if stats.capped { note += "; stopped after \(TreeWalker.maxVisits) entries" }
        note += "]"
        let body = shown > 0 ? lines.text + "\n" : ""
        return ToolResult(text: body + note, summary: "\(total) paths match \(glob.pattern)",
                          truncated: shown < total || stats.capped)
    }
}
