import AppleCodeCore
import Testing
@testable import AppleCodeFM

/// The backend's framework-free logic; runs on macOS too.
@Suite struct LogicTests {
    @Test func cumulativeSnapshotsBecomeDeltas() {
        var deltas = SnapshotDeltas()
        #expect(deltas.next("Hel") == .append("Hel"))
        #expect(deltas.next("Hello") == .append("lo"))
        #expect(deltas.next("Hello") == .none)
        #expect(deltas.next("Hello world") == .append(" world"))
        #expect(deltas.next("Hi there") == .restart("Hi there"))
        #expect(deltas.next("Hi there!") == .append("!"))
        #expect(deltas.text == "Hi there!")
    }

    @Test func condensedPromptKeepsTheNewestStepsWithinItsLimit() {
        let journal = (1...200).map {
            JournalEntry(tool: "readFile", arguments: #"{"path":"file\#($0).py"}"#, summary: "42 lines", ok: true)
        }
        let prompt = CondensedPrompt.make(task: "Refactor", journal: journal, filesChanged: ["a.py"],
                                          partialAnswer: "So far", maxTokens: 400)
        #expect(TokenEstimator.estimate(prompt) <= 400)
        #expect(prompt.contains("200. readFile"))
        #expect(!prompt.contains("\n1. readFile"))
        #expect(prompt.contains("earlier steps omitted"))
        #expect(prompt.contains("Your answer so far (cut): So far"))
    }

    @Test func retriesStopBeforeTheDeadline() {
        let policy = RetryPolicy(firstDelay: .seconds(1), maxDelay: .seconds(8), maxRetries: 6)
        let now = ContinuousClock.now
        #expect(policy.delay(retry: 1, deadline: nil, now: now) == .seconds(1))
        #expect(policy.delay(retry: 3, deadline: nil, now: now) == .seconds(4))
        #expect(policy.delay(retry: 5, deadline: nil, now: now) == .seconds(8))
        #expect(policy.delay(retry: 7, deadline: nil, now: now) == nil)
        #expect(policy.delay(retry: 3, deadline: now + .seconds(3), now: now) == nil)
    }

    @Test func textFallbackClassifiesUntypedErrors() {
        #expect(ResponseFailure.classify(description: "GenerationError.rateLimited")
            == .busy("GenerationError.rateLimited"))
        #expect(ResponseFailure.classify(description: "x guardrailViolation y")
            == .guardrail(ResponseFailure.guardrailMessage, "x guardrailViolation y"))
        #expect(ResponseFailure.classify(description: "x refusal y")
            == .fatal(.guardrail, "Apple's on-device model refused this request (x refusal y)"))
        #expect(ResponseFailure(CancellationError()) == .cancelled)
    }
}
