import AppleCodeCore
import Synchronization

/// What one Foundation Models run has done so far. The framework runs the tool loop itself and may call tools
/// concurrently, so the tool bridges and the run loop share this behind a lock.
final class RunLedger: Sendable {
    /// What the bridge should do with the next tool call.
    enum Admission: Sendable, Equatable {
        /// Run it; its result may take at most `budget` tokens.
        case run(id: String, budget: Int)
        /// The call limit is reached: answer the model with this text instead of running the tool.
        case refuse(id: String, message: String)
        /// The model kept calling tools after being told to stop: end the turn (`MaxTurnsReached`).
        case abort
    }

    private struct State {
        var calls = 0
        /// Tokens the current window holds before any tool call: instructions, tools and the prompt.
        var baseTokens = 0
        /// Tokens tool calls and results added to the current window.
        var toolTokens = 0
        var inputTokens = 0
        var outputTokens = 0
        var answer = ""
        /// The current window's answer as the model counted it (nil: estimate it).
        var answerTokens: Int?
        var journal: [JournalEntry] = []
        var progress = RunProgress()
        /// Texts counted by the model this run, against their estimates.
        var rate = TokenRate()
        /// A figure of an exact plan had to be estimated (the model did not count it).
        var estimatedSome = false
        /// `--verify`: the check's state, and the latest failure sent to the model (for a condensed window).
        var verification: Verification?
        var repairFeedback: String?
        /// The backend's own editFile calls for an answer's shown code (`ShownCodeTrial`), for their ids.
        var shownCalls = 0
    }

    /// All figures are in the plan's kind of tokens: the model's counts when `plan.budget.exact`, else estimates.
    let plan: ContextPlan
    let maxToolCalls: Int
    private let state = Mutex(State())

    init(plan: ContextPlan, maxToolCalls: Int, verification: Verification? = nil) {
        self.plan = plan
        self.maxToolCalls = max(0, maxToolCalls)
        state.withLock { $0.verification = verification }
    }

    var verification: Verification? {
        get { state.withLock { $0.verification } }
        set { state.withLock { $0.verification = newValue } }
    }

    var repairFeedback: String? { state.withLock { $0.repairFeedback } }

    /// A repair round starts: the failure is sent, and the answer streams afresh.
    func noteRepair(_ feedback: String) {
        state.withLock { state in
            state.repairFeedback = feedback
            // The answer the check rejected was a turn, and its tokens stay in the usage.
            state.progress.turns += 1
            state.outputTokens += state.answerTokens ?? TokenEstimator.estimate(state.answer)
            state.answer = ""
            state.answerTokens = nil
        }
    }

    /// A new window starts with a prompt of `promptTokens`.
    func startWindow(promptTokens: Int) {
        let base = plan.fixedTokens + promptTokens
        state.withLock { state in
            state.baseTokens = base
            state.toolTokens = 0
            state.inputTokens += base
            state.answer = ""
            state.answerTokens = nil
        }
    }

    /// A text the model counted: it teaches the run how estimates compare with real tokens.
    func sample(counted tokens: Int, text: String) {
        state.withLock { $0.rate.record(counted: tokens, text: text) }
    }

    var rate: TokenRate { state.withLock { $0.rate } }

    func admitCall() -> Admission {
        state.withLock { state in
            state.calls += 1
            let id = "c\(state.calls)"
            if state.calls > maxToolCalls + 1 { return .abort }
            if state.calls > maxToolCalls {
                return .refuse(id: id, message: """
                    Error: the limit of \(maxToolCalls) tool calls is reached. Do not call any tool again; \
                    answer now with what you have.
                    """)
            }
            let left = plan.window - plan.answerReserve - state.baseTokens - state.toolTokens
            return .run(id: id, budget: max(32, min(plan.resultCap, left)))
        }
    }

    /// Records a finished (or refused) call: its cost in the window, the journal, files and commands. `callTokens`
    /// and `resultTokens` are the model's counts of the call (name and arguments) and of the result, nil where it
    /// did not count them (then they are estimated).
    func finishCall(tool: String, arguments: String, result: ToolResult, callTokens: Int? = nil,
                    resultTokens: Int? = nil) {
        let estimated = plan.budget.exact && (callTokens == nil || resultTokens == nil)
        // The framework wraps a call and its output in markers of its own: a few tokens more than their texts.
        let callTokens = (callTokens ?? TokenEstimator.estimate(tool + arguments)) + 8
        let resultTokens = resultTokens ?? TokenEstimator.estimate(result.text)
        state.withLock { state in
            if estimated { state.estimatedSome = true }
            state.toolTokens += callTokens + resultTokens
            state.inputTokens += resultTokens
            state.outputTokens += callTokens
            state.progress.turns += 1
            state.progress.record(result)
            state.journal.append(JournalEntry(tool: tool, arguments: arguments, summary: result.summary, ok: result.ok))
        }
    }

    /// The answer streamed so far in the current window (the partial answer on timeout).
    func noteAnswer(_ text: String) {
        state.withLock { $0.answer = text }
    }

    /// The final answer of the window, as the model counted it.
    func noteAnswerTokens(_ tokens: Int?) {
        state.withLock { $0.answerTokens = tokens }
    }

    var answer: String { state.withLock { $0.answer } }
    var journal: [JournalEntry] { state.withLock { $0.journal } }

    /// The files the run's calls have read or written (as the calls named them), in first-call order: where an
    /// answer's shown code may belong (`ShownCodeTrial`).
    var filesTouched: [String] {
        var seen: Set<String> = []
        return journal.compactMap { entry -> String? in
            guard entry.ok, ["readFile", "editFile", "writeFile"].contains(entry.tool),
                  let path = (try? JSONValue.parse(entry.arguments))?["path"]?.stringValue, !path.isEmpty,
                  seen.insert(path).inserted else { return nil }
            return path
        }
    }

    /// The number of the backend's next own call (`shownN`).
    func nextShownCall() -> Int {
        state.withLock { state in
            state.shownCalls += 1
            return state.shownCalls
        }
    }

    /// A call the backend made itself, not the model: its files and commands count, but it is neither a turn nor
    /// in the window.
    func recordOwnCall(_ result: ToolResult) {
        state.withLock { $0.progress.record(result) }
    }

    /// Tokens the current window holds (for `--verbose` after an overflow).
    var windowTokens: Int { state.withLock { $0.baseTokens + $0.toolTokens + TokenEstimator.estimate($0.answer) } }

    /// The counters of the run so far; `answered` counts the final response as one more turn.
    func progress(answered: Bool = false) -> RunProgress {
        state.withLock { state in
            var progress = state.progress
            if answered { progress.turns += 1 }
            progress.verify = state.verification.map { $0.report }
            let answerEstimated = state.answerTokens == nil && !state.answer.isEmpty
            progress.usage = Usage(
                inputTokens: state.inputTokens,
                outputTokens: state.outputTokens + (state.answerTokens ?? TokenEstimator.estimate(state.answer)),
                estimated: !plan.budget.exact || state.estimatedSome || answerEstimated,
                fixedTokens: plan.fixedTokens)
            return progress
        }
    }
}

/// Thrown from a tool call to end a turn whose model ignores the tool-call limit.
struct MaxTurnsReached: Error, Sendable {}
