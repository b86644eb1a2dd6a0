import AppleCodeCore

/// `listDirectory(path=".", recursive=false)`: entries with their kind (folders end in `/`), workspace-relative,
/// at most 200 and fewer when the budget is short; symlinks are shown, never followed.
public struct ListDirectoryTool: WorkspaceTool {
    public static let maxEntries = 200

    public let spec = ToolSpec(
        name: "listDirectory",
        description: "List a folder.",
        parameters: [
            ParameterSpec("path", .string, "", required: false),
            ParameterSpec("recursive", .boolean, "", required: false),
        ])

    public init() {}

    public func perform(_ arguments: ToolArguments, in workspace: Workspace, context: ToolContext) async throws
        -> ToolResult {
        let folder = try workspace.resolve(arguments.string("path") ?? ".")
        try folder.requireDirectory()
        let walker = TreeWalker(workspace: workspace, recursive: arguments.bool("recursive") ?? false)
        var lines = BudgetedLines(tokens: context.maxResultTokens)
        var total = 0
        let stats = walker.walk(folder.absolute) { entry in
            total += 1
            if lines.count < Self.maxEntries { _ = lines.add(Self.describe(entry)) }
            return true
        }
        let shown = lines.count
        var note = "[\(total) entries in \(folder.relative)"
        if shown < total { note += "; \(shown) shown, \(total - shown) left out" }
        if stats.capped { note += "; stopped after \(TreeWalker.maxVisits) entries" }
        if !stats.skipped.isEmpty { note += "; skipped \(stats.skipped.sorted().joined(separator: ", "))" }
        note += "]"
        let body = shown > 0 ? lines.text + "\n" : ""
        return ToolResult(text: body + note, summary: "\(folder.relative): \(total) entries",
                          truncated: shown < total || stats.capped)
    }

    static func describe(_ entry: TreeWalker.Entry) -> String {
        switch entry.kind {
        case .directory: entry.relative + "/"
        case .file: entry.relative
        case .symlink: "\(entry.relative) -> \(TreeWalker.linkTarget(entry.absolute)) (symlink, not followed)"
        default: "\(entry.relative) (\(entry.kind.label))"
        }
    }
}
