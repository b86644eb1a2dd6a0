import AppleCodeCore
import Foundation
@testable import AppleCodeTools

/// A fresh workspace folder under the system temp folder (a real path), removed when the test ends.
final class TempWorkspace {
    let path: String
    /// A sibling folder outside the workspace, for escape attempts.
    let outside: String

    init() throws {
        let base = (Workspace.realPath(NSTemporaryDirectory()) ?? "/tmp") + "/apple-code-tools-\(UUID().uuidString)"
        path = base + "/ws"
        outside = base + "/outside"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try "secret\n".write(toFile: outside + "/secret.txt", atomically: false, encoding: .utf8)
    }

    deinit { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }

    func write(_ relative: String, _ text: String) throws {
        let full = path + "/" + relative
        try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true)
        try text.write(toFile: full, atomically: false, encoding: .utf8)
    }

    func read(_ relative: String) -> String? { try? String(contentsOfFile: path + "/" + relative, encoding: .utf8) }

    func exists(_ absolute: String) -> Bool { Workspace.fileKind(absolute) != .missing }

    func context(tokens: Int = 3000, deadline: ContinuousClock.Instant? = nil,
                 log: @escaping @Sendable (String) -> Void = { _ in }) -> ToolContext {
        ToolContext(workspace: path, maxResultTokens: tokens, deadline: deadline, log: log)
    }

    func call(_ tool: any AgentTool, _ arguments: JSONObject, tokens: Int = 3000) async -> ToolResult {
        await tool.call(raw: .object(arguments), context: context(tokens: tokens))
    }

    /// The outside folder's entries, to prove nothing was written there.
    func outsideEntries() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: outside)) ?? []).sorted()
    }
}
