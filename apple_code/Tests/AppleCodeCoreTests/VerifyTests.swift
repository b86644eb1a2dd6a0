import Foundation
import Testing
@testable import AppleCodeCore

/// Replays check outcomes in order and counts the runs.
final class ScriptedCheck: @unchecked Sendable {
    private let lock = NSLock()
    private var outcomes: [CheckRun]
    private(set) var runs = 0

    init(_ outcomes: [CheckRun]) { self.outcomes = outcomes }

    func check(rounds: Int = 2) -> VerifyCheck {
        VerifyCheck(command: "make test", rounds: rounds) { _ in
            self.lock.withLock {
                self.runs += 1
                return self.outcomes.isEmpty ? CheckRun(passed: true, exitCode: 0, output: "ok") : self.outcomes.removeFirst()
            }
        }
    }
}

final class Events: EventSink, @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [AgentEvent.Kind] = []
    func emit(_ event: AgentEvent) { lock.withLock { stored.append(event.kind) } }
    var reports: [VerifyReport] { lock.withLock { stored.compactMap { if case .verify(let r) = $0 { r } else { nil } } } }
}

let failing = CheckRun(passed: false, exitCode: 2, output: "exit code 2\nbuilding\nFAIL: test_add\n")

@Suite struct VerifyTests {
    @Test func aFailureIsRepairedWhileRoundsAreLeftThenFails() async {
        var verification = Verification(ScriptedCheck([failing, failing, failing]).check(rounds: 2))
        let events = Events()
        var verdicts: [Verification.Verdict] = []
        for _ in 0..<3 {
            verdicts.append(await verification.verify(deadline: nil, events: events, feedbackTokens: 500))
        }
        guard case .repair(let feedback) = verdicts[0], case .repair = verdicts[1] else {
            Issue.record("\(verdicts)")
            return
        }
        #expect(feedback == "The check `make test` failed (exit code 2). The end of its output:\nexit code 2\nbuilding\n"
            + "FAIL: test_add\nFix what it shows, using the tools, then answer again.")
        #expect(verdicts[2] == .failed("the check `make test` still fails after 2 repair rounds, exit code 2: FAIL: test_add"))
        #expect(events.reports.map(\.rounds) == [1, 2, 2])
        #expect(events.reports.map(\.runs) == [1, 2, 3])
        #expect(verification.report == VerifyReport(command: "make test", passed: false, rounds: 2, runs: 3, exitCode: 2,
                                                    outputTail: "exit code 2\nbuilding\nFAIL: test_add"))
    }

    @Test func aPassingCheckEndsIt() async {
        var verification = Verification(ScriptedCheck([failing]).check())
        let events = Events()
        _ = await verification.verify(deadline: nil, events: events, feedbackTokens: 500)
        #expect(await verification.verify(deadline: nil, events: events, feedbackTokens: 500) == .passed)
        #expect(verification.report.passed && verification.report.rounds == 1 && verification.report.exitCode == 0)
    }

    @Test func aCheckThatPassedBeforeTheWorkSendsBackOnceAnAnswerThatChangedNothing() async {
        let passing = CheckRun(passed: true, exitCode: 0, output: "exit code 0\nOK")
        var verification = Verification(ScriptedCheck([passing, passing, passing]).check(rounds: 2))
        let events = Events()
        #expect(await verification.baseline(deadline: nil, events: events, feedbackTokens: 500) == nil)
        #expect(await verification.verify(deadline: nil, events: events, feedbackTokens: 500, changedFiles: false)
            == .repair(Verification.nothingChanged("make test")))
        #expect(await verification.verify(deadline: nil, events: events, feedbackTokens: 500, changedFiles: false)
            == .passed)  // once: the task may have needed no change
        #expect(verification.report.rounds == 1 && verification.report.passed)

        var changed = Verification(ScriptedCheck([passing, passing]).check())
        _ = await changed.baseline(deadline: nil, events: events, feedbackTokens: 500)
        #expect(await changed.verify(deadline: nil, events: events, feedbackTokens: 500, changedFiles: true) == .passed)

        var failedBefore = Verification(ScriptedCheck([failing, passing]).check())
        _ = await failedBefore.baseline(deadline: nil, events: events, feedbackTokens: 500)
        #expect(await failedBefore.verify(deadline: nil, events: events, feedbackTokens: 500, changedFiles: false)
            == .passed)  // the check itself shows the work

        var noRounds = Verification(ScriptedCheck([passing, passing]).check(rounds: 0))
        _ = await noRounds.baseline(deadline: nil, events: events, feedbackTokens: 500)
        #expect(await noRounds.verify(deadline: nil, events: events, feedbackTokens: 500, changedFiles: false) == .passed)
    }

    @Test func noRoomForARoundFailsAtOnceAndSaysWhy() async {
        var verification = Verification(ScriptedCheck([failing]).check())
        let verdict = await verification.verify(deadline: nil, events: Events(), feedbackTokens: 500,
                                                cannotRepair: "no turns left")
        #expect(verdict == .failed("the check `make test` still fails after 0 repair rounds (no turns left), exit code "
            + "2: FAIL: test_add"))
        #expect(verification.report.rounds == 0)
    }

    @Test func theFeedbackKeepsTheEndOfALongOutputWithinItsTokens() async {
        let output = (1...2000).map { "line \($0) of the test output" }.joined(separator: "\n")
        var verification = Verification(ScriptedCheck([CheckRun(passed: false, exitCode: 1, output: output)]).check())
        guard case .repair(let feedback) = await verification.verify(deadline: nil, events: Events(),
                                                                      feedbackTokens: 300) else {
            Issue.record("no repair")
            return
        }
        #expect(TokenEstimator.estimate(feedback) <= 300)
        #expect(feedback.contains("\nline 2000 of the test output\nFix what it shows"))
        // The kept part starts at a line.
        let kept = feedback.components(separatedBy: "The end of its output:\n")[1]
        #expect(kept.hasPrefix("line "))
        #expect(verification.report.outputTail.utf8.count <= VerifyReport.tailBytes)
        #expect(verification.report.outputTail.hasPrefix("line "))
    }

    @Test func theReportIsTheEventAndTheResultObject() {
        let report = VerifyReport(command: "pytest", passed: false, rounds: 1, runs: 2, exitCode: nil, outputTail: "x")
        #expect(AgentEvent(.verify(report)).json.jsonText
            == #"{"type":"verify","command":"pytest","passed":false,"rounds":1,"runs":2,"output_tail":"x"}"#)
        var progress = RunProgress()
        progress.merge(RunProgress(verify: report))
        let result = RunReport(outcome: .verify, result: "r", durationMs: 1, progress: progress, backend: "b", model: "m")
        #expect(result.json["verify"] == report.json)
        #expect(result.json["subtype"] == "error_verify" && RunOutcome.verify.exitCode == 5)
        #expect(RunReport(outcome: .success, result: "", durationMs: 1, progress: RunProgress(), backend: "", model: "")
            .json["verify"] == nil)
    }
}
