// Linux only: the budget on the model's own token counts (`tokenCount(for:)`, 26.4), on the mirror's scripted model,
// whose sessions enforce their window with the same deterministic tokenizer (MirrorTokenizer).
#if !canImport(FoundationModels)
import AppleCodeCore
import FoundationModelsMirror
import Testing
@testable import AppleCodeFM

@Suite struct TokenCountTests {
    static let instructions = "You are a careful coding agent."

    static func backend(_ turns: [[MirrorStep]], countsTokens: Bool = true) -> (FoundationModelsBackend, MirrorScript) {
        scriptedBackend(turns, countsTokens: countsTokens)
    }

    /// CJK text: the estimator counts 0.7 a byte, the scripted model's tokenizer 1 (as real tokenizers often do).
    static let wide = String(repeating: "漢字テキスト", count: 500)

    @Test func theBudgetIsCountedByTheModel() async throws {
        let tool = FakeTool("readFile")
        let (backend, _) = Self.backend([[.callTool("readFile", args(#"{"path":"a.py"}"#)), .snapshots(["Done."])]])
        let log = LogLines()
        let answer = try await backend.run(request(tools: [tool], log: log), events: RecordingSink())

        let schema = try FrameworkTool.schema(for: tool.spec)
        let instructions = MirrorTokenizer.entry(Self.instructions)
        let tools = MirrorTokenizer.entry(tool.spec.name + tool.spec.description + schema.debugDescription)
        let figures = try #require(log.all.first { $0.hasPrefix("fm budget") })
        #expect(figures.hasPrefix("fm budget (exact tokens, SystemLanguageModel.tokenCount): window 4096, "
                                  + "instructions \(instructions), tool definitions \(tools), "))
        #expect(answer.progress.usage.estimated == false)
        #expect(answer.progress.usage.fixedTokens == instructions + tools)
        // Input: instructions, tools and the prompt, then the tool's result, all counted by the model.
        let prompt = MirrorTokenizer.entry("Fix the bug in a.py")
        #expect(answer.progress.usage.inputTokens == instructions + tools + prompt + MirrorTokenizer.entry("ok"))
    }

    @Test func withoutTheModelsCountsTheEstimatorBudgets() async throws {
        let (backend, _) = Self.backend([[.snapshots(["Done."])]], countsTokens: false)
        let log = LogLines()
        let answer = try await backend.run(request(log: log), events: RecordingSink())
        #expect(log.all.contains { $0.hasPrefix("fm budget (estimated tokens): window 4096, instructions "
                                                + "\(TokenEstimator.estimate(Self.instructions)),") })
        #expect(answer.progress.usage.estimated == true)
    }

    /// Results the estimator under-counts overflowed the window; counted by the model they are cut to fit.
    @Test func resultsTheEstimatorUnderCountsNoLongerOverflow() async throws {
        let tool = FakeTool("readFile") { _ in ToolResult(text: Self.wide, summary: "wide text") }
        let (backend, script) = Self.backend([[
            .callTool("readFile", args(#"{"path":"a.txt"}"#)), .callTool("readFile", args(#"{"path":"b.txt"}"#)),
            .snapshots(["Read both."]),
        ]])
        let sink = RecordingSink()
        let answer = try await backend.run(request(tools: [tool]), events: sink)
        #expect(answer.text == "Read both.")
        #expect(sink.notices.isEmpty, "\(sink.notices)")
        #expect(script.requests.count == 1)
        let outputs = script.requests[0].toolExchanges.map(\.output)
        #expect(outputs.count == 2 && outputs.allSatisfy { $0.contains("cut to fit the context budget") })
    }

    /// Results the tools make too big are cut to what the window has left, counted by the model: four calls fill
    /// the window to its answer reserve, never past it.
    @Test func resultsShareTheWindowAsTheModelCountsIt() async throws {
        let big = String(repeating: "x = 1 # filler\n", count: 2000)
        let run = FakeTool("runCommand", [ParameterSpec("command", .string, "")]) { _ in
            ToolResult(text: big, summary: "ran")
        }
        let call = MirrorStep.callTool("runCommand", args(#"{"command":"make"}"#))
        let (backend, script) = Self.backend([[call, call, call, call, .snapshots(["ok"])]])
        let sink = RecordingSink()
        let answer = try await backend.run(request(tools: [run]), events: sink)
        #expect(answer.text == "ok" && sink.notices.isEmpty)
        let outputs = script.requests[0].toolExchanges.map(\.output)
        #expect(outputs.count == 4)
        let used = outputs.reduce(0) { $0 + MirrorTokenizer.entry($1) }
        let reserve = ContextBudget.answerReserve(contextTokens: 4096)
        #expect(used > 4096 - reserve - 400, "the results used only \(used) tokens")
        #expect(used < 4096 - reserve)
    }

    /// ASCII counts lower with the model's tokenizer than with the estimator: the same window gives a tool a
    /// larger budget (in the estimated tokens tools cut by).
    @Test func exactCountsGiveToolsMoreRoom() async throws {
        func budget(countsTokens: Bool) async throws -> Int {
            let tool = FakeTool("readFile")
            let (backend, _) = Self.backend([[.callTool("readFile", args(#"{"path":"a.py"}"#)), .snapshots(["ok"])]],
                                            countsTokens: countsTokens)
            _ = try await backend.run(request(tools: [tool]), events: RecordingSink())
            return try #require(tool.budgets.first)
        }
        let estimated = try await budget(countsTokens: false)
        let exact = try await budget(countsTokens: true)
        #expect(Double(exact) > Double(estimated) * 1.2, "exact \(exact), estimated \(estimated)")
    }
}
#endif
