import AppleCodeCore
import Foundation
import Testing
@testable import AppleCodeTools

/// Every escape attempt gets a clear `Error:` and nothing outside the workspace is read or
/// written.
@Suite struct ConfinementTests {
    @Test func absolutePathOutsideIsRefusedForReadAndWrite() async throws {
        let ws = try TempWorkspace()
        let read = await ws.call(ReadFileTool(), ["path": .string(ws.outside + "/secret.txt")])
        #expect(!read.ok)
        #expect(read.text.hasPrefix("Error:"))
        #expect(read.text.contains("outside the workspace"))
        #expect(!read.text.contains("secret\n"))
        let write = await ws.call(WriteFileTool(), ["path": .string(ws.outside + "/new.txt"), "content": "x"])
        #expect(write.text.hasPrefix("Error:"))
        #expect(ws.outsideEntries() == ["secret.txt"])
        let etc = await ws.call(ReadFileTool(), ["path": "/etc/passwd"])
        #expect(etc.text.contains("outside the workspace"))
    }

    @Test func absolutePathInsideIsAccepted() async throws {
        let ws = try TempWorkspace()
        try ws.write("a.txt", "hello\n")
        let read = await ws.call(ReadFileTool(), ["path": .string(ws.path + "/a.txt")])
        #expect(read.ok)
        #expect(read.text.contains("1\thello"))
    }

    /// Escape targets are always the test's own `outside` folder, never a system file: if confinement ever
    /// broke, a write test aimed at /etc would damage the machine it runs on (as root here).
    @Test(arguments: ["../outside/secret.txt", "sub/../../outside/secret.txt", "./../outside/secret.txt",
                      "missing/../../outside/secret.txt", "../../../../../../../../../../OUTSIDE/secret.txt"])
    func dotDotEscapesAreRefused(template: String) async throws {
        let ws = try TempWorkspace()
        let path = template.replacingOccurrences(of: "/OUTSIDE", with: ws.outside)
        try ws.write("sub/keep.txt", "k")
        let read = await ws.call(ReadFileTool(), ["path": .string(path)])
        #expect(read.text.hasPrefix("Error:"), "\(read.text)")
        #expect(!read.text.contains("secret\n"))
        let write = await ws.call(WriteFileTool(), ["path": .string(path), "content": "pwned"])
        #expect(write.text.hasPrefix("Error:"), "\(write.text)")
        #expect(ws.outsideEntries() == ["secret.txt"])
        #expect((try? String(contentsOfFile: ws.outside + "/secret.txt", encoding: .utf8)) == "secret\n")
    }

    @Test func dotDotThatStaysInsideIsFine() async throws {
        let ws = try TempWorkspace()
        try ws.write("a.txt", "inside\n")
        try ws.write("sub/b.txt", "b")
        let read = await ws.call(ReadFileTool(), ["path": "sub/../a.txt"])
        #expect(read.ok)
        #expect(read.summary.hasPrefix("a.txt lines 1-1"))
    }

    @Test func symlinkToOutsideFileCannotBeReadOrWritten() async throws {
        let ws = try TempWorkspace()
        try FileManager.default.createSymbolicLink(atPath: ws.path + "/link.txt",
                                                   withDestinationPath: ws.outside + "/secret.txt")
        let read = await ws.call(ReadFileTool(), ["path": "link.txt"])
        #expect(read.text.hasPrefix("Error:"))
        #expect(read.text.contains("outside the workspace"))
        #expect(!read.text.contains("secret\n"))
        let write = await ws.call(WriteFileTool(), ["path": "link.txt", "content": "pwned"])
        #expect(write.text.hasPrefix("Error:"))
        let edit = await ws.call(EditFileTool(), ["path": "link.txt", "oldText": "secret", "newText": "pwned"])
        #expect(edit.text.hasPrefix("Error:"))
        #expect((try? String(contentsOfFile: ws.outside + "/secret.txt", encoding: .utf8)) == "secret\n")
    }

    @Test func danglingSymlinkToOutsideCannotCreateItsTarget() async throws {
        let ws = try TempWorkspace()
        try FileManager.default.createSymbolicLink(atPath: ws.path + "/dangling",
                                                   withDestinationPath: ws.outside + "/created-by-tool.txt")
        let write = await ws.call(WriteFileTool(), ["path": "dangling", "content": "pwned"])
        #expect(write.text.hasPrefix("Error:"), "\(write.text)")
        let through = await ws.call(WriteFileTool(), ["path": "dangling/x.txt", "content": "pwned"])
        #expect(through.text.hasPrefix("Error:"))
        #expect(ws.outsideEntries() == ["secret.txt"])
    }

    @Test func symlinkedParentFolderToOutsideIsRefused() async throws {
        let ws = try TempWorkspace()
        try FileManager.default.createSymbolicLink(atPath: ws.path + "/escape", withDestinationPath: ws.outside)
        let read = await ws.call(ReadFileTool(), ["path": "escape/secret.txt"])
        #expect(read.text.contains("outside the workspace"))
        let write = await ws.call(WriteFileTool(), ["path": "escape/new/deep.txt", "content": "pwned"])
        #expect(write.text.contains("outside the workspace"))
        let list = await ws.call(ListDirectoryTool(), ["path": "escape"])
        #expect(list.text.hasPrefix("Error:"))
        let search = await ws.call(SearchContentTool(), ["pattern": "secret"])
        #expect(search.text.hasPrefix("[0 matches"), "\(search.text)")
        #expect(ws.outsideEntries() == ["secret.txt"])
        // The root itself linked out (`ln -s / ws/escape`): the classic escape of lexical checks.
        try FileManager.default.createSymbolicLink(atPath: ws.path + "/root", withDestinationPath: "/")
        let passwd = await ws.call(ReadFileTool(), ["path": "root/etc/passwd"])
        #expect(passwd.text.contains("outside the workspace"))
    }

    @Test func symlinkInsideTheWorkspaceIsFollowed() async throws {
        let ws = try TempWorkspace()
        try ws.write("real/a.txt", "via link\n")
        try FileManager.default.createSymbolicLink(atPath: ws.path + "/alias", withDestinationPath: "real")
        let read = await ws.call(ReadFileTool(), ["path": "alias/a.txt"])
        #expect(read.ok)
        #expect(read.text.contains("via link"))
        #expect(read.summary.hasPrefix("real/a.txt"))
    }

    @Test func workspaceGivenThroughASymlinkIsComparedByRealPath() async throws {
        // macOS gives /tmp as a symlink to /private/tmp; a linked workspace must still work and still confine.
        let ws = try TempWorkspace()
        try ws.write("a.txt", "x\n")
        let linked = ws.outside + "/ws-link"
        try FileManager.default.createSymbolicLink(atPath: linked, withDestinationPath: ws.path)
        let context = ToolContext(workspace: linked, maxResultTokens: 1000)
        let read = await ReadFileTool().call(raw: ["path": .string(linked + "/a.txt")], context: context)
        #expect(read.ok, "\(read.text)")
        let out = await ReadFileTool().call(raw: ["path": "../secret.txt"], context: context)
        #expect(out.text.contains("outside the workspace"))
    }

    @Test func symlinkLoopIsAClearErrorAndListingDoesNotLoop() async throws {
        let ws = try TempWorkspace()
        try FileManager.default.createSymbolicLink(atPath: ws.path + "/a", withDestinationPath: "b")
        try FileManager.default.createSymbolicLink(atPath: ws.path + "/b", withDestinationPath: "a")
        try FileManager.default.createSymbolicLink(atPath: ws.path + "/up", withDestinationPath: ".")
        let read = await ws.call(ReadFileTool(), ["path": "a"])
        #expect(read.text == "Error: readFile: a: too many levels of symlinks")
        let write = await ws.call(WriteFileTool(), ["path": "a/x.txt", "content": "x"])
        #expect(write.text.hasPrefix("Error:"))
        let list = await ws.call(ListDirectoryTool(), ["recursive": true])
        #expect(list.text.hasSuffix("[3 entries in .]"))
    }

    @Test func fifoIsRefusedWithoutBlocking() async throws {
        let ws = try TempWorkspace()
        #expect(mkfifo(ws.path + "/pipe", 0o644) == 0)
        let read = await ws.call(ReadFileTool(), ["path": "pipe"])
        #expect(read.text.hasPrefix("Error:"))
        #expect(read.text.contains("FIFO"))
        let write = await ws.call(WriteFileTool(), ["path": "pipe", "content": "x"])
        #expect(write.text.contains("FIFO"))
        let edit = await ws.call(EditFileTool(), ["path": "pipe", "oldText": "a", "newText": "b"])
        #expect(edit.text.hasPrefix("Error:"))
        // Searching skips it instead of hanging on it.
        let search = await ws.call(SearchContentTool(), ["pattern": "x"])
        #expect(search.ok)
    }

    @Test func deviceIsRefused() async throws {
        // A workspace of /dev puts real devices inside it without needing privileges to create one.
        let context = ToolContext(workspace: "/dev", maxResultTokens: 500)
        let read = await ReadFileTool().call(raw: ["path": "zero"], context: context)
        #expect(read.text.hasPrefix("Error:"))
        #expect(read.text.contains("device"))
        let write = await WriteFileTool().call(raw: ["path": "null", "content": "x"], context: context)
        #expect(write.text.contains("device"))
    }

    @Test(arguments: ["a\u{0}b.txt", "a\nb.txt", "a\rb.txt", "ok.txt\n"])
    func controlCharactersInPathsAreRefused(path: String) async throws {
        let ws = try TempWorkspace()
        try ws.write("a", "x")
        let write = await ws.call(WriteFileTool(), ["path": .string(path), "content": "x"])
        #expect(write.text.hasPrefix("Error:"))
        #expect(write.text.contains("NUL") || write.text.contains("line break"))
        let read = await ws.call(ReadFileTool(), ["path": .string(path)])
        #expect(read.text.hasPrefix("Error:"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: ws.path) == ["a"])
    }

    @Test func tenThousandCharacterPathIsRefused() async throws {
        let ws = try TempWorkspace()
        let long = String(repeating: "a/", count: 5000)
        #expect(long.count == 10_000)
        for tool: any AgentTool in [ReadFileTool(), WriteFileTool(), ListDirectoryTool()] {
            let result = await ws.call(tool, ["path": .string(long), "content": "x"])
            #expect(result.text.hasPrefix("Error:"))
            #expect(result.text.contains("too long"))
        }
        let oneName = String(repeating: "b", count: 10_000)
        let result = await ws.call(WriteFileTool(), ["path": .string(oneName), "content": "x"])
        #expect(result.text.contains("too long"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: ws.path).isEmpty)
    }

    @Test func emptyPathIsRefused() async throws {
        let ws = try TempWorkspace()
        let result = await ws.call(ReadFileTool(), ["path": ""])
        #expect(result.text == "Error: readFile: the path is empty")
    }

    @Test func missingWorkspaceIsAClearError() async {
        let context = ToolContext(workspace: "/nonexistent/apple-code-ws", maxResultTokens: 500)
        let result = await ReadFileTool().call(raw: ["path": "a"], context: context)
        #expect(result.text.hasPrefix("Error:"))
        #expect(result.text.contains("does not exist"))
    }

    @Test func workspaceResolution() throws {
        let ws = try TempWorkspace()
        let workspace = try Workspace(ws.path)
        #expect(workspace.root == ws.path)
        #expect(try workspace.resolve(".").relative == ".")
        #expect(try workspace.resolve("new/dir/file.txt").relative == "new/dir/file.txt")
        #expect(try workspace.resolve("new/dir/file.txt").kind == .missing)
        #expect(throws: ToolFailure.self) { try workspace.resolve("new/../../x") }
        #expect(workspace.contains(ws.path + "/x"))
        #expect(!workspace.contains(ws.path + "x"))  // a sibling sharing the prefix is outside
    }
}
