import AppleCodeCore
import Foundation
import Testing
@testable import AppleCodeAgent

/// A tokenizer denser than the estimator on ASCII (a quarter token a byte), as real ones are; records each text.
final class QuarterCounter: TokenCounter, @unchecked Sendable {
    let source = "a test tokenizer"
    private let lock = NSLock()
    private var texts: [String] = []
    let works: Bool

    init(works: Bool = true) { self.works = works }

    func count(_ text: String) async -> Int? {
        lock.withLock { texts.append(text) }
        return works ? (text.utf8.count + 3) / 4 : nil
    }

    var counted: [String] { lock.withLock { texts } }
}

/// A server that reports `usage.prompt_tokens`: its tokenizer over the request's texts plus what its template adds
/// (`overhead` for the request, `perMessage` for each message).
final class ReportingModel: ChatModel, @unchecked Sendable {
    private let lock = NSLock()
    private var replies: [ChatReply]
    private var requests: [(ChatRequest, Int)] = []
    let overhead: Int
    let perMessage: Int

    init(_ replies: [ChatReply], overhead: Int = 40, perMessage: Int = 6) {
        self.replies = replies
        self.overhead = overhead
        self.perMessage = perMessage
    }

    static func tokens(_ text: String) -> Int { (text.utf8.count + 3) / 4 }

    /// The prompt as this server counts it.
    func real(_ chat: ChatRequest) -> Int {
        let (texts, messages) = RequestTexts.pieces(chat)
        return texts.map(Self.tokens).reduce(0, +) + messages * perMessage + overhead
    }

    func complete(_ request: ChatRequest, onText: (String) -> Void) async throws -> ChatReply {
        let prompt = real(request)
        var reply = try lock.withLock {
            requests.append((request, prompt))
            guard !replies.isEmpty else { throw AgentError(.backendError, "script exhausted") }
            return replies.removeFirst()
        }
        reply.promptTokens = prompt
        reply.completionTokens = 5
        onText(reply.text)
        return reply
    }

    /// Each request's real prompt tokens plus its answer reserve: what must fit the window.
    var sizes: [Int] { lock.withLock { requests.map { $0.1 + $0.0.maxTokens } } }

    /// The longest tool result any request carried (bytes).
    var longestResult: Int {
        lock.withLock {
            requests.flatMap { $0.0.entries }.map { entry in
                if case .toolResult(_, _, let text, _, false) = entry { text.utf8.count } else { 0 }
            }.max() ?? 0
        }
    }
}

/// The openai loop learns the real counts during a run.
@Suite struct ExactBudgetTests {
    @Test func calibrationKeepsTheLargestDifferenceAndAMargin() {
        var calibration = PromptCalibration()
        let key = PromptCalibration.Key(exact: true, withTools: true)
        #expect(calibration.figure(key, counted: 1000) == nil)
        calibration.learn(key, counted: 1000, reported: 900)
        #expect(calibration.figure(key, counted: 1000) == 1000 - 100 + 20)  // margin: 2% of 1000
        calibration.learn(key, counted: 2000, reported: 1850)  // a smaller difference is not trusted
        calibration.learn(key, counted: 500, reported: 450)
        #expect(calibration.offset(key) == -50)
        #expect(calibration.firstOffsets[key] == -100)
        #expect(calibration.figure(key, counted: 100) == 100 - 50 + 8)  // margin at least 8
        #expect(calibration.figure(.init(exact: true, withTools: false), counted: 100) == nil)
    }

    /// A result too big for the window is cut to the room the server's counts leave, which is more than the
    /// estimator leaves; every request still fits the window as the server counts it.
    @Test func exactCountsGiveResultsTheRealRoomAndEveryRequestFits() async throws {
        let big = (1...400).map { "line \($0): let total = order.amount * rate // keep it" }.joined(separator: "\n")
        func run(counter: QuarterCounter?) async throws -> (ReportingModel, RecordingSink, AgentAnswer) {
            let read = FakeTool("readFile", output: big)
            let model = ReportingModel([call("readFile", #"{"path":"a"}"#), call("readFile", #"{"path":"b"}"#),
                                        ChatReply(text: "Done.")])
            let sink = RecordingSink()
            let loop = AgentLoop(model: model, detectDroppedToolMessages: false, counter: counter)
            return (model, sink, try await loop.run(request([read]), events: sink))
        }
        let counter = QuarterCounter()
        let (exact, _, exactAnswer) = try await run(counter: counter)
        let (plain, _, _) = try await run(counter: nil)
        for size in exact.sizes { #expect(size <= 4096) }
        #expect(exactAnswer.progress.usage.estimated == false)
        // The fixed overhead in the server's tokens: instructions and tools with the template's share of them.
        let bare = ChatRequest(system: BuiltInInstructions.text, entries: [], tools: [FakeTool("readFile", output: "").spec],
                               maxTokens: 0, style: .toolMessages)
        let fixed = exactAnswer.progress.usage.fixedTokens ?? 0
        #expect(abs(fixed - exact.real(bare)) <= 4, "\(fixed) vs \(exact.real(bare))")
        #expect(exact.longestResult > plain.longestResult * 13 / 10, "\(exact.longestResult) vs \(plain.longestResult)")
        // Without a tokenizer, the server's usage still corrects the estimate (calibrated); never past the window.
        for size in plain.sizes { #expect(size <= 4096) }
        #expect(!counter.counted.isEmpty)
    }

    /// A tokenizer that cannot count leaves the estimate corrected by the server's usage.
    @Test func aTokenizerThatFailsLeavesTheCalibratedEstimate() async throws {
        let logs = LogLines()
        let model = ReportingModel([call("readFile", #"{"path":"a"}"#), ChatReply(text: "Done.")])
        let loop = AgentLoop(model: model, detectDroppedToolMessages: false, counter: QuarterCounter(works: false))
        var req = request([FakeTool("readFile", output: "x")])
        req.log = { logs.append($0) }
        let answer = try await loop.run(req, events: RecordingSink())
        #expect(answer.text == "Done.")
        #expect(logs.lines.contains { $0.hasPrefix("budget: estimated tokens corrected by") })
        #expect(logs.lines.contains { $0.contains("of 4096 calibrated tokens") })
        #expect(answer.progress.usage.estimated)  // the fixed overhead is the estimator's
    }
}
