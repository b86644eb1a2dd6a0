import AppleCodeCore
import Foundation
import Testing
@testable import AppleCodeAgent

@Suite struct AgentLoopTests {
    @Test func runsToolsThenAnswersAndCountsProgress() async throws {
        let list = FakeTool("listDirectory", output: "a.py (file)")
        let edit = FakeTool("editFile", output: "edited", changes: ["a.py"])
        let model = ScriptedModel([
            call("listDirectory", #"{"path":"."}"#, id: "x1"),
            call("editFile", #"{"path":"a.py"}"#),
            ChatReply(text: "Changed a.py."),
        ])
        let sink = RecordingSink()
        let answer = try await AgentLoop(model: model).run(request([list, edit]), events: sink)
        #expect(answer.text == "Changed a.py.")
        #expect(answer.progress.turns == 3)
        #expect(answer.progress.filesChanged == ["a.py"])
        #expect(answer.progress.usage.estimated)
        let sent = model.sent
        // The second request carries the first call and its result as a tool message with the model's id.
        let messages = sent[1].messagesJSON.arrayValue ?? []
        #expect(messages.first?["role"] == "system")
        #expect(messages.last?["role"] == "tool")
        #expect(messages.last?["tool_call_id"] == "x1")
        #expect(messages.last?["content"] == "a.py (file)")
        // A call without an id gets one, used in the event and the message.
        #expect(sink.events.contains { $0.kind == .toolCall(id: "c1", name: "editFile", arguments: ["path": "a.py"]) })
        #expect(sink.events.last?.kind == .text(delta: "Changed a.py."))
        // Each tool_result carries the text the model was given (the event's `output`).
        let details = sink.events.filter { if case .toolResult = $0.kind { true } else { false } }.map(\.detail)
        #expect(details == [ToolResultDetail(output: "a.py (file)"), ToolResultDetail(output: "edited")])
    }

    @Test func malformedArgumentsAndUnknownToolGetErrorsAndTheLoopGoesOn() async throws {
        let read = FakeTool("readFile", output: "1: x")
        let model = ScriptedModel([
            call("readFile", #"{"path": "#),
            call("deleteEverything", #"{}"#),
            call("readFile", #""{\"path\":\"a\"}""#),  // double-encoded: unwrapped
            ChatReply(text: "ok"),
        ])
        let sink = RecordingSink()
        let answer = try await AgentLoop(model: model).run(request([read]), events: sink)
        #expect(answer.text == "ok")
        let results = sink.results
        #expect(results.count == 3)
        #expect(!results[0].ok && results[0].summary.hasPrefix("Error: the arguments of readFile are not valid JSON"))
        #expect(!results[1].ok && results[1].summary.contains("unknown tool 'deleteEverything'"))
        #expect(results[1].summary.contains("readFile"))
        #expect(results[2].ok && results[2].summary == "readFile a")
        #expect(sink.events.contains { $0.kind == .toolCall(id: "c1", name: "readFile", arguments: .string(#"{"path": "#)) })
    }

    /// Arguments a small model wrote by hand (a raw newline in a string, a quoted name's quotes unescaped) run as
    /// the call they plainly are, not as an "invalid JSON" error the model then cannot fix.
    @Test func handWrittenArgumentsAreRepairedNotRefused() async throws {
        let read = FakeTool("readFile", output: "1: x")
        let model = ScriptedModel([
            call("readFile", "{\"path\": \"notes\nold \"draft\".txt\"}"),
            ChatReply(text: "ok"),
        ])
        let sink = RecordingSink()
        _ = try await AgentLoop(model: model).run(request([read]), events: sink)
        #expect(sink.results.map(\.ok) == [true])
        #expect(sink.results.first?.summary == "readFile notes\nold \"draft\".txt")
        #expect(sink.events.contains {
            $0.kind == .toolCall(id: "c1", name: "readFile", arguments: ["path": "notes\nold \"draft\".txt"])
        })
    }

    /// The same call (same tool, same arguments in any key order) again in a run is not run
    /// again: it gets its earlier result with a short note.
    @Test func aRepeatedCallGetsItsEarlierResultAndIsNotRunAgain() async throws {
        let read = FakeTool("readFile", output: "1: x")
        let list = FakeTool("listDirectory", output: "a.py (file)")
        let model = ScriptedModel([
            call("readFile", #"{"path":"a.py","startLine":1}"#), call("listDirectory", "{}"),
            call("readFile", #"{ "startLine": 1, "path" : "a.py" }"#), ChatReply(text: "Done."),
        ])
        let sink = RecordingSink()
        let answer = try await AgentLoop(model: model, detectDroppedToolMessages: false).run(request([read, list]),
                                                                                          events: sink)
        #expect(answer.text == "Done.")
        #expect(read.maxTokensSeen.count == 1)
        #expect(sink.results.map(\.summary) == ["readFile a.py", "listDirectory ", "readFile a.py (earlier result, "
            + "not run again)"])
        let last = model.sent[3].messagesJSON.arrayValue?.last
        #expect(last?["content"]?.stringValue == "1: x\n\n" + LoopText.repeatedCall)
        #expect(model.sent.allSatisfy { $0.tools.count == 2 })
    }

    @Test func aCallThatChangedSomethingMakesEarlierResultsStale() async throws {
        let read = FakeTool("readFile", output: "1: x")
        let edit = FakeTool("editFile", output: "edited", changes: ["a.py"])
        let same = #"{"path":"a.py"}"#
        let model = ScriptedModel([call("readFile", same), call("editFile", same), call("readFile", same),
                                   call("editFile", same), ChatReply(text: "Done.")])
        _ = try await AgentLoop(model: model).run(request([read, edit]), events: RecordingSink())
        // The read after the edit runs again; the second edit, after only a read, gets its earlier result.
        #expect(read.maxTokensSeen.count == 2)
        #expect(edit.maxTokensSeen.count == 1)
    }

    /// A third identical call ends the tool rounds: the next request offers no tools, shows no
    /// calls and ends with the user's own message. No words of ours: small models echo them.
    @Test func theSameCallAThirdTimeAsksForTheAnswerWithoutOurWords() async throws {
        let read = FakeTool("readFile", output: "1: x")
        let same = #"{"path":"a.py"}"#
        let model = ScriptedModel([
            call("readFile", same), call("readFile", same),
            ChatReply(text: "", calls: [ModelToolCall(id: "k", name: "readFile", argumentsText: same),
                                        ModelToolCall(id: "l", name: "listDirectory", argumentsText: "{}")]),
            ChatReply(text: "Final."),
        ])
        let sink = RecordingSink()
        let loop = AgentLoop(model: model, detectDroppedToolMessages: false)
        let answer = try await loop.run(request([read], prompt: "What is in a.py?"), events: sink)
        #expect(answer.text == "Final.")
        #expect(read.maxTokensSeen.count == 1)
        #expect(sink.results.count == 2)  // the third call and the one after it were neither run nor recorded
        #expect(sink.notices.contains { $0.contains("same readFile call a third time") })
        let asking = model.sent[3]
        #expect(asking.tools.isEmpty)
        let users = (asking.messagesJSON.arrayValue ?? []).filter { $0["role"] == "user" }.compactMap { $0["content"]?.stringValue }
        #expect(users.last == "What is in a.py?")
        #expect(users.allSatisfy { $0 == "What is in a.py?" || $0.hasPrefix("readFile a.py:\n") })
        #expect(!asking.messagesJSON.jsonText.contains("tool_calls"))
        #expect(model.sent.dropLast().allSatisfy { $0.tools.count == 1 })
    }

    @Test func aModelThatKeepsCallingAfterTheAnswerRequestFails() async throws {
        let read = FakeTool("readFile", output: "1: x")
        let c = #"{"path":"a.py"}"#
        let model = ScriptedModel([call("readFile", c), call("readFile", c), call("readFile", c), call("readFile", c),
                                   ChatReply(text: "never asked")])
        let loop = AgentLoop(model: model, detectDroppedToolMessages: false)
        do {
            _ = try await loop.run(request([read]), events: RecordingSink())
            Issue.record("expected a backend error")
        } catch let error as AgentError {
            #expect(error.outcome == .backendError)
            #expect(error.message.contains("kept calling tools"))
            #expect(model.sent.count == 4)
        }
    }

    @Test func maxTurnsStopsWithErrorMaxTurns() async throws {
        let read = FakeTool("readFile", output: "1: x")
        let model = ScriptedModel((1...5).map { call("readFile", #"{"path":"f\#($0)"}"#) })
        do {
            _ = try await AgentLoop(model: model).run(request([read], maxTurns: 3), events: RecordingSink())
            Issue.record("expected max turns")
        } catch let error as AgentError {
            #expect(error.outcome == .maxTurns)
            #expect(error.progress.turns == 3)
            #expect(model.sent.count == 3)
            // The last turn asked for the answer; the model still only called.
            #expect(model.sent.map(\.tools.isEmpty) == [false, false, true])
        }
    }

    @Test func theLastTurnOfMaxTurnsAsksForTheAnswer() async throws {
        let read = FakeTool("readFile", output: "1: x")
        let model = ScriptedModel([call("readFile", #"{"path":"a"}"#), call("readFile", #"{"path":"b"}"#),
                                   ChatReply(text: "a and b hold x.")])
        let sink = RecordingSink()
        let answer = try await AgentLoop(model: model).run(request([read], maxTurns: 3, prompt: "Read a and b."),
                                                           events: sink)
        #expect(answer.text == "a and b hold x.")
        #expect(model.sent.map(\.tools.isEmpty) == [false, false, true])
        #expect(model.sent[2].entries.last == .user("Read a and b."))
        #expect(sink.notices.contains { $0.contains("one model turn of --max-turns is left") })
    }

    /// Less time left than twice the slowest request: the answer is asked for instead of another tool round,
    /// so the run ends with an answer rather than at --timeout.
    @Test func littleTimeLeftAsksForTheAnswer() async throws {
        let read = FakeTool("readFile", output: "1: x")
        // After a first request of 8 s or more at most 15.5 s are left, always under twice the slowest, and the
        // answer request still has that room on a loaded machine (7.5 s after a 4 s request was not always enough
        // with every suite in parallel on two cores at load 20: the room is below twice the first request's time,
        // so only a slower first request buys more).
        let model = SlowFirstReply(ScriptedModel([call("readFile", #"{"path":"a"}"#), ChatReply(text: "x.")]),
                                   seconds: 8)
        let sink = RecordingSink()
        let deadline = ContinuousClock.now + .milliseconds(23_500)
        let answer = try await AgentLoop(model: model).run(request([read], deadline: deadline), events: sink)
        #expect(answer.text == "x.")
        #expect(model.sent.map(\.tools.isEmpty) == [false, true])
        #expect(sink.notices.contains { $0.contains("s of --timeout are left") })
    }

    @Test func aRepeatRightAfterAToolMessageSwitchesToFoldedResults() async throws {
        let read = FakeTool("readFile", output: "1: hello")
        let c = #"{"path":"a.py"}"#
        let model = ScriptedModel([call("readFile", c), call("readFile", c), ChatReply(text: "hello")])
        let sink = RecordingSink()
        _ = try await AgentLoop(model: model).run(request([read]), events: sink)
        #expect(sink.notices.contains { $0.contains("drop role \"tool\"") })
        let messages = model.sent[2].messagesJSON.arrayValue ?? []
        #expect(!messages.contains { $0["role"] == "tool" })
        #expect(messages.last?["role"] == "user")
        #expect(messages.last?["content"]?.stringValue?.hasPrefix("Result of readFile:") == true)
    }

    @Test func instructionsAndToolsOverTheBudgetExitFourWithFigures() async throws {
        let read = FakeTool("readFile", output: "")
        do {
            _ = try await AgentLoop(model: ScriptedModel([])).run(request([read], context: 120), events: RecordingSink())
            Issue.record("expected a context error")
        } catch let error as AgentError {
            #expect(error.outcome == .context)
            #expect(error.outcome.exitCode == 4)
            #expect(error.message.contains("--context-tokens 120"))
            #expect(error.message.contains("instructions \(TokenEstimator.estimate(BuiltInInstructions.text))"))
        }
    }

    @Test func everyRequestFitsAndOlderResultsAreCondensedFirst() async throws {
        let big = String(repeating: "let value = compute(42) // a \"line\" of code\n", count: 400)  // ~18 KB
        let read = FakeTool("readFile", output: big)
        let model = ScriptedModel((1...6).map { call("readFile", #"{"path":"f\#($0).swift"}"#) } + [ChatReply(text: "done")])
        let sink = RecordingSink()
        let answer = try await AgentLoop(model: model).run(request([read], context: 2048), events: sink)
        #expect(answer.text == "done")
        #expect(model.sent.count == 7)
        for sent in model.sent { #expect(sent.estimatedTokens <= 2048) }
        #expect(read.maxTokensSeen.allSatisfy { $0 < 2048 })
        #expect(sink.events.contains { if case .toolResult(_, _, _, _, true) = $0.kind { true } else { false } })
        #expect(sink.notices.contains { $0.contains("condensed") })
        // In the last request the task is whole, older results are one line, the newest result is kept.
        let entries = model.sent.last?.entries ?? []
        #expect(entries.first == .user("Do the task."))
        let condensed = entries.compactMap { entry -> Bool? in
            if case .toolResult(_, _, _, _, let condensed) = entry { condensed } else { nil }
        }
        #expect(condensed.count == 6)
        #expect(condensed.last == false)
        #expect(condensed.dropLast().allSatisfy { $0 })
        // The newest result uses most of the room: the window is not wasted.
        #expect((model.sent.last?.estimatedTokens ?? 0) > 2048 * 3 / 4)
    }

    /// A call's huge arguments (a 20 KB `writeFile` content) stay in the history as the call; once
    /// it has run they are cut to a placeholder instead of the run ending with exit 4.
    @Test func hugeArgumentsOfACallThatRanAreCutSoEveryRequestFits() async throws {
        let write = FakeTool("writeFile", output: "wrote 20,000 bytes to big.txt", changes: ["big.txt"])
        let read = FakeTool("readFile", output: String(repeating: "line of the file\n", count: 40))
        let content = String(repeating: "0123456789abcdefghij\n", count: 1000)  // ~21 KB, digits cost 1 token
        let arguments = JSONValue.object(["path": "big.txt", "content": .string(content)]).jsonText
        let model = ScriptedModel([
            call("writeFile", arguments, id: "w1"),
            call("readFile", #"{"path":"big.txt"}"#, id: "r1"),
            call("readFile", #"{"path":"other.txt"}"#, id: "r2"),
            ChatReply(text: "Wrote and checked big.txt."),
        ])
        let sink = RecordingSink()
        let answer = try await AgentLoop(model: model).run(request([write, read], context: 4096), events: sink)
        #expect(answer.text == "Wrote and checked big.txt.")
        #expect(answer.progress.filesChanged == ["big.txt"])
        #expect(model.sent.count == 4)
        for sent in model.sent { #expect(sent.estimatedTokens <= 4096) }
        #expect(sink.notices.contains { $0.contains("cut the long arguments of 1") })
        // The call keeps its id and name and its result still follows it; the arguments stay valid JSON.
        let messages = model.sent[1].messagesJSON.arrayValue ?? []
        let assistant = messages.first { $0["role"] == "assistant" }
        let sentCall = assistant?["tool_calls"]?.arrayValue?.first
        #expect(sentCall?["id"] == "w1")
        #expect(sentCall?["function"]?["name"] == "writeFile")
        let sentArguments = try JSONValue.parse(sentCall?["function"]?["arguments"]?.stringValue ?? "")
        #expect(sentArguments["path"] == "big.txt")
        let placeholder = sentArguments["content"]?.stringValue ?? ""
        #expect(placeholder.hasPrefix("[21,000 bytes of text, starting \"0123456789abcdefghij"))
        #expect(placeholder.hasSuffix("; cut from the history]"))
        #expect(messages.last?["role"] == "tool")
        #expect(messages.last?["tool_call_id"] == "w1")
        // The task and the newest result stay whole.
        #expect(model.sent.last?.entries.first == .user("Do the task."))
        #expect(messages.last?["content"] == "wrote 20,000 bytes to big.txt")
        let newest = model.sent.last?.messagesJSON.arrayValue?.last
        #expect(newest?["content"] == .string(String(repeating: "line of the file\n", count: 40)))
    }

    @Test func shortArgumentsStayAndMalformedLongOnesBecomeValidJSON() {
        let short = ModelToolCall(id: "a", name: "readFile", argumentsText: #"{"path":"a.py"}"#)
        #expect(!short.hasLongArguments)
        #expect(short.withLongArgumentsCut == short)
        let malformed = ModelToolCall(id: "b", name: "writeFile",
                                      argumentsText: "{" + String(repeating: "x", count: 500))
        let cut = malformed.withLongArgumentsCut
        #expect((try? JSONValue.parse(cut.argumentsText))?["arguments"]?.stringValue?.hasPrefix("[501 bytes of "
            + "malformed JSON") == true)
        #expect(!cut.hasLongArguments)
        // Wide characters: the placeholder's quoted start is bounded in bytes, so it is never long itself.
        let emoji = JSONValue.object(["content": .string(String(repeating: "😀", count: 300))])
        let wide = ModelToolCall(id: "c", name: "writeFile", argumentsText: emoji.jsonText)
        #expect(wide.hasLongArguments)
        #expect(!wide.withLongArgumentsCut.hasLongArguments)
    }

    @Test func anExpiredDeadlineIsATimeoutWithThePartialAnswer() async throws {
        let reply = ChatReply(text: "Looking at it.", calls: [ModelToolCall(id: "a", name: "readFile", argumentsText: "{}")])
        let soon = ContinuousClock.now + .seconds(2)  // the tool takes 5 s
        do {
            _ = try await AgentLoop(model: ScriptedModel([reply])).run(request([SlowTool()], deadline: soon),
                                                                      events: RecordingSink())
            Issue.record("expected a timeout")
        } catch let error as AgentError {
            #expect(error.outcome == .timeout)
            #expect(error.partialAnswer == "Looking at it.")
            #expect(error.progress.turns == 1)
        }
    }
}

/// A model whose first reply takes `seconds`.
final class SlowFirstReply: ChatModel, @unchecked Sendable {
    let base: ScriptedModel
    let seconds: Int
    private let lock = NSLock()
    private var first = true

    init(_ base: ScriptedModel, seconds: Int) {
        self.base = base
        self.seconds = seconds
    }

    func complete(_ request: ChatRequest, onText: (String) -> Void) async throws -> ChatReply {
        if lock.withLock({ defer { first = false }; return first }) { try await Task.sleep(for: .seconds(seconds)) }
        return try await base.complete(request, onText: onText)
    }

    var sent: [ChatRequest] { base.sent }
}

/// A tool that takes longer than the deadline allows.
struct SlowTool: AgentTool {
    let spec = ToolSpec(name: "readFile", description: "Slow.", parameters: [])
    func run(_ arguments: ToolArguments, context: ToolContext) async -> ToolResult {
        try? await Task.sleep(for: .seconds(5))
        return ToolResult(text: "late", summary: "late")
    }
}

import AppleCodeTools

@Suite struct PromptOverheadTests {
    /// Built-in instructions + all seven tool definitions, as sent (OpenAI `tools` JSON), at most
    /// 600 estimated tokens. Printed so the figure shows in the test log.
    @Test func instructionsAndSevenToolDefinitionsFitIn600Tokens() {
        let specs = standardTools(readOnly: false, allowCommands: true).map(\.spec)
        #expect(specs.count == 7)
        let budget = ContextBudget(contextTokens: 4096, instructions: BuiltInInstructions.text, tools: specs)
        print("prompt overhead: instructions \(budget.instructionTokens) + tool definitions \(budget.toolTokens) "
              + "= \(budget.fixedTokens) estimated tokens")
        #expect(budget.fixedTokens <= 600)
    }
}
