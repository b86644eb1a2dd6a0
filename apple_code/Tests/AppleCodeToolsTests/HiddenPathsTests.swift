import AppleCodeCore
import Foundation
import Testing
@testable import AppleCodeTools

/// The owner's secrets are hidden from commands (bwrap: an empty folder or file over each) and
/// from the file tools; the workspace wins over a hidden folder that holds it.
@Suite struct HiddenPathsTests {
    @Test func theStandardListNamesTheSecretsOfEachSystem() {
        let linux = HiddenPaths.standard(home: "/home/me/", extra: [], macOS: false, realPath: { _ in nil })
        #expect(linux.paths == [".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".config/gh", ".netrc",
                                ".git-credentials", ".docker/config.json", ".kube", ".npmrc", ".pypirc", ".apple-flow"]
            .map { "/home/me/" + $0 })
        let mac = HiddenPaths.standard(home: "/Users/me", extra: ["/srv/app/.env", "state/", ""], macOS: true,
                                       current: "/srv/app", realPath: { $0 == "/Users/me/.ssh" ? "/keys/ssh" : nil })
        for path in ["/Users/me/Library/Messages", "/Users/me/Library/Mail", "/Users/me/Library/Safari",
                     "/Users/me/Library/Cookies", "/Users/me/Library/Keychains",
                     "/Users/me/Library/Application Support/AddressBook", "/Users/me/.ssh", "/keys/ssh",
                     "/srv/app/.env", "/srv/app/state"] {
            #expect(mac.paths.contains(path), "\(path)")
        }
        #expect(HiddenPaths.standard(home: nil, extra: [], macOS: true).paths == [])
        #expect(HiddenPaths.standard(home: nil, extra: ["/", "//"], macOS: false).paths == [])
    }

    @Test func theWorkspaceWinsOverAHiddenFolderThatHoldsIt() {
        let hidden = HiddenPaths(paths: ["/h/.apple-flow", "/h/.ssh", "/h/.apple-flow/demo/.env"])
        let workspace = "/h/.apple-flow/demo"
        #expect(!hidden.hides("/h/.apple-flow/demo", workspace: workspace))
        #expect(!hidden.hides("/h/.apple-flow/demo/src/a.py", workspace: workspace))
        #expect(hidden.hides("/h/.apple-flow/demo/.env", workspace: workspace))
        #expect(hidden.hides("/h/.apple-flow/relay.db", workspace: workspace))
        #expect(hidden.hides("/h/.ssh/id_ed25519", workspace: workspace))
        #expect(!hidden.hides("/h/.sshx", workspace: workspace))
        // Elsewhere, the whole folder is hidden.
        #expect(hidden.hides("/h/.apple-flow/demo/src/a.py", workspace: "/h/code"))
        #expect(hidden.split(for: workspace) == (["/h/.apple-flow"], ["/h/.ssh", "/h/.apple-flow/demo/.env"]))
    }

    @Test func bubblewrapCoversEachHiddenPathWithSomethingEmpty() {
        let kinds: [String: Workspace.FileKind] = [
            "/h/.apple-flow": .directory, "/h/.ssh": .directory, "/h/.netrc": .file, "/h/.kube": .symlink,
            "/h/.apple-flow/ws/.env": .file, "/tmp/elsewhere/.env": .file, "/h/.ssh/id_rsa": .file,
            "/h/.apple-flow/relay.db": .file,
        ]
        let host = HostFiles(kind: { kinds[$0] ?? .missing }, entries: { _ in [] }, runtimeDirectory: nil)
        let hidden = HiddenPaths(paths: ["/h/.apple-flow", "/h/.ssh", "/h/.netrc", "/h/.kube", "/h/.aws",
                                         "/h/.apple-flow/ws/.env", "/tmp/elsewhere/.env", "/h/.ssh/id_rsa",
                                         "/h/.apple-flow/relay.db"])
        let argv = Bubblewrap.arguments(executable: "bwrap", workspace: "/h/.apple-flow/ws", host: host,
                                        hidden: hidden)
        let joined = argv.joined(separator: " ")
        // The folder that holds the workspace is emptied before the workspace is bound back into it.
        #expect(joined.contains("--tmpfs /h/.apple-flow --bind /h/.apple-flow/ws /h/.apple-flow/ws"))
        #expect(joined.contains("--tmpfs /h/.ssh --remount-ro /h/.ssh --ro-bind /dev/null /h/.netrc "
                                + "--ro-bind /dev/null /h/.apple-flow/ws/.env --dev /dev"))
        // A symlink (its real path is listed too), a missing path, and anything in the private /tmp: nothing.
        #expect(!argv.contains("/h/.kube") && !argv.contains("/h/.aws") && !argv.contains("/tmp/elsewhere/.env"))
        // Inside a covered folder: covered with it (a mount point there could not even be made).
        #expect(!argv.contains("/h/.ssh/id_rsa") && !argv.contains("/h/.apple-flow/relay.db"))
    }

    /// The file tools refuse a hidden path inside the workspace; listings and searches do not show it.
    @Test func theFileToolsRefuseAndSkipHiddenPaths() async throws {
        let ws = try TempWorkspace()
        try ws.write(".env", "APPLE_FLOW_WEB_TOKEN=hunter2-secret\n")
        try ws.write("state/relay.db", "hunter2-secret\n")
        try ws.write("app.py", "print('hello')\n")
        let workspace = try Workspace(ws.path, hidden: HiddenPaths(paths: [ws.path + "/.env", ws.path + "/state"]))
        let context = ws.context()
        func run(_ tool: some WorkspaceTool, _ arguments: [String: JSONValue]) async -> String {
            do { return try await tool.perform(ToolArguments(arguments), in: workspace, context: context).text }
            catch let failure as ToolFailure { return "Error: " + failure.message }
            catch { return "Error: \(error)" }
        }
        #expect(await run(ReadFileTool(), ["path": ".env"]).hasPrefix("Error: .env is hidden"))
        #expect(await run(ReadFileTool(), ["path": "state/relay.db"]).contains("is hidden"))
        #expect(await run(WriteFileTool(), ["path": ".env", "content": "x"]).contains("is hidden"))
        #expect(await run(ReadFileTool(), ["path": "app.py"]).contains("print('hello')"))
        // A missing file's error names what is there, never the hidden ones.
        #expect(await run(ReadFileTool(), ["path": "config.env"])
            == "Error: config.env does not exist. The workspace holds: app.py.")
        let listing = await run(ListDirectoryTool(), ["path": ".", "recursive": true])
        #expect(listing.contains("app.py") && !listing.contains(".env") && !listing.contains("relay.db"))
        #expect(!(await run(SearchContentTool(), ["pattern": "hunter2"])).contains("hunter2-secret"))
        #expect(!(await run(SearchFilesTool(), ["pattern": "**/*.db"])).contains("relay.db"))
        #expect(ws.read(".env") == "APPLE_FLOW_WEB_TOKEN=hunter2-secret\n")
    }

    /// A command cannot read a hidden folder or file, outside the workspace or inside it; a hidden folder that
    /// holds the workspace shows nothing but the workspace, which stays writable. The folders are made by the test
    /// under /var/tmp (the sandbox's /tmp is its own, so hiding there proves nothing).
    @Test(.enabled(if: hasBubblewrap, "needs a working bwrap (Linux)"))
    func bubblewrapHidesThemFromCommands() async throws {
        let base = "/var/tmp/apple-code-hidden-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: base) }
        let state = base + "/state"
        let workspacePath = state + "/ws"
        for folder in [base + "/keys", workspacePath] {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        for (path, text) in [(base + "/keys/id_ed25519", "key-secret"), (base + "/token", "token-secret"),
                             (state + "/relay.db", "db-secret"), (workspacePath + "/.env", "env-secret"),
                             (workspacePath + "/app.py", "print(1)")] {
            try text.write(toFile: path, atomically: false, encoding: .utf8)
        }
        let hidden = HiddenPaths(paths: [base + "/keys", base + "/token", state, workspacePath + "/.env"])
        let workspace = try Workspace(workspacePath, hidden: hidden)
        let command = "cat \(base)/keys/id_ed25519 \(base)/token ../relay.db .env; "
            + "echo \"keys=$(ls -A \(base)/keys | wc -l) state=$(ls -A .. | tr '\\n' ,)\"; "
            + "cat app.py; echo made > new.txt; echo end"
        let result = try await RunCommandTool(sandbox: .detected)
            .perform(ToolArguments(["command": .string(command)]), in: workspace,
                     context: ToolContext(workspace: workspacePath, maxResultTokens: 3000))
        #expect(result.text.contains("keys=0 state=ws,"), "\(result.text)")
        for secret in ["key-secret", "token-secret", "db-secret", "env-secret"] {
            #expect(!result.text.contains(secret), "\(secret): \(result.text)")
        }
        #expect(result.text.contains("print(1)") && result.text.contains("end"), "\(result.text)")
        #expect((try? String(contentsOfFile: workspacePath + "/new.txt", encoding: .utf8)) == "made\n")
        // Untouched on the host.
        #expect((try? String(contentsOfFile: workspacePath + "/.env", encoding: .utf8)) == "env-secret")
    }

    /// A hidden path stays hidden when a folder around it is renamed: the file tools know it by device and inode
    /// too (`mv sub sub2` outside them, then readFile `sub2/secret.txt`), and commands cannot rename that folder.
    @Test func theFileToolsKnowAHiddenPathUnderAnotherName() async throws {
        let ws = try TempWorkspace()
        try ws.write("apple-flow/.env", "APPLE_FLOW_WEB_TOKEN=hunter2-secret\n")
        try ws.write("sub/secret.txt", "key-secret\n")
        try ws.write("app.py", "print(1)\n")
        let hidden = HiddenPaths(paths: [ws.path + "/apple-flow", ws.path + "/sub/secret.txt"])
        // Renamed after the list was made, as a command (or anything else) could.
        for (from, to) in [("apple-flow", "x"), ("sub", "sub2")] {
            #expect(rename(ws.path + "/" + from, ws.path + "/" + to) == 0)
        }
        let workspace = try Workspace(ws.path, hidden: hidden)
        let context = ws.context()
        func run(_ tool: some WorkspaceTool, _ arguments: [String: JSONValue]) async -> String {
            do { return try await tool.perform(ToolArguments(arguments), in: workspace, context: context).text }
            catch let failure as ToolFailure { return "Error: " + failure.message }
            catch { return "Error: \(error)" }
        }
        #expect(await run(ReadFileTool(), ["path": "x/.env"]).hasPrefix("Error: x/.env is hidden"))
        #expect(await run(ReadFileTool(), ["path": "sub2/secret.txt"]).hasPrefix("Error: sub2/secret.txt is hidden"))
        #expect(await run(WriteFileTool(), ["path": "x/new.txt", "content": "x"]).contains("is hidden"))
        let listing = await run(ListDirectoryTool(), ["path": ".", "recursive": true])
        #expect(listing.contains("app.py") && listing.contains("sub2") && !listing.contains("secret.txt")
                && !listing.contains(".env") && !listing.contains("x/"), "\(listing)")
        #expect(!(await run(SearchContentTool(), ["pattern": "secret"])).contains("-secret"))
        // A hard link to a hidden file is the same file.
        #expect(link(ws.path + "/sub2/secret.txt", ws.path + "/copy.txt") == 0)
        #expect(await run(ReadFileTool(), ["path": "copy.txt"]).contains("is hidden"))
        #expect(await run(ReadFileTool(), ["path": "app.py"]).contains("print(1)"))
    }

    @Test func bubblewrapBindsTheFoldersAroundAHiddenPathInTheWorkspace() {
        let kinds: [String: Workspace.FileKind] = [
            "/w/a": .directory, "/w/a/b": .directory, "/w/a/b/secret.txt": .file, "/w/a/other.env": .file,
            "/w/top.env": .file, "/w/gone": .directory,
        ]
        let host = HostFiles(kind: { kinds[$0] ?? .missing }, entries: { _ in [] }, runtimeDirectory: nil)
        let hidden = HiddenPaths(paths: ["/w/a/b/secret.txt", "/w/a/other.env", "/w/top.env", "/w/gone/x"])
        let joined = Bubblewrap.arguments(executable: "bwrap", workspace: "/w", host: host, hidden: hidden)
            .joined(separator: " ")
        #expect(joined.contains("--bind /w/a /w/a --bind /w/a/b /w/a/b --ro-bind /dev/null /w/a/b/secret.txt "
                                + "--ro-bind /dev/null /w/a/other.env --ro-bind /dev/null /w/top.env --dev"), "\(joined)")
        #expect(!joined.contains("/w/gone"))  // nothing there to uncover
        #expect(Bubblewrap.foldersBetween("/", "/w/a/b", host: host) == [])
    }

    /// In the real sandbox: `mv sub sub2` (and of the daemon's folder) fails, so the next command does not find
    /// the hidden file uncovered under the new name.
    @Test(.enabled(if: hasBubblewrap, "needs a working bwrap (Linux)"))
    func bubblewrapCommandsCannotRenameAFolderHoldingAHiddenPath() async throws {
        let ws = try TempWorkspace()
        try ws.write("apple-flow/.env", "TOKEN=env-secret\n")
        try ws.write("sub/deeper/secret.txt", "key-secret\n")
        try ws.write("sub/readme.txt", "ok\n")
        try ws.write("sub/.git/HEAD", "ref: refs/heads/main\n")  // a repository in a folder the rename lock binds
        try ws.write("sub/.git/config", "[core]\n")
        let hidden = HiddenPaths(paths: [ws.path + "/apple-flow/.env", ws.path + "/sub/deeper/secret.txt"])
        let workspace = try Workspace(ws.path, hidden: hidden)
        func run(_ command: String) async throws -> String {
            try await RunCommandTool(sandbox: .detected)
                .perform(ToolArguments(["command": .string(command)]), in: workspace,
                         context: ToolContext(workspace: ws.path, maxResultTokens: 3000)).text
        }
        _ = try await run("mv apple-flow x; mv sub sub2; mv sub/deeper d; echo new > sub/new.txt; "
                          + "echo evil >> sub/.git/config")
        #expect(ws.read("sub/.git/config") == "[core]\n")  // the lock's bind does not cover the .git protection
        let second = try await run("cat x/.env sub2/deeper/secret.txt d/secret.txt 2>&1; cat sub/readme.txt")
        #expect(!second.contains("env-secret") && !second.contains("key-secret"), "\(second)")
        #expect(second.contains("ok"))
        #expect(ws.read("apple-flow/.env") == "TOKEN=env-secret\n")
        #expect(ws.read("sub/deeper/secret.txt") == "key-secret\n")
        #expect(ws.read("sub/new.txt") == "new\n")  // the folders stay writable
    }
}
