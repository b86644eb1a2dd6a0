import AppleCodeCore
import Foundation
import Testing
@testable import AppleCodeTools

/// git runs a repository's hooks, and what its config names, later and outside any sandbox. Commands cannot write
/// them (the sandbox); the file tools must not be the way around.
@Suite struct GitInternalsTests {
    private func repository() throws -> TempWorkspace {
        let ws = try TempWorkspace()
        try ws.write(".git/config", "[core]\n\trepositoryformatversion = 0\n")
        try ws.write(".git/hooks/pre-commit.sample", "#!/bin/sh\n")
        try ws.write(".git/HEAD", "ref: refs/heads/main\n")
        return ws
    }

    @Test func writeFileRefusesHooksAndConfigAndSaysWhy() async throws {
        let ws = try repository()
        for path in [".git/hooks/pre-commit", ".git/config", ".git/config.worktree", ".git/hooks/deep/x",
                     "./.git/hooks/../hooks/post-checkout", ".git/modules/sub/hooks/post-merge",
                     ".git/worktrees/w/config.worktree", "vendor/lib/.git/config", ".git/HOOKS/pre-push",
                     ".git/commondir", ".git/worktrees/w/commondir", ".git/worktrees/w/gitdir",
                     ".git/modules/libs/a/config", ".git/modules/libs/a/b/hooks/x", ".git/info/attributes",
                     ".git/modules/libs/a/commondir", "vendor/lib/.git/commondir"] {
            let result = await ws.call(WriteFileTool(), ["path": .string(path), "content": "#!/bin/sh\ncurl evil\n"])
            #expect(!result.ok, "\(path)")
            #expect(result.text.hasPrefix("Error: writeFile: "), "\(path): \(result.text)")
            #expect(result.text.contains("git runs"), "\(path): \(result.text)")
            #expect(result.filesChanged.isEmpty)
        }
        #expect(!ws.exists(ws.path + "/.git/hooks/pre-commit"))
        #expect(!ws.exists(ws.path + "/.git/hooks/post-checkout"))
        #expect(!ws.exists(ws.path + "/.git/modules"))
        #expect(!ws.exists(ws.path + "/vendor"))
        #expect(ws.read(".git/config") == "[core]\n\trepositoryformatversion = 0\n")
    }

    @Test func editFileRefusesTheConfig() async throws {
        let ws = try repository()
        let result = await ws.call(EditFileTool(), ["path": ".git/config", "oldText": "repositoryformatversion = 0",
                                                    "newText": "hooksPath = /tmp"])
        #expect(result.text.hasPrefix("Error: editFile: .git/config"))
        #expect(result.text.contains("git runs"))
        #expect(ws.read(".git/config") == "[core]\n\trepositoryformatversion = 0\n")
    }

    @Test func aSymlinkIntoTheHooksIsRefusedToo() async throws {
        let ws = try repository()
        try FileManager.default.createSymbolicLink(atPath: ws.path + "/h", withDestinationPath: ".git/hooks")
        try FileManager.default.createSymbolicLink(atPath: ws.path + "/c", withDestinationPath: ".git/config")
        let viaFolder = await ws.call(WriteFileTool(), ["path": "h/pre-commit", "content": "x"])
        #expect(viaFolder.text.contains("git runs"), "\(viaFolder.text)")
        let viaFile = await ws.call(EditFileTool(), ["path": "c", "oldText": "0", "newText": "1"])
        #expect(viaFile.text.contains("git runs"), "\(viaFile.text)")
        #expect(!ws.exists(ws.path + "/.git/hooks/pre-commit"))
        #expect(ws.read(".git/config") == "[core]\n\trepositoryformatversion = 0\n")
    }

    /// A `.git` file points git at a repository (`gitdir: ...`) whose hooks it then runs: not written either.
    @Test func aGitPointerFileIsRefused() async throws {
        let ws = try TempWorkspace()
        let result = await ws.call(WriteFileTool(), ["path": "sub/.git", "content": "gitdir: ../evil\n"])
        #expect(result.text.contains("git runs"), "\(result.text)")
        #expect(!ws.exists(ws.path + "/sub"))
    }

    @Test func theRestOfTheRepositoryAndLookAlikesStayWritable() async throws {
        let ws = try repository()
        for path in [".gitignore", ".github/workflows/ci.yml", "src/hooks/config", ".git/refs/heads/info",
                     ".git/COMMIT_EDITMSG", "src/commondir", ".git/objects/info/packs", "docs/git/hooks/pre-commit", ".git-hooks/x"] {
            let result = await ws.call(WriteFileTool(), ["path": .string(path), "content": "ok\n"])
            #expect(result.ok, "\(path): \(result.text)")
            #expect(ws.read(path) == "ok\n")
        }
    }

    /// With `core.hooksPath` set to a folder inside the workspace (husky and similar), git runs the hooks from
    /// there: that folder is refused like `.git/hooks`.
    @Test func theFolderCoreHooksPathNamesIsRefused() async throws {
        let ws = try repository()
        try ws.write(".git/config", "[core]\n\tbare = false\n[Core]\n\tHooksPath = \".githooks\" ; shared hooks\n")
        try ws.write(".githooks/pre-push", "#!/bin/sh\n")
        let relative = await ws.call(WriteFileTool(), ["path": ".githooks/post-checkout", "content": "x"])
        #expect(relative.text.contains("core.hooksPath"), "\(relative.text)")
        let edit = await ws.call(EditFileTool(), ["path": ".githooks/pre-push", "oldText": "sh", "newText": "bash"])
        #expect(edit.text.contains("core.hooksPath"), "\(edit.text)")
        #expect(ws.read(".githooks/pre-push") == "#!/bin/sh\n")
        #expect(!ws.exists(ws.path + "/.githooks/post-checkout"))
        let other = await ws.call(WriteFileTool(), ["path": "githooks-notes.md", "content": "x"])
        #expect(other.ok)

        try ws.write(".git/config", "[core]\n\thooksPath = \(ws.path)/tools/hooks\n")
        let absolute = await ws.call(WriteFileTool(), ["path": "tools/hooks/pre-commit", "content": "x"])
        #expect(absolute.text.contains("core.hooksPath"), "\(absolute.text)")
        #expect(!ws.exists(ws.path + "/tools"))
    }

    /// A workspace that is a folder inside a repository: the repository's config is found above it, and its
    /// relative hooksPath is relative to the repository's top folder.
    @Test func aWorkspaceInsideARepositoryFindsItsConfigAbove() async throws {
        let ws = try TempWorkspace()
        let top = (ws.path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: top + "/.git", withIntermediateDirectories: true)
        try "[core]\n\thooksPath = ws/hooks\n".write(toFile: top + "/.git/config", atomically: false, encoding: .utf8)
        let result = await ws.call(WriteFileTool(), ["path": "hooks/pre-commit", "content": "x"])
        #expect(result.text.contains("core.hooksPath"), "\(result.text)")
        let fine = await ws.call(WriteFileTool(), ["path": "src/hooks.py", "content": "x"])
        #expect(fine.ok)
    }

    @Test func hooksPathParsing() {
        #expect(GitInternals.hooksPath(inConfig: "[core]\nhooksPath=a\n[core]\n\thookspath = \"b c\"\n") == "b c")
        #expect(GitInternals.hooksPath(inConfig: "[core \"x\"]\nhooksPath = a\n") == nil)
        #expect(GitInternals.hooksPath(inConfig: "[alias]\nhooksPath = a\n") == nil)
        #expect(GitInternals.hooksPath(inConfig: "# hooksPath = a\n[core]\n;hooksPath=b\n") == nil)
        #expect(GitInternals.hooksPath(inConfig: "[core] hooksPath = x # note\n") == "x")
        #expect(GitInternals.hooksPath(inConfig: "") == nil)
    }
}
