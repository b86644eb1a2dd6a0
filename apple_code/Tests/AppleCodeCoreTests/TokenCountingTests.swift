import AppleCodeCore
import Synchronization
import Testing

/// ExactFit and TokenRate: results fitted to a room counted by a model's tokenizer (here: one token per 2 bytes,
/// denser than the estimator's 3 bytes, so an estimated budget alone would overshoot).
@Suite struct TokenCountingTests {
    static func dense(_ text: String) async -> Int? { (text.utf8.count + 1) / 2 }

    /// Numbered lines up to its estimated budget, as readFile does; records the budgets it was given.
    final class LinesTool: AgentTool {
        let spec: ToolSpec
        private let budgets = Mutex<[Int]>([])

        init(_ name: String) {
            spec = ToolSpec(name: name, description: "", parameters: [])
        }

        func run(_ arguments: ToolArguments, context: ToolContext) async -> ToolResult {
            budgets.withLock { $0.append(context.maxResultTokens) }
            var text = ""
            for number in 1...500 {
                let line = "line \(number): some text of the file\n"
                if TokenEstimator.estimate(text + line) > context.maxResultTokens { break }
                text += line
            }
            return ToolResult(text: text, summary: "lines")
        }

        var given: [Int] { budgets.withLock { $0 } }
    }

    @Test func theRateIsMeasuredAndBudgetsAreConverted() {
        var rate = TokenRate()
        #expect(rate.ratio == 1)
        let text = String(repeating: "abcdef ", count: 300)
        rate.record(counted: 1050, text: text)
        #expect(abs(rate.ratio - 1050.0 / Double(TokenEstimator.estimate(text))) < 1e-9)
        // 5% under the rate: a denser text still fits at the first try.
        #expect(rate.estimatedBudget(forCounted: 1000) == Int(1000 / (rate.ratio * 1.05)))
    }

    @Test func aReadOnlyToolOverItsRoomRunsAgainAndEndsAtALine() async {
        let tool = LinesTool("readFile")
        let (result, tokens) = await ExactFit.run(tool, raw: .object([:]), context: ToolContext(workspace: "/w",
            maxResultTokens: 0), room: 600, rate: TokenRate(), count: Self.dense)
        #expect(tool.given.count == 2 && tool.given[1] < tool.given[0])
        #expect(tokens == (result.text.utf8.count + 1) / 2 && (tokens ?? 0) <= 600)
        #expect(!result.text.contains("cut to fit") && result.text.hasSuffix("of the file\n"))
        // Most of the room is used.
        #expect((tokens ?? 0) > 540)
    }

    @Test func anyOtherToolOverItsRoomIsCutOnce() async {
        let tool = LinesTool("runCommand")
        let (result, tokens) = await ExactFit.run(tool, raw: .object([:]), context: ToolContext(workspace: "/w",
            maxResultTokens: 0), room: 600, rate: TokenRate(), count: Self.dense)
        #expect(tool.given.count == 1)
        #expect(result.truncated && result.text.contains("cut to fit the context budget"))
        #expect((tokens ?? 601) <= 600 && (tokens ?? 0) > 500)
    }

    @Test func withoutACounterTheRoomIsInEstimatedTokens() async {
        let tool = LinesTool("readFile")
        let (result, tokens) = await ExactFit.run(tool, raw: .object([:]), context: ToolContext(workspace: "/w",
            maxResultTokens: 0), room: 600, rate: TokenRate(), count: nil)
        #expect(tool.given == [600] && tokens == nil)
        #expect(TokenEstimator.estimate(result.text) <= 600)
    }

    @Test func cuttingConvergesOnTheCountedLimit() async {
        let text = String(repeating: "漢字 and ASCII 123\n", count: 400)
        let count: (String) async -> Int? = { $0.utf8.count }  // denser than any estimate
        let cut = await ExactFit.cut(text, toTokens: 1000, count: count)
        #expect((cut.tokens ?? 1001) <= 1000 && (cut.tokens ?? 0) > 800)
        #expect(cut.text.contains("cut to fit the context budget"))
    }
}
