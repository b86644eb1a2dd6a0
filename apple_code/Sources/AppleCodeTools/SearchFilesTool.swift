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
        var lines = CappedLines(cap: Self.maxPaths, tokens: context.maxResultTokens)
        let stats = walker.walk(folder.absolute) { entry in
            if glob.matches(name: entry.name, pathBelowRoot: String(entry.absolute.dropFirst(prefix.count))) {
                lines.offer(entry.relative + (entry.kind == .directory ? "/" : ""))
            }
            return true
        }
        return lines.result(headline: counted(lines.total, "path matches", "paths match") + " \(glob.pattern) in \(folder.relative)",
                            notes: stats.notes(namingSkipped: false), incomplete: stats.capped,
                            summary: counted(lines.total, "path matches", "paths match") + " \(glob.pattern)")
    }
}
