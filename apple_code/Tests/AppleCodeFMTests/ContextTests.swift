// Linux only: these run the backend on the mirror's scripted model (macOS builds have the real framework).
#if !canImport(FoundationModels)
import AppleCodeCore
import FoundationModelsMirror
import Testing
@testable import AppleCodeFM

@Suite struct ContextTests {
    static let overflowText = "Content contains 4090 tokens, which exceeds the maximum allowed context size of 4096."

    @Test func toolDefinitionsAloneOverTheWindowIsExit4BeforeAnyRequest() async {
        let wordy = (1...8).map { FakeTool("tool\($0)", description: String(repeating: "very long description ", count: 20)) }
        let (backend, script) = scriptedBackend([[.snapshots(["never"])]])
        let log = LogLines()
        let error = await runFailure(backend, request(tools: wordy, contextTokens: 1000, log: log))
        #expect(error?.outcome == .context)
        #expect(error?.outcome.exitCode == 4)
        #expect(error?.message.contains("--context-tokens 1000") == true)
        #expect(script.requests.isEmpty)
        #expect(log.all.contains { $0.hasPrefix("fm budget (estimated tokens): window 1000") })
    }

    @Test func theBudgetCountsInstructionsAndEveryToolDefinition() {
        let tools = [FakeTool("readFile").spec, FakeTool("writeFile").spec]
        let plan = ContextPlan(window: 4096, instructions: "Be brief.", tools: tools)
        #expect(plan.instructionsTokens == TokenEstimator.estimate("Be brief."))
        #expect(plan.toolTokens == ContextBudget.toolDefinitionTokens(tools))
        #expect(plan.workingTokens == 4096 - plan.fixedTokens - plan.answerReserve)
        #expect(throws: Never.self) { try plan.budget.check(task: "Fix it") }
    }

    @Test func overflowStartsANewWindowWithACondensedPrompt() async throws {
        let write = FakeTool("writeFile") { _ in
            ToolResult(text: "wrote 10 bytes", summary: "wrote src/app.py", filesChanged: ["src/app.py"])
        }
        let (backend, script) = scriptedBackend([
            [.callTool("writeFile", args(#"{"path":"src/app.py"}"#)),
             .fail(.exceededContextWindowSize(context(Self.overflowText)))],
            [.snapshots(["All done."])],
        ])
        let sink = RecordingSink()
        let log = LogLines()
        let answer = try await backend.run(request("Add a main function", tools: [write], log: log), events: sink)

        #expect(answer.text == "All done.")
        #expect(answer.progress.filesChanged == ["src/app.py"])
        #expect(sink.notices == ["context full: continued in a new window with a condensed history (1 of 3)"])
        let requests = script.requests
        #expect(requests.count == 2)
        let condensed = requests[1].prompt
        #expect(condensed.contains("Task:\nAdd a main function"))
        #expect(condensed.contains(#"1. writeFile {"path":"src/app.py"} -> wrote src/app.py"#))
        #expect(condensed.contains("Files changed so far: src/app.py"))
        #expect(requests[1].toolNames == ["writeFile"])
        #expect(log.all.contains { $0.contains("fm context overflow") && $0.contains(Self.overflowText) })
    }

    @Test func afterThreeFreshWindowsTheRunFails() async {
        let overflow = MirrorStep.fail(.exceededContextWindowSize(context(Self.overflowText)))
        let (backend, script) = scriptedBackend(Array(repeating: [overflow], count: 5))
        let sink = RecordingSink()
        let error = await runFailure(backend, request(), sink)
        #expect(error?.outcome == .backendError)
        #expect(error?.message.contains("even after 3 fresh windows") == true)
        #expect(script.requests.count == 4)
        #expect(sink.notices.count == 3)
        #expect(sink.notices.last?.hasSuffix("(3 of 3)") == true)
    }

    @Test func anUntypedOverflowErrorIsRecognisedByItsText() async throws {
        struct PlainError: Error, CustomStringConvertible {
            var description: String { "LanguageModelError.contextSizeExceeded: too many tokens" }
        }
        let (backend, script) = scriptedBackend([[.failWith(PlainError())], [.snapshots(["ok"])]])
        let answer = try await backend.run(request(), events: RecordingSink())
        #expect(answer.text == "ok")
        #expect(script.requests.count == 2)
    }

    @Test func anOverlongTaskIsCutWithANotice() async throws {
        let (backend, script) = scriptedBackend([[.snapshots(["ok"])]])
        let sink = RecordingSink()
        // Fits the window (no exit 4) but would leave too little room for tool results.
        _ = try await backend.run(request(String(repeating: "word ", count: 1800), tools: []), events: sink)
        let plan = ContextPlan(window: 4096, instructions: "You are a careful coding agent.", tools: [])
        #expect(TokenEstimator.estimate(script.requests.first?.prompt ?? "") <= plan.promptLimit)
        #expect(sink.notices == ["the task was cut to fit the 4096-token context window"])
    }

    @Test func aTaskLargerThanTheWindowIsExit4() async {
        let (backend, script) = scriptedBackend([[.snapshots(["never"])]])
        let error = await runFailure(backend, request(String(repeating: "word ", count: 5000)))
        #expect(error?.outcome == .context)
        #expect(script.requests.isEmpty)
    }
}
#endif
