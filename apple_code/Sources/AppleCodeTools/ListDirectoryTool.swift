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
        if folder.kind == .missing {  // a made-up folder ("path/to/workspace"): say what is there instead
            throw ToolFailure("\(folder.relative) does not exist. " + workspace.nearest(folder.absolute))
        }
        try folder.requireDirectory()
        let walker = TreeWalker(workspace: workspace, recursive: arguments.bool("recursive") ?? false)
        var lines = CappedLines(cap: Self.maxEntries, tokens: context.maxResultTokens)
        let stats = walker.walk(folder.absolute) { entry in
            lines.offer(Self.describe(entry))
            return true
        }
        return lines.result(headline: counted(lines.total, "entry", "entries") + " in \(folder.relative)",
                            notes: stats.notes(namingSkipped: true), incomplete: stats.capped,
                            summary: "\(folder.relative): " + counted(lines.total, "entry", "entries"))
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
