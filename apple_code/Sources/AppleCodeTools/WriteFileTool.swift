import AppleCodeCore

/// `writeFile(path, content)`: creates or replaces a file inside the workspace, creating parent folders;
/// returns the bytes written.
public struct WriteFileTool: WorkspaceTool {
    public let spec = ToolSpec(
        name: "writeFile",
        description: "Create or overwrite a file.",
        parameters: [
            ParameterSpec("path", .string, ""),
            ParameterSpec("content", .string, ""),
        ])

    public init() {}

    public func perform(_ arguments: ToolArguments, in workspace: Workspace, context: ToolContext) async throws
        -> ToolResult {
        let target = try workspace.resolve(arguments.string("path") ?? "")
        let content = arguments.string("content") ?? ""
        let created: Bool
        switch target.kind {
        case .missing: created = true
        case .file: created = false
        default: try target.requireFile(); created = false
        }
        if target.relative == "." { throw ToolFailure("the workspace itself is a folder, not a file") }
        if created, let slash = target.absolute.lastIndex(of: "/"), slash > target.absolute.startIndex {
            try FileIO.makeDirectories(String(target.absolute[..<slash]), shown: target.relative)
        }
        let bytes = Array(content.utf8)
        try FileIO.writeFile(bytes, to: target.absolute, shown: target.relative)
        let verb = created ? "Created" : "Replaced"
        return ToolResult(text: "\(verb) \(target.relative) (\(bytes.count) bytes written)",
                          summary: "\(verb.lowercased()) \(target.relative), \(bytes.count) bytes",
                          filesChanged: [target.relative])
    }
}
