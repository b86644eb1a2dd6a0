import AppleCodeCore
import Foundation
import Testing
@testable import AppleCodeAgent

@Suite struct TextToolCallTests {
    let tools = ["readFile", "listDirectory"]

    @Test(arguments: [
        ("functions.listDirectory:\n{ }", "listDirectory", "{ }"),
        ("  functions.readFile: {\"path\": \"a.py\"}\n", "readFile", #"{"path": "a.py"}"#),
        ("functions.listDirectory:", "listDirectory", ""),
        ("Functions.listDirectory:\n{ }", "listDirectory", "{ }"),  // seen from SmolLM2-135M
        ("```\nfunctions.readFile:\n{\"path\":\"b\"}\n```", "readFile", #"{"path":"b"}"#),
        ("```json\n{\"name\": \"readFile\", \"arguments\": {\"path\": \"a.py\"}}\n```", "readFile", #"{"path":"a.py"}"#),
        (#"{"name": "listDirectory", "arguments": {}}"#, "listDirectory", "{}"),
        (#"{"name": "readFile", "parameters": {"path": "x"}}"#, "readFile", #"{"path":"x"}"#),
        (#"{"name": "readFile", "arguments": "{\"path\": \"x\"}"}"#, "readFile", #"{"path": "x"}"#),
        (#"{"name": "listDirectory"}"#, "listDirectory", ""),
        ("functions.readFile: {\"path\": ", "", ""),  // not a whole object: text
        // Qwen/Hermes-style tags, whole or without the closing tag (cut by the answer reserve)
        ("<tool_call>\n{\"name\": \"readFile\", \"arguments\": {\"path\": \"notes.txt\"}}\n</tool_call>", "readFile",
         #"{"path":"notes.txt"}"#),
        ("<tool_call>{\"name\": \"listDirectory\", \"arguments\": {}}", "listDirectory", "{}"),
        // inside prose: a tag, a fenced object, a bare object (braces inside strings respected)
        ("I will read it first.\n<tool_call>\n{\"name\": \"readFile\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>",
         "readFile", #"{"path":"a"}"#),
        ("Let me look:\n```json\n{\"name\": \"listDirectory\", \"arguments\": {\"path\": \".\"}}\n```\nThen I answer.",
         "listDirectory", #"{"path":"."}"#),
        ("First {\"name\": \"readFile\", \"arguments\": {\"path\": \"x {y}\"}} then the answer.", "readFile",
         #"{"path":"x {y}"}"#),
        // a whole-file write with a docstring's quotes unescaped and raw newlines, as the 1.5B wrote it
        ("```json\n{\n  \"name\": \"readFile\",\n  \"arguments\": {\n    \"path\": \"a \"b\".py\"\n  }\n}\n```", "readFile",
         #"{"path":"a \"b\".py"}"#),
        // a pattern as a Python raw string, the whole reply of a 1.5B planning turn (its "plan" until now)
        (#"{"name": "readFile", "arguments": {"path": r"tally\.py"}}"#, "readFile", #"{"path":"tally\\.py"}"#),
    ])
    func recognisesWholeRepliesThatAreACall(text: String, name: String, arguments: String) {
        let call = TextToolCall.parse(text, tools: tools)
        if name.isEmpty {
            #expect(call == nil)
        } else {
            #expect(call == ModelToolCall(id: "", name: name, argumentsText: arguments))
        }
    }

    @Test(arguments: [
        "I am a helpful assistant.",
        "functions.deleteAll: {}",  // not an offered tool
        "functions.ListDirectory: {}",  // names are exact
        "Sure! functions.listDirectory: {}",  // prose around it: an answer that mentions a call
        "functions.listDirectory: {} and then more",
        #"{"name": "nobody", "arguments": {}}"#,
        #"{"name": "readFile", "arguments": {}, "note": "x"}"#,  // other keys: data, not a call
        #"{"name": "readFile", "arguments": [1]}"#,
        "```\nplain code\n```",
        "",
        #"The JSON {"name": "Bob", "arguments": {}} is a person."#,  // not an offered tool
        #"Use {"name": "readFile", "arguments": {}, "extra": 1} here"#,  // other keys
        "<tool_call>not json</tool_call>",
        #"Unclosed {"name": "readFile", "arguments": {"path": "a"}"#,
    ])
    func leavesEverythingElseAsText(text: String) {
        #expect(TextToolCall.parse(text, tools: tools) == nil)
    }

    /// Offered tools, a reply that is only a call of a made-up tool is a call (for the loop's "unknown tool"
    /// error); in prose, with other keys, or without arguments it stays text, and so does all of it otherwise.
    @Test func aWholeReplyCallingAMadeUpToolIsACallWhereToolsWereOffered() {
        let madeUp = "```json\n{\n  \"name\": \"setPort\",\n  \"arguments\": {\n    \"port\": 8080\n  }\n}\n```"
        #expect(TextToolCall.parse(madeUp, tools: tools, unknownNames: true)
            == ModelToolCall(id: "", name: "setPort", argumentsText: #"{"port":8080}"#))
        #expect(TextToolCall.parse(madeUp, tools: tools) == nil)
        for text in [#"The JSON {"name": "Bob", "arguments": {}} is a person."#, #"{"name": "Bob", "age": 3}"#,
                     #"{"name": "Bob", "arguments": {}, "extra": 1}"#, #"{"name": "Bob"}"#] {
            #expect(TextToolCall.parse(text, tools: tools, unknownNames: true) == nil)
        }
    }
}

@Suite struct AnswerRecoveryTests {
    func messages(_ chat: ChatRequest) -> [JSONValue] { chat.messagesJSON.arrayValue ?? [] }

    @Test func aCallWrittenAsTextRunsAsThatCall() async throws {
        let list = FakeTool("listDirectory", output: "a.py (file)")
        let model = ScriptedModel([ChatReply(text: "functions.listDirectory:\n{\"path\": \".\"}"), ChatReply(text: "a.py")])
        let sink = RecordingSink()
        let log = LogLines()
        var req = request([list])
        req.log = { log.append($0) }
        let answer = try await AgentLoop(model: model).run(req, events: sink)
        #expect(answer.text == "a.py")
        #expect(list.maxTokensSeen.count == 1)
        #expect(sink.events.contains { $0.kind == .toolCall(id: "c1", name: "listDirectory", arguments: ["path": "."]) })
        #expect(!sink.events.contains { if case .text(let d) = $0.kind { d.contains("functions.") } else { false } })
        // Sent back as a structured call with its generated id, followed by its result.
        let messages = model.sent[1].messagesJSON.arrayValue ?? []
        #expect(messages[2]["tool_calls"]?.arrayValue?.first?["id"] == "c1")
        #expect(messages[2]["content"] == "")
        #expect(messages[3]["tool_call_id"] == "c1")
        #expect(log.lines.contains { $0.contains("wrote a listDirectory call as text") })
    }

    @Test func anEmptyAnswerGetsOnePlainWordsRequestWithoutTools() async throws {
        let read = FakeTool("readFile", output: "1: x")
        let model = ScriptedModel([ChatReply(text: ""), ChatReply(text: "I am a coding assistant.")])
        let sink = RecordingSink()
        let answer = try await AgentLoop(model: model).run(request([read], prompt: "hi, who are you?"), events: sink)
        #expect(answer.text == "I am a coding assistant.")
        #expect(answer.progress.turns == 2)
        #expect(model.sent.count == 2)
        #expect(model.sent[0].tools.count == 1)
        #expect(model.sent[1].tools.isEmpty)
        // The same conversation without tools: the user's own message, no words of ours to echo.
        let messages = model.sent[1].messagesJSON.arrayValue ?? []
        #expect(messages.map { $0["role"]?.stringValue ?? "" } == ["system", "user"])
        #expect(messages.last?["content"] == "hi, who are you?")
        #expect(sink.notices.contains { $0.contains("gave an empty answer") })
    }

    @Test func emptyTwiceEndsWithAnEmptyAnswerAfterOneFollowUp() async throws {
        let model = ScriptedModel([ChatReply(text: ""), ChatReply(text: ""), ChatReply(text: "never asked")])
        let answer = try await AgentLoop(model: model).run(request([FakeTool("readFile", output: "")]),
                                                           events: RecordingSink())
        #expect(answer.text == "")
        #expect(answer.progress.turns == 2)
        #expect(model.sent.count == 2)
    }

    @Test func noFollowUpWhenMaxTurnsLeavesNoRoom() async throws {
        let model = ScriptedModel([ChatReply(text: ""), ChatReply(text: "never asked")])
        let answer = try await AgentLoop(model: model).run(request([FakeTool("readFile", output: "")], maxTurns: 1),
                                                           events: RecordingSink())
        #expect(answer.text == "")
        #expect(model.sent.count == 1)
    }

    @Test func aCallAsTextAfterTheAnswerRequestEndsTheRun() async throws {
        // The demo's "list the files" run: repeats, then the call again as text when no tools are offered.
        let list = FakeTool("listDirectory", output: "a.py (file)")
        let same = "{}"
        let model = ScriptedModel([
            call("listDirectory", same), call("listDirectory", same), call("listDirectory", same),
            ChatReply(text: "functions.listDirectory:\n{ }"),
            ChatReply(text: "never asked"),
        ])
        let sink = RecordingSink()
        let loop = AgentLoop(model: model, detectDroppedToolMessages: false)
        do {
            _ = try await loop.run(request([list], prompt: "list the files"), events: sink)
            Issue.record("expected a backend error")
        } catch let error as AgentError {
            #expect(error.outcome == .backendError && error.message.contains("kept calling tools"))
        }
        #expect(model.sent.count == 4)
        #expect(model.sent[3].tools.isEmpty)
        #expect(model.sent[3].messagesJSON.arrayValue?.last?["content"] == "list the files")
        // Requests without tools carry no tool-call structure for the model to imitate; the results stay.
        let roles = { (index: Int) in (self.messages(model.sent[index])).map { $0["role"]?.stringValue ?? "" } }
        #expect(roles(2) == ["system", "user", "assistant", "tool", "assistant", "tool"])
        #expect(roles(3).allSatisfy { $0 == "system" || $0 == "user" })
        #expect(messages(model.sent[3]).contains { $0["content"]?.stringValue?.contains("a.py (file)") == true })
        #expect(!sink.events.contains { if case .text(let d) = $0.kind { d.contains("functions.") } else { false } })
    }
}

final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    func append(_ line: String) { lock.withLock { stored.append(line) } }
    var lines: [String] { lock.withLock { stored } }
}
