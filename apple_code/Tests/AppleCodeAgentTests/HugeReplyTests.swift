import AppleCodeCore
import Foundation
import Testing
@testable import AppleCodeAgent

/// One huge model reply must not end the run with exit 4; the newest exchange is cut to fit like
/// older ones, and the loop goes on.
@Suite struct HugeReplyTests {
    @Test func anUnknownToolNameOf10000CharactersIsEchoedBoundedAndTheLoopGoesOn() async throws {
        let list = FakeTool("listDirectory", output: "a.py (file)")
        let name = String(repeating: "x", count: 10_000)
        let model = ScriptedModel([call(name, "{}", id: "u1"), call("listDirectory", "{}"), ChatReply(text: "a.py")])
        let sink = RecordingSink()
        let answer = try await AgentLoop(model: model).run(request([list]), events: sink)
        #expect(answer.text == "a.py")
        for sent in model.sent { #expect(sent.estimatedTokens <= 4096) }
        let error = try #require(sink.results.first)
        #expect(!error.ok && error.summary.contains("unknown tool 'xxxx") && error.summary.contains("10,000 bytes"))
        #expect(error.summary.utf8.count < 300)
        #expect(sink.events.allSatisfy { if case .toolCall(_, let n, _) = $0.kind { n.utf8.count <= 64 } else { true } })
        #expect(model.sent[1].messagesJSON.jsonText.utf8.count < 8_000)
    }

    @Test func fortyCallsInOneReplyRunTheFirstEightAndOneErrorCoversTheRest() async throws {
        let read = FakeTool("readFile", output: "1: x")
        // Paths of 150 digits: under the long-string cut, 150 estimated tokens each; 40 of them are over 4,096.
        let calls = (0..<40).map { index in
            ModelToolCall(id: "r\(index)", name: "readFile",
                          argumentsText: JSONValue.object(["path": .string(String(format: "%03d", index)
                              + String(repeating: "7", count: 147))]).jsonText)
        }
        let model = ScriptedModel([ChatReply(text: "", calls: calls), ChatReply(text: "done")])
        let sink = RecordingSink()
        let answer = try await AgentLoop(model: model).run(request([read]), events: sink)
        #expect(answer.text == "done")
        #expect(read.maxTokensSeen.count == AgentLoop.maxCallsPerReply)
        #expect(sink.results.count == AgentLoop.maxCallsPerReply + 1)
        #expect(sink.results.last?.summary.contains("this reply made 40 tool calls; only the first 8 were run") == true)
        for sent in model.sent { #expect(sent.estimatedTokens <= 4096) }
        let assistant = model.sent[1].entries.compactMap { entry -> [ModelToolCall]? in
            if case .assistant(_, let calls) = entry { calls } else { nil }
        }
        #expect(assistant.first?.map(\.id) == (0...8).map { "r\($0)" })
    }

    @Test func argumentsOfManyShortValuesBecomeOnePlaceholderOnceTheyRan() throws {
        var object = JSONObject()
        for index in 0..<2_000 { object["k\(index)"] = .int(index) }
        let call = ModelToolCall(id: "a", name: "writeFile", argumentsText: JSONValue.object(object).jsonText)
        let cut = call.withLongArgumentsCut
        #expect(cut.argumentsText.utf8.count < 200)
        let placeholder = try JSONValue.parse(cut.argumentsText)["arguments"]?.stringValue ?? ""
        #expect(placeholder.hasPrefix("[") && placeholder.contains("bytes of arguments"))
        #expect(!cut.hasLongArguments)
    }

    /// A context so small that even the newest exchange, its results condensed, does not fit: its calls' text and
    /// arguments become placeholders, then it is dropped; never exit 4 while the task fits.
    @Test func theNewestExchangeIsCutThenDroppedInASmallContext() async throws {
        let read = FakeTool("readFile", output: "1: x")
        let calls = (0..<8).map { index in
            ModelToolCall(id: "r\(index)", name: "readFile",
                          argumentsText: JSONValue.object(["path": .string(String(repeating: "\(index)", count: 150))]).jsonText)
        }
        let words = String(repeating: "I will read every file now. ", count: 40)
        let model = ScriptedModel([ChatReply(text: words, calls: calls), ChatReply(text: "done")])
        let sink = RecordingSink()
        let answer = try await AgentLoop(model: model).run(request([read], context: 1200), events: sink)
        #expect(answer.text == "done")
        for sent in model.sent { #expect(sent.estimatedTokens <= 1200) }
    }
}
