import AppleCodeCore
import Foundation
import Testing
@testable import AppleCodeAgent

/// `--verify` in the agent loop: a failing check goes back to the model with the tools.
@Suite struct VerifyLoopTests {
    final class Check: @unchecked Sendable {
        private let lock = NSLock()
        var passes: [Bool]
        init(_ passes: [Bool]) { self.passes = passes }
        func verification(rounds: Int = 2) -> Verification {
            Verification(VerifyCheck(command: "make test", rounds: rounds) { _ in
                let passed = self.lock.withLock { self.passes.isEmpty ? true : self.passes.removeFirst() }
                return CheckRun(passed: passed, exitCode: passed ? 0 : 1, output: passed ? "ok" : "FAIL: test_add")
            })
        }
    }

    func verifiedRequest(_ tools: [any AgentTool], _ verification: Verification, maxTurns: Int = 16) -> AgentRequest {
        var verified = request(tools, maxTurns: maxTurns)
        verified.verify = verification
        return verified
    }

    @Test func aFailedCheckGoesBackWithTheToolsAndTheNextAnswerIsChecked() async throws {
        let read = FakeTool("readFile", output: "def add(a, b): return a - b")
        let model = ScriptedModel([
            call("readFile", #"{"path":"calc.py"}"#),
            ChatReply(text: "Done."),
            call("readFile", #"{"path":"calc.py"}"#),
            ChatReply(text: "Fixed."),
        ])
        let sink = RecordingSink()
        let answer = try await AgentLoop(model: model).run(verifiedRequest([read], Check([false, true]).verification()),
                                                           events: sink)
        #expect(answer.text == "Fixed.")
        #expect(answer.progress.verify?.passed == true && answer.progress.verify?.rounds == 1)
        #expect(answer.progress.turns == 4)
        let third = model.sent[2]
        #expect(!third.tools.isEmpty)
        guard case .user(let feedback) = third.entries.last else {
            Issue.record("no feedback: \(third.entries)")
            return
        }
        #expect(feedback.hasPrefix("The check `make test` failed (exit code 1)"))
        // The same read after the failure runs again: the check may have changed what it reads.
        let results = sink.results.map(\.summary)
        #expect(results == ["readFile calc.py", "readFile calc.py"])
        let reports = sink.events.compactMap { if case .verify(let report) = $0.kind { report } else { nil } }
        #expect(reports.map(\.passed) == [false, true])
    }

    /// A check that passed before the work cannot show an unchanged workspace done: that answer goes back once,
    /// and the answer after an edit stands.
    @Test func anAnswerThatChangedNothingUnderACheckThatAlreadyPassedGoesBackOnce() async throws {
        let edit = FakeTool("editFile", output: "edited", changes: ["config.json"])
        let model = ScriptedModel([
            ChatReply(text: "The port is now 8080."),
            call("editFile", #"{"path":"config.json"}"#),
            ChatReply(text: "Set."),
        ])
        var verification = Check([true, true, true]).verification()
        _ = await verification.baseline(deadline: nil, events: RecordingSink(), feedbackTokens: 200)
        let answer = try await AgentLoop(model: model).run(verifiedRequest([edit], verification), events: RecordingSink())
        #expect(answer.text == "Set.")
        #expect(answer.progress.filesChanged == ["config.json"])
        #expect(model.sent[1].entries.last == .user(Verification.nothingChanged("make test")))
        #expect(!model.sent[1].tools.isEmpty)
    }

    /// Where the server takes a required tool choice, a repair round's first request requires a call (any tool):
    /// a round exists to change something, and small models answer the failure in prose. Later requests do not.
    @Test func aRepairRoundsFirstRequestRequiresACall() async throws {
        let read = FakeTool("readFile", output: "def add(a, b): return a - b")
        let list = FakeTool("listDirectory", output: "calc.py (file)")
        let model = ScriptedModel([
            call("readFile", #"{"path":"calc.py"}"#),
            ChatReply(text: "Done."),
            call("readFile", #"{"path":"calc.py"}"#),
            ChatReply(text: "Fixed."),
        ])
        let verified = verifiedRequest([read, list], Check([false, true]).verification())
        _ = try await AgentLoop(model: model, looksFirst: true).run(verified, events: RecordingSink())
        #expect(model.sent.map(\.mustCallOneOf) == [["readFile", "listDirectory"], nil, ["readFile", "listDirectory"], nil])
        // Without a server that takes it, nothing is required.
        let plain = ScriptedModel([ChatReply(text: "Done."), ChatReply(text: "Fixed.")])
        _ = try await AgentLoop(model: plain).run(verifiedRequest([read], Check([false, true]).verification()),
                                                  events: RecordingSink())
        #expect(plain.sent.map(\.mustCallOneOf) == [nil, nil])
    }

    @Test func stillFailingAfterTheRoundsIsErrorVerifyWithTheLastAnswer() async throws {
        let edit = FakeTool("editFile", output: "edited", changes: ["a.py"])
        let model = ScriptedModel([call("editFile", #"{"path":"a.py"}"#), ChatReply(text: "One."),
                                   ChatReply(text: "Two.")])
        do {
            _ = try await AgentLoop(model: model).run(verifiedRequest([edit], Check([false, false]).verification(rounds: 1)),
                                                      events: RecordingSink())
            Issue.record("no error")
        } catch let error as AgentError {
            #expect(error.outcome == .verify)
            #expect(error.partialAnswer == "Two.")
            #expect(error.progress.filesChanged == ["a.py"])
            #expect(error.progress.verify?.runs == 2 && error.progress.verify?.rounds == 1)
            #expect(error.message == "the check `make test` still fails after 1 repair round, exit code 1: FAIL: test_add")
        }
        // The earlier failure shrank to its first line when the newer one came.
        #expect(model.sent.count == 3)
    }

    @Test func withoutVerifyTheAnswerEndsTheRun() async throws {
        let model = ScriptedModel([ChatReply(text: "Done.")])
        let answer = try await AgentLoop(model: model).run(request([FakeTool("readFile", output: "x")]),
                                                           events: RecordingSink())
        #expect(answer.progress.verify == nil)
    }
}
