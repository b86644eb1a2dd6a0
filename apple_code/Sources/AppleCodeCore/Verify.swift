/// `--verify CMD` (contract: Options, Output): "done" is decided by running a check, not by the model's word. When
/// the model gives its final answer the check runs in the workspace; a failing check goes back to the model (the
/// end of its output, cut to fit the window) and the run goes on, for at most `--verify-rounds` such rounds.

/// The check and how many repair rounds it allows. `run` executes the command (runCommand's sandbox and limits,
/// provided by the tools target) and must stop by the deadline.
public struct VerifyCheck: Sendable {
    public var command: String
    /// `--verify-rounds`: how many times a failure may go back to the model.
    public var rounds: Int
    public var run: @Sendable (_ deadline: ContinuousClock.Instant?) async -> CheckRun

    public static let defaultRounds = 2

    public init(command: String, rounds: Int = VerifyCheck.defaultRounds,
                run: @escaping @Sendable (_ deadline: ContinuousClock.Instant?) async -> CheckRun) {
        self.command = command
        self.rounds = rounds
        self.run = run
    }
}

/// One run of the check.
public struct CheckRun: Sendable, Equatable {
    public var passed: Bool
    /// The exit code, when the command exited (nil: killed, timed out, refused).
    public var exitCode: Int?
    /// What runCommand would show the model: how the command ended, then its output (head and tail when long).
    public var output: String

    public init(passed: Bool, exitCode: Int?, output: String) {
        self.passed = passed
        self.exitCode = exitCode
        self.output = output
    }
}

/// Where a run's check stands: the `verify` event after each check and the result's `verify` object.
public struct VerifyReport: Sendable, Equatable {
    public var command: String
    /// The last check passed. False when it failed, or never ran (`runs` 0).
    public var passed: Bool
    /// Repair rounds: how many times a failure went back to the model.
    public var rounds: Int
    /// How many times the check ran.
    public var runs: Int
    public var exitCode: Int?
    /// The end of the last check's output, at most `tailBytes`, from a line start where it was cut.
    public var outputTail: String

    public static let tailBytes = 2048
    /// This run of the check came before the model's first turn (`Verification.baseline`): in its event only.
    public var before = false

    public init(command: String, passed: Bool = false, rounds: Int = 0, runs: Int = 0, exitCode: Int? = nil,
                outputTail: String = "") {
        self.command = command
        self.passed = passed
        self.rounds = rounds
        self.runs = runs
        self.exitCode = exitCode
        self.outputTail = outputTail
    }

    /// The last non-empty line of the output: usually the one that says what failed (pytest's summary, make's
    /// error), for one-line messages.
    public var lastLine: String {
        outputTail.split(whereSeparator: \.isNewline).last { !$0.allSatisfy(\.isWhitespace) }.map(String.init) ?? ""
    }
}

/// One run's verification: the check after each final answer, and what to do next.
public struct Verification: Sendable {
    public let check: VerifyCheck
    public private(set) var report: VerifyReport
    /// The check passed when it ran before the work (`baseline`): then its passing later shows nothing by itself.
    public private(set) var passedBefore = false
    /// An answer that changed nothing was sent back once already (`verify`'s `changedFiles`).
    private var askedForAChange = false

    public init(_ check: VerifyCheck) {
        self.check = check
        self.report = VerifyReport(command: check.command)
    }

    public enum Verdict: Sendable, Equatable {
        case passed
        /// Send this to the model (with the tools) and go on; one repair round is used.
        case repair(String)
        /// The check failed and no round is left: the run ends with `error_verify` and this message.
        case failed(String)
    }

    /// Takes a passing run made outside `verify` (the backend tried code the answer showed, `ShownCodeTrial`):
    /// counted, reported, and the run ends on it.
    public mutating func adopt(_ run: CheckRun, events: any EventSink) {
        record(run)
        events.emit(.verify(report))
    }

    /// One more run of the check, in the report.
    private mutating func record(_ run: CheckRun) {
        report.runs += 1
        report.passed = run.passed
        report.exitCode = run.exitCode
        report.outputTail = Self.tail(run.output, bytes: VerifyReport.tailBytes)
    }

    /// Runs the check once before the model's first turn and emits its `verify` event (`before`, `runs` 1). When
    /// it fails, the text to put after the task: how it fails (the end of its output within `feedbackTokens`), so
    /// the work starts from the failure it must fix rather than a guess; small models otherwise read one file and
    /// rewrite it unchanged. Nil when it passes (nothing to add: the task may still ask for a change the check
    /// does not test). The run's report (the result's `verify`) stays about the checks after an answer: this run
    /// is neither a round nor counted there.
    public mutating func baseline(deadline: ContinuousClock.Instant?, events: any EventSink, feedbackTokens: Int)
        async -> String? {
        let run = await check.run(deadline)
        passedBefore = run.passed
        var event = VerifyReport(command: check.command, passed: run.passed, runs: 1, exitCode: run.exitCode,
                                 outputTail: Self.tail(run.output, bytes: VerifyReport.tailBytes))
        event.before = true
        events.emit(.verify(event))
        guard !run.passed else { return nil }
        return told(run, "fails now", "; it must pass when you are done", tokens: feedbackTokens)
    }

    /// Runs the check, emits its `verify` event and decides. `feedbackTokens`: what the failure shown to the model
    /// may take (estimated tokens). `cannotRepair`: why the run has no room for another round (turns, time), or nil.
    /// `changedFiles`: whether the run has changed a file. A check that passed before the work and passes on an
    /// unchanged workspace shows nothing done: such an answer goes back once, as a repair round, asking for the
    /// change (small models answered "add a flag" or "set the port" after one read, changing nothing); the next
    /// answer stands whatever it is, since the task may have needed no change.
    public mutating func verify(deadline: ContinuousClock.Instant?, events: any EventSink, feedbackTokens: Int,
                                cannotRepair: String? = nil, changedFiles: Bool = true) async -> Verdict {
        let run = await check.run(deadline)
        record(run)
        if run.passed {
            if passedBefore, !changedFiles, !askedForAChange, report.rounds < check.rounds, cannotRepair == nil {
                askedForAChange = true
                report.rounds += 1
                events.emit(.verify(report))
                return .repair(Self.nothingChanged(check.command))
            }
            events.emit(.verify(report))
            return .passed
        }
        guard report.rounds < check.rounds, cannotRepair == nil else {
            events.emit(.verify(report))
            var why = "after \(report.rounds) repair round\(report.rounds == 1 ? "" : "s")"
            if report.rounds < check.rounds, let cannotRepair { why += " (\(cannotRepair))" }
            let line = report.lastLine
            return .failed("the check `\(check.command)` still fails \(why)"
                + (run.exitCode.map { ", exit code \($0)" } ?? "") + (line.isEmpty ? "" : ": \(line)"))
        }
        report.rounds += 1
        events.emit(.verify(report))
        return .repair(feedback(run, tokens: feedbackTokens))
    }

    public static func nothingChanged(_ command: String) -> String {
        "No file has changed, and the check `\(command)` passed before the work too, so it does not show the task "
            + "done. If the task asks for a change, make it now with the tools, then answer again."
    }

    /// What the model is told: the check and how it ended, the end of its output within `tokens`, and what to do.
    func feedback(_ run: CheckRun, tokens: Int) -> String {
        told(run, "failed", "", ending: "\nFix what it shows, using the tools, then answer again.", tokens: tokens)
    }

    /// "The check `CMD` <how> (exit code N)<rule>. The end of its output:", that end within `tokens` with
    /// `ending`, then `ending`.
    private func told(_ run: CheckRun, _ how: String, _ rule: String, ending: String = "", tokens: Int) -> String {
        let head = "The check `\(check.command)` \(how)" + (run.exitCode.map { " (exit code \($0))" } ?? "") + rule
            + ". The end of its output:\n"
        let room = max(16, tokens - TokenEstimator.estimate(head + ending))
        return head + Self.tail(run.output, tokens: room) + ending
    }

    /// The end of `text` within `tokens` estimated tokens (the largest byte tail that fits, by bisection).
    static func tail(_ text: String, tokens: Int) -> String {
        var low = 0
        var high = TokenEstimator.bytes(forTokens: tokens)
        while low < high {
            let middle = (low + high + 1) / 2
            if TokenEstimator.estimate(tail(text, bytes: middle)) <= tokens { low = middle } else { high = middle - 1 }
        }
        return tail(text, bytes: low)
    }

    /// The end of `text` within `bytes`, starting at a line where it was cut (unless one line alone is longer).
    public static func tail(_ text: String, bytes: Int) -> String {
        let trimmed = text.trimmingTrailingNewlines
        guard trimmed.utf8.count > bytes else { return trimmed }
        let end = TokenEstimator.suffix(trimmed, bytes: bytes)
        if let newline = end.firstIndex(of: "\n"), end.index(after: newline) < end.endIndex {
            return String(end[end.index(after: newline)...])
        }
        return end
    }
}

extension String {
    fileprivate var trimmingTrailingNewlines: String {
        var s = Substring(self)
        while let last = s.last, last.isNewline || last == " " { s = s.dropLast() }
        return String(s)
    }
}
