#if canImport(FoundationModels)
import FoundationModels
#else
import FoundationModelsMirror
#endif
import AppleCodeCore

/// Apple's on-device model through FoundationModels: one `LanguageModelSession` per context window, the seven
/// tools bridged through runtime schemas, text streamed from cumulative snapshots.
///
/// Written against the 26.0-26.3 SDK surface. Building with `-Xswiftc -DFM_SDK_26_4` (scripts/check-macos.sh
/// does this when `xcrun --show-sdk-version` is 26.4 or later) also reads the model's real window size and, on
/// macOS 26.4 or later, budgets with the model's own token counts (`ModelTokens`).
public struct FoundationModelsBackend: AgentBackend {
    public let name = "fm"
    public let model = "apple-on-device"
    public let contextTokens: Int

    /// At most this many fresh windows after `exceededContextWindowSize`.
    static let maxRestarts = 3
    /// Low temperature: tool calls and code want the likely answer. (No `sampling:`: it warns on the 27 SDK.)
    static let temperature = 0.2

    let languageModel: SystemLanguageModel
    /// The same model with `permissiveContentTransformations`, for one plain-text answer (no tools) after the
    /// default guardrails refused a response: Apple documents the mode for `String` responses only.
    let permissiveModel: SystemLanguageModel
    let retry: RetryPolicy
    /// Set where this build has no FoundationModels framework: why the backend can never run here.
    let missingFramework: String?

    public init(contextTokens: Int? = nil) {
        #if canImport(FoundationModels)
        self.init(contextTokens: contextTokens, languageModel: .default)
        #else
        self.init(contextTokens: contextTokens, languageModel: .default, missingFramework: """
            Apple's on-device model needs macOS 26 on a Mac with Apple silicon; this build has no FoundationModels \
            framework. Use --backend openai with an OpenAI-compatible server
            """)
        #endif
    }

    init(contextTokens: Int? = nil, languageModel: SystemLanguageModel, permissiveModel: SystemLanguageModel? = nil,
         retry: RetryPolicy = .standard, missingFramework: String? = nil) {
        self.languageModel = languageModel
        self.permissiveModel = permissiveModel ?? SystemLanguageModel(guardrails: .permissiveContentTransformations)
        self.retry = retry
        self.missingFramework = missingFramework
        self.contextTokens = contextTokens ?? Self.modelWindow(languageModel)
    }

    /// The model's context window: 4096 on the 26.x models. `contextSize` exists only in the 26.4+ SDK (back-deployed
    /// to 26.0), and has been seen to report 0 while assets are broken.
    static func modelWindow(_ languageModel: SystemLanguageModel) -> Int {
        #if FM_SDK_26_4
        let size = languageModel.contextSize
        return size > 0 ? size : 4096
        #else
        return 4096
        #endif
    }

    public func availability() async -> Availability {
        if let missingFramework { return Availability(available: false, reason: missingFramework) }
        return Self.describe(languageModel.availability)
    }

    /// The framework's availability in the words of `--check`: what is wrong and what the user should do.
    static func describe(_ availability: SystemLanguageModel.Availability) -> Availability {
        switch availability {
        case .available:
            return Availability(available: true, reason: "Apple's on-device model is ready")
        case .unavailable(let reason):
            switch reason {
            case .deviceNotEligible:
                return Availability(available: false, reason: """
                    this device cannot run Apple Intelligence (it needs a Mac with Apple silicon and macOS 26); \
                    use --backend openai with an OpenAI-compatible server
                    """)
            case .appleIntelligenceNotEnabled:
                return Availability(available: false, reason: """
                    Apple Intelligence is turned off: turn it on in System Settings > Apple Intelligence & Siri, \
                    wait for the model to download, then run apple-code --check again
                    """)
            case .modelNotReady:
                return Availability(available: false, reason: """
                    the on-device model is not ready yet (it is still downloading or being prepared): keep the Mac \
                    online and on power, wait a few minutes, then run apple-code --check again
                    """)
            @unknown default:
                return Availability(available: false, reason: """
                    Apple's on-device model is unavailable (\(String(describing: reason))): check System Settings \
                    > Apple Intelligence & Siri, then run apple-code --check again
                    """)
            }
        @unknown default:
            return Availability(available: false, reason: "Apple's on-device model is unavailable (\(availability))")
        }
    }

    public func run(_ request: AgentRequest, events: any EventSink) async throws -> AgentAnswer {
        let availability = await availability()
        guard availability.available else { throw AgentError(.modelUnavailable, availability.reason) }

        // The model's own counts where it has them (26.4), else the estimator: one kind of tokens for the run.
        let specs = request.tools.map(\.spec)
        let modelTokens = ModelTokens(model: languageModel)
        let plan = await modelTokens.plan(window: request.contextTokens, instructions: request.instructions,
                                          tools: specs)
        let counter = plan.budget.exact ? modelTokens : nil
        if request.verbose { request.log(plan.figures) }
        let taskTokens = await counter?.count(request.prompt) ?? TokenEstimator.estimate(request.prompt)
        try plan.check(taskTokens: taskTokens)

        let ledger = RunLedger(plan: plan, maxToolCalls: request.maxTurns, verification: request.verify)
        if counter != nil {
            ledger.sample(counted: plan.instructionsTokens, text: request.instructions)
            ledger.sample(counted: plan.toolTokens, text: ContextBudget.toolDefinitionText(specs))
            ledger.sample(counted: taskTokens, text: request.prompt)
        }
        let tools: [any Tool]
        do {
            tools = try request.tools.map {
                try FrameworkTool($0, ledger: ledger, events: events, request: request, counter: counter)
            }
        } catch {
            throw AgentError(.backendError, "a tool's parameters could not be turned into a schema: \(error)")
        }

        let prompt = await Self.fit(request.prompt, plan: plan, counter: counter)
        if prompt.cut { events.notice("the task was cut to fit the \(plan.window)-token context window") }

        let attempts = Attempts(backend: self, request: request, events: events, ledger: ledger, tools: tools,
                                counter: counter, firstPrompt: prompt.text)
        do {
            return try await withDeadline(request.deadline) { try await attempts.run() }
        } catch let error as AgentError {
            throw error
        } catch {
            // The deadline expired, or the caller cancelled the run (a signal): stop with what was said so far.
            let expired = error is DeadlineExpired || request.deadline.map { .now >= $0 } == true
            let outcome: RunOutcome = expired ? .timeout : .interrupted
            let message = expired ? "the task did not finish before --timeout" : "the run was cancelled"
            throw AgentError(outcome, message, partialAnswer: ledger.answer, progress: ledger.progress())
        }
    }
}

extension FoundationModelsBackend {
    /// A window's prompt within `plan.promptLimit` (cut, head and tail kept, when over) and its tokens, counted
    /// by `counter` where it can, else estimated.
    static func fit(_ prompt: String, plan: ContextPlan,
                    counter: ModelTokens?) async -> (text: String, tokens: Int, cut: Bool) {
        if let counter, let tokens = await counter.count(prompt) {
            if tokens <= plan.promptLimit { return (prompt, tokens, false) }
            let cut = await ExactFit.cut(prompt, toTokens: plan.promptLimit) { await counter.count($0) }
            if let cutTokens = cut.tokens { return (cut.text, cutTokens, true) }
        }
        let cut = TokenEstimator.cut(prompt, toTokens: plan.promptLimit)
        return (cut.text, TokenEstimator.estimate(cut.text), cut.truncated)
    }
}

/// What `--verify` made of a final answer.
private enum Checked {
    /// The run ends with this answer (it may carry a note of shown code put in).
    case stands(String)
    /// The check failed: this goes to the model, and a repair round begins.
    case repair(String)

    var answer: String? { if case .stands(let answer) = self { answer } else { nil } }
}

/// The windows of one run: a fresh session per attempt, restarted with a condensed prompt after an overflow and
/// retried after a busy or rate-limited model.
private struct Attempts: Sendable {
    let backend: FoundationModelsBackend
    let request: AgentRequest
    let events: any EventSink
    let ledger: RunLedger
    let tools: [any Tool]
    let counter: ModelTokens?
    let firstPrompt: String

    func run() async throws -> AgentAnswer {
        var prompt = firstPrompt
        var restarts = 0
        var retries = 0
        while true {
            try Task.checkCancellation()
            let window = await FoundationModelsBackend.fit(prompt, plan: ledger.plan, counter: counter)
            prompt = window.text
            ledger.startWindow(promptTokens: window.tokens)
            let session = LanguageModelSession(model: backend.languageModel, tools: tools,
                                               instructions: request.instructions)
            let failure: ResponseFailure
            do {
                var next = prompt
                while true {
                    let text = try await respond(session, prompt: next)
                    if let counter { ledger.noteAnswerTokens(await counter.count(text)) }
                    let feedback: String
                    switch try await verified(text) {
                    case .stands(let answer):
                        return AgentAnswer(text: answer, progress: ledger.progress(answered: true))
                    case .repair(let failure): feedback = failure
                    }
                    // The same session goes on: the model keeps what it read and did in this window.
                    next = feedback
                    ledger.noteRepair(feedback)
                }
            } catch let error as AgentError where error.outcome == .verify {
                throw error
            } catch {
                // A cancelled stream may fail with any error; cancellation is what happened.
                failure = Task.isCancelled ? .cancelled : ResponseFailure(error)
            }
            switch failure {
            case .overflow(let detail):
                restarts += 1
                if request.verbose {
                    request.log("fm context overflow (window \(ledger.plan.window), about \(ledger.windowTokens) "
                                + "tokens in use, \(ledger.plan.budget.countKind)): \(detail)")
                }
                guard restarts <= FoundationModelsBackend.maxRestarts else {
                    throw failed(.backendError, """
                        the task did not fit Apple's \(ledger.plan.window)-token context window even after \
                        \(FoundationModelsBackend.maxRestarts) fresh windows; split it into smaller tasks or use --plan
                        """)
                }
                events.notice("context full: continued in a new window with a condensed history "
                              + "(\(restarts) of \(FoundationModelsBackend.maxRestarts))")
                prompt = condensedPrompt()
            case .busy(let detail):
                retries += 1
                if request.verbose { request.log("fm busy: \(detail)") }
                guard let delay = backend.retry.delay(retry: retries, deadline: request.deadline) else {
                    var error = failed(.backendError, """
                        Apple's on-device model stayed busy or rate-limited after \(retries - 1) retries; \
                        try again in a minute (\(detail))
                        """)
                    // Where a fallback server is configured, the run goes on there from here.
                    error.continuation = continuation()
                    throw error
                }
                events.notice("Apple's on-device model is busy or rate-limited; retrying in \(delay)")
                try await Task.sleep(for: delay)
                // Tools may have run before the failure: continue from the journal rather than from scratch.
                if !ledger.journal.isEmpty { prompt = condensedPrompt() }
            case .guardrail(let message, let detail):
                if request.verbose { request.log("fm guardrail: \(detail)") }
                // Once: permissiveAnswer ends the run either way (its own refusal is error_guardrail).
                return try await permissiveAnswer(refused: message)
            case .fatal(let outcome, let message):
                if request.verbose { request.log("fm error: \(message)") }
                throw failed(outcome, message)
            case .cancelled:
                throw CancellationError()
            }
        }
    }

    /// After the default guardrails refused a response: one plain-text answer from a fresh session of the model
    /// with `permissiveContentTransformations` and no tools (tool calls are guided generation, which keeps the
    /// default guardrails whatever the mode), prompted with the task and what was done. Refused again: the run
    /// ends with `error_guardrail`.
    private func permissiveAnswer(refused message: String) async throws -> AgentAnswer {
        request.log("fm guardrail: the default guardrails refused a response; asking once more for a plain-text "
            + "answer without tools, with SystemLanguageModel.Guardrails.permissiveContentTransformations")
        let progress = ledger.progress()
        let prompt = ledger.journal.isEmpty && ledger.answer.isEmpty ? request.prompt : CondensedPrompt.make(
            task: request.prompt, journal: ledger.journal, filesChanged: progress.filesChanged,
            partialAnswer: ledger.answer, maxTokens: ledger.plan.promptLimit,
            note: "This continues without tools.", ending: "Answer now, in plain words: what was done and found.")
        let window = await FoundationModelsBackend.fit(prompt, plan: ledger.plan, counter: counter)
        ledger.startWindow(promptTokens: window.tokens)
        let session = LanguageModelSession(model: backend.permissiveModel, tools: [],
                                           instructions: request.instructions)
        let text: String
        do {
            text = try await respond(session, prompt: window.text)
        } catch {
            if Task.isCancelled { throw CancellationError() }
            let failure = ResponseFailure(error)
            if request.verbose { request.log("fm guardrail: the permissive answer failed too: \(failure)") }
            throw failed(.guardrail, message)
        }
        request.log("fm guardrail: answered with permissiveContentTransformations")
        if let counter { ledger.noteAnswerTokens(await counter.count(text)) }
        // Not repairable: a failing check has thrown, unless the answer's shown code made it pass.
        let checked = try await verified(text, repairable: false)
        return AgentAnswer(text: checked.answer ?? text, progress: ledger.progress(answered: true))
    }

    /// `--verify`: the answer stands when there is no check, it passed, or the code the answer showed made it pass
    /// (then with a note, `ShownCodeTrial`); else the failure goes to the model for a repair round. Throws
    /// `error_verify` when the check still fails and no round is left.
    private func verified(_ answer: String, repairable: Bool = true) async throws -> Checked {
        guard var verification = ledger.verification else { return .stands(answer) }
        let turnsLeft = ledger.maxToolCalls - ledger.progress().turns
        var cannotRepair: String?
        if !repairable { cannotRepair = "the answer came from a request without tools" }
        if turnsLeft < 1 { cannotRepair = "--max-turns \(request.maxTurns) leaves no tool calls for another" }
        let verdict = await verification.verify(
            deadline: request.deadline, events: events, feedbackTokens: max(64, ledger.plan.promptLimit / 2),
            cannotRepair: cannotRepair, changedFiles: !ledger.progress().filesChanged.isEmpty)
        ledger.verification = verification
        try Task.checkCancellation()
        switch verdict {
        case .passed: return .stands(answer)
        case .repair(let feedback):
            if let fixed = await triedShownCode(answer) { return .stands(fixed) }
            return .repair(feedback)
        case .failed(let message):
            if let fixed = await triedShownCode(answer) { return .stands(fixed) }
            throw AgentError(.verify, message, partialAnswer: answer, progress: ledger.progress(answered: true))
        }
    }

    /// The answer with its note when the code it shows, put in, makes the failing check pass; else nil (each edit
    /// tried is put back). Its files: those shown with the task, those the run's calls read or wrote, those named.
    private func triedShownCode(_ answer: String) async -> String? {
        guard var verification = ledger.verification,
              let trial = ShownCodeTrial(request: request, events: events) else { return nil }
        let fixed = await trial.run(answer: answer, touched: request.taskFilesShown + ledger.filesTouched,
                                    verification: &verification, nextCall: { ledger.nextShownCall() },
                                    record: { ledger.recordOwnCall($0) })
        if fixed != nil { ledger.verification = verification }
        return fixed
    }

    /// Streams one response, sending each snapshot's new text as a `text` event.
    private func respond(_ session: LanguageModelSession, prompt: String) async throws -> String {
        let options = GenerationOptions(temperature: request.sampling.temperature ?? FoundationModelsBackend.temperature,
                                        maximumResponseTokens: request.sampling.responseTokens(
                                            ledger.plan.responseTokenLimit))
        var deltas = SnapshotDeltas()
        for try await snapshot in session.streamResponse(to: prompt, options: options) {
            switch deltas.next(snapshot.content) {
            case .none:
                continue
            case .append(let delta):
                events.emit(.text(delta: delta))
            case .restart(let text):
                events.notice("the model revised its answer; the text starts again")
                events.emit(.text(delta: text))
            }
            ledger.noteAnswer(deltas.text)
        }
        // A cancelled stream may simply end: do not take a cut-off answer for a finished one.
        try Task.checkCancellation()
        return deltas.text
    }

    /// Made with the estimator, to the prompt limit at the run's rate; `fit` cuts it if the model counts more.
    private func condensedPrompt() -> String {
        let progress = ledger.progress()
        let limit = ledger.plan.promptLimit
        let budget = counter == nil ? limit : ledger.rate.estimatedBudget(forCounted: limit)
        // A repair round's check failure goes on after the condensed history, within its own share.
        guard let feedback = ledger.repairFeedback else {
            return CondensedPrompt.make(task: request.prompt, journal: ledger.journal,
                                        filesChanged: progress.filesChanged, partialAnswer: ledger.answer,
                                        maxTokens: budget)
        }
        let feedbackCut = TokenEstimator.cut(feedback, toTokens: budget / 2, headShare: 0.3).text
        let history = CondensedPrompt.make(task: request.prompt, journal: ledger.journal,
                                           filesChanged: progress.filesChanged, partialAnswer: ledger.answer,
                                           maxTokens: budget - TokenEstimator.estimate(feedbackCut) - 2)
        return history + "\n\n" + feedbackCut
    }

    /// The prompt another model can go on from: the task, or the task and a journal of what was done.
    private func continuation() -> String {
        let progress = ledger.progress()
        guard !ledger.journal.isEmpty || !ledger.answer.isEmpty else { return request.prompt }
        return CondensedPrompt.make(task: request.prompt, journal: ledger.journal, filesChanged: progress.filesChanged,
                                    partialAnswer: ledger.answer, maxTokens: ledger.plan.promptLimit,
                                    note: "Another model started this task; it continues here. Do not repeat "
                                        + "finished steps.")
    }

    private func failed(_ outcome: RunOutcome, _ message: String) -> AgentError {
        AgentError(outcome, message, partialAnswer: ledger.answer, progress: ledger.progress())
    }
}

/// What a failed response means for the run.
enum ResponseFailure: Equatable {
    /// `exceededContextWindowSize`: start a new window with a condensed prompt.
    case overflow(String)
    /// `rateLimited` or `concurrentRequests`: wait and retry.
    case busy(String)
    /// `guardrailViolation`: the message for the user, and the framework's detail. One plain-text answer with
    /// permissive guardrails may follow.
    case guardrail(String, String)
    /// Ends the run with this outcome and message.
    case fatal(RunOutcome, String)
    case cancelled

    init(_ error: any Error) {
        do {
            throw error
        } catch let error as LanguageModelSession.GenerationError {
            self = Self.classify(error)
        } catch let error as LanguageModelSession.ToolCallError {
            if error.underlyingError is MaxTurnsReached {
                self = .fatal(.maxTurns, "the model kept calling tools past --max-turns")
            } else {
                self = .fatal(.backendError, "the tool \(error.tool.name) failed: \(error.underlyingError)")
            }
        } catch is CancellationError {
            self = .cancelled
        } catch {
            // Some failures arrive as plain NSErrors, and newer SDKs add error types this build cannot name.
            self = Self.classify(description: String(describing: error))
        }
    }

    private static func classify(_ error: LanguageModelSession.GenerationError) -> ResponseFailure {
        switch error {
        case .exceededContextWindowSize(let context):
            return .overflow(context.debugDescription)
        case .rateLimited(let context), .concurrentRequests(let context):
            return .busy(context.debugDescription)
        case .guardrailViolation(let context):
            return .guardrail(guardrailMessage, context.debugDescription)
        case .refusal:
            return .fatal(.guardrail, """
                Apple's on-device model declined to answer this request. Rephrase the task, or use --backend openai
                """)
        case .assetsUnavailable(let context):
            return .fatal(.modelUnavailable, """
                the on-device model's files are not available (still downloading, or removed to free space): \
                wait, then run apple-code --check again (\(context.debugDescription))
                """)
        case .unsupportedLanguageOrLocale(let context):
            return .fatal(.backendError, """
                Apple's on-device model does not support this language or the Mac's locale; write the task in a \
                supported language such as English (\(context.debugDescription))
                """)
        case .decodingFailure(let context), .unsupportedGuide(let context):
            return .fatal(.backendError, "Apple's on-device model produced unusable output: \(context.debugDescription)")
        @unknown default:
            return classify(description: String(describing: error))
        }
    }

    static let guardrailMessage = """
        Apple's on-device model refused this request: its safety guardrail was triggered. Rephrase the task, or use \
        --backend openai
        """

    /// Recognises failures by their text, for errors without a typed case in this SDK.
    static func classify(description: String) -> ResponseFailure {
        let overflowMarks = ["exceededContextWindowSize", "contextSizeExceeded", "exceeds the maximum allowed context"]
        if overflowMarks.contains(where: description.contains) { return .overflow(description) }
        if ["rateLimited", "concurrentRequests"].contains(where: description.contains) { return .busy(description) }
        if description.contains("guardrailViolation") { return .guardrail(guardrailMessage, description) }
        if description.contains("refusal") {
            return .fatal(.guardrail, "Apple's on-device model refused this request (\(description))")
        }
        return .fatal(.backendError, "Apple's on-device model failed: \(description)")
    }
}
