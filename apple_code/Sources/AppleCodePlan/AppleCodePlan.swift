import AppleCodeCore

/// Plan-and-execute (`--plan`): one planner request splits the task into subtasks, each runs as a worker in a
/// fresh context window on the same backend, and the results are combined.
///
/// Every `backend.run` is a new context window, so a 4,096-token model can work through more material than fits
/// one window. Workers are plain backend runs (they cannot plan again), see the task, their subtask and a
/// one-line digest of earlier workers, never transcripts. They run one at a time: they share the workspace and,
/// on device, the one model.
public struct PlanRunner: Sendable {
    public let backend: any AgentBackend
    /// `--max-subtasks` (default 5), clamped to `subtaskLimit`.
    public let maxSubtasks: Int
    /// `--parallel`: workers at once; honoured only for read-only runs.
    public let parallel: Bool
    /// How long past a worker's deadline the runner waits for the backend to stop by itself before cancelling it.
    var watchdogGrace: Duration = .seconds(2)

    public static let subtaskLimit = 1...20
    /// The tools a planner may use, and the only ones a `--parallel` run may offer.
    public static let readOnlyToolNames = ToolSpec.readOnlyNames

    public init(backend: any AgentBackend, maxSubtasks: Int = 5, parallel: Bool = false) {
        self.backend = backend
        self.maxSubtasks = min(max(maxSubtasks, Self.subtaskLimit.lowerBound), Self.subtaskLimit.upperBound)
        self.parallel = parallel
    }

    /// Whether workers may run at once for these tools: only when none of them writes or runs commands.
    public static func allowsParallel(_ tools: [any AgentTool]) -> Bool {
        tools.allSatisfy { readOnlyToolNames.contains($0.name) }
    }

    /// Runs `request` as a plan. Throws `AgentError` like `AgentBackend.run`; on timeout the error carries the
    /// partial combined answer and the summed progress.
    public func run(_ request: AgentRequest, events: any EventSink) async throws -> AgentAnswer {
        let budget = PlanBudget(maxTurns: request.maxTurns, deadline: request.deadline)
        var progress = RunProgress()
        guard budget.allowsPlan else {
            events.notice("plan: --max-turns \(request.maxTurns) is too few for a plan (the planner, one worker and "
                + "the summary need \(PlanBudget.minimumTurns)); running the task directly")
            return try await runDirectly(request, budget: budget, progress: progress, events: events)
        }

        let subtasks: [String]
        do {
            let plan = try await makePlan(request, budget: budget, events: events)
            progress.merge(plan.progress)
            subtasks = plan.subtasks
        } catch {
            let failure = budget.failure(error)
            progress.merge(failure.progress)
            guard Self.plannerFailureAllowsFallback(failure, budget: budget) else {
                throw AgentError(failure.outcome, "planner: \(failure.message)", progress: progress)
            }
            events.notice("plan: the planner failed (\(failure.outcome.subtype): \(failure.message)); "
                + "running the task directly")
            return try await runDirectly(request, budget: budget, progress: progress, events: events)
        }
        if subtasks.isEmpty {
            events.notice("plan: the planner's reply held no subtasks; running the task directly")
            return try await runDirectly(request, budget: budget, progress: progress, events: events)
        }
        events.notice("plan: \(subtasks.count) subtask\(subtasks.count == 1 ? "" : "s"): "
            + subtasks.enumerated().map { "\($0.offset + 1). \($0.element)" }.joined(separator: " | "))

        var records = subtasks.enumerated().map { SubtaskRecord(index: $0.offset + 1, subtask: $0.element) }
        let prompts = PlanPrompts(task: request.prompt, contextTokens: request.contextTokens)
        if parallel && !Self.allowsParallel(request.tools) {
            events.notice("plan: --parallel needs a read-only run; workers run one at a time")
        }
        if parallel && Self.allowsParallel(request.tools) {
            try await runWorkersAtOnce(&records, request, prompts: prompts, budget: budget,
                                       progress: &progress, events: events)
        } else {
            try await runWorkersInTurn(&records, request, prompts: prompts, budget: budget,
                                       progress: &progress, events: events)
        }

        let failures = records.filter(\.isFailure)
        if failures.count == records.count {
            let outcomes = Set(failures.compactMap { record -> RunOutcome? in
                if case .failed(let outcome, _, _) = record.status { outcome } else { nil }
            })
            // One shared reason (all out of turns, all refused) is reported as such; anything else (including
            // time shares that ran out while the run still had time) is a failed run, not a --timeout.
            let shared = outcomes.count == 1 ? outcomes.first : nil
            throw AgentError(shared == .maxTurns || shared == .guardrail ? shared ?? .backendError : .backendError,
                             "all \(records.count) subtasks failed",
                             partialAnswer: CombinedAnswer.render(records, summary: nil), progress: progress)
        }

        if let verify = request.verify {
            try await verifyPlan(verify, &records, request, prompts: prompts, budget: budget, progress: &progress,
                                 events: events)
        }

        let summary = try await summarize(records, request, prompts: prompts, budget: budget,
                                          progress: &progress, events: events)
        let combined = CombinedAnswer.render(records, summary: summary)
        events.emit(.text(delta: combined))
        return AgentAnswer(text: combined, progress: progress)
    }

    // MARK: - Planner

    private func makePlan(_ request: AgentRequest, budget: PlanBudget, events: any EventSink)
        async throws -> (subtasks: [String], progress: RunProgress)
    {
        // One cap, known before the planner runs, so it can be told: --max-subtasks, or fewer when --max-turns
        // cannot pay for that many workers.
        let cap = min(maxSubtasks, budget.workerSlots)
        var plannerRequest = request
        plannerRequest.prompt = PlanPrompts(task: request.prompt, contextTokens: request.contextTokens)
            .planner(maxSubtasks: cap)
        plannerRequest.tools = request.tools.filter { Self.readOnlyToolNames.contains($0.name) }
        plannerRequest.maxTurns = budget.plannerTurns
        plannerRequest.verify = nil
        plannerRequest.deadline = budget.plannerDeadline()
        let answer = try await runBounded(plannerRequest, events: TextDroppingSink(base: events))
        var subtasks = PlanParser.subtasks(from: answer.text).filter { !PlanPrompts.exampleSubtasks.contains($0) }
        if subtasks.count > cap {
            // Merging keeps the whole task in the plan; dropping the tail would silently leave work undone.
            let merged = subtasks[(cap - 1)...].joined(separator: "; then ")
            let reason = cap < maxSubtasks
                ? "--max-turns \(budget.maxTurns) pays for \(cap) worker\(cap == 1 ? "" : "s") after "
                    + "\(budget.plannerTurns) planner turn\(budget.plannerTurns == 1 ? "" : "s") and the summary's 1"
                : "--max-subtasks \(maxSubtasks)"
            events.notice("plan: the planner gave \(subtasks.count) subtasks; the last "
                + "\(subtasks.count - cap + 1) were merged into one (\(reason))")
            subtasks = Array(subtasks[..<(cap - 1)]) + [merged]
        }
        return (subtasks, answer.progress)
    }

    /// A planner that merely failed (bad reply, its turns or time share used up) costs nothing: the task runs
    /// directly. A run that is out of time, interrupted, or cannot run at all stops here.
    private static func plannerFailureAllowsFallback(_ failure: AgentError, budget: PlanBudget) -> Bool {
        switch failure.outcome {
        case .backendError, .maxTurns, .guardrail: return true
        case .timeout: return !budget.expired()
        default: return false
        }
    }

    private func runDirectly(_ request: AgentRequest, budget: PlanBudget, progress: RunProgress,
                             events: any EventSink) async throws -> AgentAnswer
    {
        var direct = request
        direct.maxTurns = budget.turnsLeft(used: progress.turns)
        do {
            var answer = try await runBounded(direct, events: events)
            var total = progress
            total.merge(answer.progress)
            answer.progress = total
            return answer
        } catch {
            var failure = budget.failure(error)
            var total = progress
            total.merge(failure.progress)
            failure.progress = total
            throw failure
        }
    }

    // MARK: - Summary

    /// One request without tools over the digests. A summary that fails is left out (with a notice): the
    /// subtasks' results are the answer.
    private func summarize(_ records: [SubtaskRecord], _ request: AgentRequest, prompts: PlanPrompts,
                           budget: PlanBudget, progress: inout RunProgress, events: any EventSink)
        async throws -> String?
    {
        guard budget.turnsLeft(used: progress.turns) >= PlanBudget.summaryTurns else {
            events.notice("plan: no turn of --max-turns \(budget.maxTurns) is left for the summary; it is left out")
            return nil
        }
        var summaryRequest = request
        summaryRequest.prompt = prompts.summary(count: records.count, digest: CombinedAnswer.digest(records))
        summaryRequest.tools = []
        summaryRequest.maxTurns = PlanBudget.summaryTurns
        summaryRequest.verify = nil
        do {
            let answer = try await runBounded(summaryRequest, events: TextDroppingSink(base: events))
            progress.merge(answer.progress)
            return answer.text
        } catch {
            let failure = budget.failure(error)
            progress.merge(failure.progress)
            if budget.expired() || failure.outcome == .interrupted {
                throw AgentError(budget.expired() ? .timeout : .interrupted,
                                 "the run stopped while writing the summary",
                                 partialAnswer: CombinedAnswer.render(records, summary: nil), progress: progress)
            }
            events.notice("plan: the summary request failed (\(failure.outcome.subtype): \(failure.message))")
            return nil
        }
    }
}
