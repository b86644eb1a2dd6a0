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

    @Test func anEditOfAFileNotReadYetIsRefusedUntilItIsRead() async throws {
        let workspace = FileManager.default.temporaryDirectory.appendingPathComponent("seen-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: workspace, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: workspace) }
        try "x\n".write(to: workspace.appendingPathComponent("a.py"), atomically: true, encoding: .utf8)
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

    @Test func anAnswerWithCodeAndNoChangeGoesBackOnceToBeApplied() async throws {
        let edit = FakeTool("editFile", output: "edited", changes: ["calc.py"])
        let model = ScriptedModel([
            call("readFile", #"{"path":"calc.py"}"#),
            ChatReply(text: "Change it to:\n```python\nreturn a + b\n```"),
            call("editFile", #"{"path":"calc.py","oldText":"a - b","newText":"a + b"}"#),
            ChatReply(text: "Fixed:\n```python\nreturn a + b\n```"),  // a file changed: this answer ends the run
        ])
        let sink = RecordingSink()
        let answer = try await AgentLoop(model: model, looksFirst: true)
            .run(request([FakeTool("readFile", output: "1\tx"), edit]), events: sink)
        #expect(answer.text.hasPrefix("Fixed:"))
        #expect(answer.progress.filesChanged == ["calc.py"])
        #expect(sink.notices.contains { $0.hasPrefix("the answer shows code but no file was changed") })
        let asked = model.sent[2]
        #expect(asked.mustCallOneOf == ["readFile", "editFile"])
        #expect(asked.entries.suffix(2) == [.assistant(text: "Change it to:\n```python\nreturn a + b\n```", calls: []),
                                             .user(LoopText.unappliedCode)])
        #expect(model.sent[3].mustCallOneOf == nil)
    }

    @Test func codeIsAskedForOnlyOnceAndNeverOfReadOnlyRunsOrPlainAnswers() async throws {
        let code = ChatReply(text: "Like this:\n```\nx = 1\n```")
        // Asked once: the second answer with code ends the run.
        let twice = ScriptedModel([code, code])
        let answer = try await AgentLoop(model: twice).run(request(tools), events: RecordingSink())
        #expect(answer.text == code.text)
        #expect(twice.sent.count == 2)
        #expect(twice.sent[1].mustCallOneOf == nil)  // a server that cannot require a call is only told
        // No tool that changes files: nothing to apply with.
        let readOnly = ScriptedModel([code])
        _ = try await AgentLoop(model: readOnly).run(request([FakeTool("readFile", output: "1\tx")]),
                                                     events: RecordingSink())
        #expect(readOnly.sent.count == 1)
        // Words without a code block, or an empty fence, are an answer.
        for text in ["The answer is 4.", "Empty:\n```\n```", "One fence ``` only"] {
            let plain = ScriptedModel([ChatReply(text: text)])
            _ = try await AgentLoop(model: plain).run(request(tools), events: RecordingSink())
            #expect(plain.sent.count == 1, "\(text)")
        }
        // Too few turns left for a tool round and an answer: the answer stands.
        let late = ScriptedModel([code])
        var short = request(tools)
        short.maxTurns = 2
        _ = try await AgentLoop(model: late).run(short, events: RecordingSink())
        #expect(late.sent.count == 1)
    }
}
