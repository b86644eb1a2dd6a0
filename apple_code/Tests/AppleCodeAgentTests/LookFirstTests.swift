import AppleCodeCore
import Foundation
import Testing
@testable import AppleCodeAgent

/// The loop's two rules for small models: the first request (to a server that takes it) requires a call to a tool
/// that looks, and an edit waits until the file was read in this run.
@Suite struct LookFirstTests {
    let tools: [any AgentTool] = [FakeTool("readFile", output: "1\tx"), FakeTool("editFile", output: "edited"),
                                  FakeTool("listDirectory", output: "a.py (file)"), FakeTool("runCommand", output: "ok")]

    @Test func theFirstRequestMustLookWhereTheServerTakesItAndOnlyThen() async throws {
        let model = ScriptedModel([call("listDirectory", "{}"), ChatReply(text: "There is a.py.")])
        _ = try await AgentLoop(model: model, looksFirst: true).run(request(tools), events: RecordingSink())
        #expect(model.sent[0].mustCallOneOf == ["readFile", "listDirectory", "runCommand"])
        #expect(model.sent[1].mustCallOneOf == nil)

        let shown = ScriptedModel([ChatReply(text: "a.py prints x.")])
        var withFiles = request(tools)
        withFiles.taskFilesShown = ["a.py"]  // the task came with the files it names: it has looked
        _ = try await AgentLoop(model: shown, looksFirst: true).run(withFiles, events: RecordingSink())
        #expect(shown.sent[0].mustCallOneOf == nil)

        let elsewhere = ScriptedModel([ChatReply(text: "Hi.")])
        _ = try await AgentLoop(model: elsewhere).run(request(tools), events: RecordingSink())
        #expect(elsewhere.sent[0].mustCallOneOf == nil)
    }

    @Test func theWireSaysRequiredAllowedToolsOrAuto() {
        let specs = tools.map(\.spec)
        func choice(_ names: [String]?) -> JSONValue? {
            let chat = ChatRequest(system: "s", entries: [.user("t")], tools: specs, maxTokens: 9, style: .toolMessages,
                                   mustCallOneOf: names)
            return OpenAIChatModel(endpoint: OpenAIEndpoint(baseURL: "http://h/v1"), model: "m", deadline: nil)
                .body(chat)["tool_choice"]
        }
        #expect(choice(nil) == "auto")
        #expect(choice(specs.map(\.name)) == "required")
        #expect(choice(["readFile", "runCommand"]) == [
            "type": "allowed_tools",
            "allowed_tools": ["mode": "required", "tools": [
                ["type": "function", "function": ["name": "readFile"]],
                ["type": "function", "function": ["name": "runCommand"]],
            ]],
        ])
    }

    /// A fresh folder holding a.py; the caller removes it.
    private func workspaceWithAPy() throws -> URL {
        let workspace = FileManager.default.temporaryDirectory.appendingPathComponent("seen-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: workspace, withIntermediateDirectories: true)
        try "x\n".write(to: workspace.appendingPathComponent("a.py"), atomically: true, encoding: .utf8)
        return workspace
    }

    @Test func aFileShownWithTheTaskCountsAsRead() async throws {
        let workspace = try workspaceWithAPy()
        defer { try? FileManager.default.removeItem(at: workspace) }
        let edit = FakeTool("editFile", output: "edited", changes: ["a.py"])
        let model = ScriptedModel([call("editFile", #"{"path":"a.py"}"#), ChatReply(text: "Done.")])
        var task = request([edit])
        task.workspace = workspace.path
        task.taskFilesShown = ["a.py"]
        let sink = RecordingSink()
        _ = try await AgentLoop(model: model).run(task, events: sink)
        #expect(sink.results.map(\.summary) == ["editFile a.py"])
    }

    @Test func anEditOfAFileNotReadYetIsRefusedUntilItIsRead() async throws {
        let workspace = try workspaceWithAPy()
        defer { try? FileManager.default.removeItem(at: workspace) }
        let edit = FakeTool("editFile", output: "edited", changes: ["a.py"])
        let model = ScriptedModel([
            call("editFile", #"{"path":"a.py"}"#),
            call("readFile", #"{"path":"./a.py"}"#),
            call("editFile", #"{"path":"a.py"}"#),  // the same call, now it runs
            call("editFile", #"{"path":"new.py"}"#),  // no such file: for the tool to say
            ChatReply(text: "Done."),
        ])
        var prompt = request([FakeTool("readFile", output: "1\tx"), edit])
        prompt.workspace = workspace.path
        let sink = RecordingSink()
        _ = try await AgentLoop(model: model).run(prompt, events: sink)
        let results = sink.results.map(\.summary)
        #expect(results[0].hasPrefix("Error: editFile: a.py has not been read in this task; call readFile on it"))
        #expect(results[2] == "editFile a.py")
        #expect(results[3] == "editFile new.py")
        #expect(edit.maxTokensSeen.count == 2)  // the refused call never reached the tool
    }
}
