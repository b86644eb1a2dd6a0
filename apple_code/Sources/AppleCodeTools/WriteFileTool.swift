#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
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
        try GitInternals.refuseWrite(to: target, in: workspace)
        let given = arguments.string("content") ?? ""
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
        var previous: String?  // the text it replaces, when there is one to compare and to diff
        if !created, case .text(let old) = Self.previousText(target.absolute) { previous = old }
        let echo = ReadFileEcho.fileContent(given, replacing: previous)
        let content = echo ?? given
        // readFile's result does not show whether the file ends with a newline: a copy of it is the same file.
        let sameAsEcho = echo != nil && previous.map { $0 == content + "\n" || $0 + "\n" == content } == true
        if previous == content || sameAsEcho {
            throw ToolFailure("\(target.relative) already holds exactly this content; nothing changed. Write the "
                + "corrected content")
        }
        let bytes = Array(content.utf8)
        try FileIO.writeFile(bytes, to: target.absolute, shown: target.relative)
        let verb = created ? "Created" : "Replaced"
        // A file replaced without a text of its own to show (binary, too large) gets no diff.
        let diff = created || previous != nil
            ? TextDiff.unified(path: target.relative, before: previous, after: content) : nil
        let note = echo == nil ? "" : "; the line numbers and tags readFile shows were left out of the content"
        return ToolResult(text: "\(verb) \(target.relative) (\(bytes.count) bytes written\(note))",
                          summary: "\(verb.lowercased()) \(target.relative), \(bytes.count) bytes",
                          filesChanged: [target.relative], diff: diff)
    }

    enum Previous: Equatable {
        case text(String)
        /// Not UTF-8 text, too large to diff, or unreadable: the write goes ahead without a diff.
        case noDiff
    }

    /// The file's text before it is replaced, for the diff in the event.
    static func previousText(_ path: String) -> Previous {
        guard let fd = try? FileIO.openForReading(path, shown: path) else { return .noDiff }
        defer { close(fd) }
        guard let bytes = try? FileIO.readAll(fd: fd, limit: TextDiff.maxInputBytes), !bytes.contains(0),
              let text = String(validating: bytes, as: UTF8.self) else { return .noDiff }
        return .text(text)
    }
}
