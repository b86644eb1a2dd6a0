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
    public static let readOnlyToolNames: Set<String> = ["readFile", "listDirectory", "searchFiles", "searchContent"]

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
            throw AgentError(outcomes.count == 1 ? outcomes.first ?? .backendError : .backendError,
                             "all \(records.count) subtasks failed",
                             partialAnswer: CombinedAnswer.render(records, summary: nil), progress: progress)
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
        var plannerRequest = request
        plannerRequest.prompt = PlanPrompts(task: request.prompt, contextTokens: request.contextTokens)
            .planner(maxSubtasks: maxSubtasks)
        plannerRequest.tools = request.tools.filter { Self.readOnlyToolNames.contains($0.name) }
        plannerRequest.maxTurns = budget.plannerTurns
        plannerRequest.deadline = budget.plannerDeadline()
        let answer = try await runBounded(plannerRequest, events: TextDroppingSink(base: events))
        var subtasks = PlanParser.subtasks(from: answer.text)
        if subtasks.count > maxSubtasks {
            // Merging keeps the whole task in the plan; dropping the tail would silently leave work undone.
            let merged = subtasks[(maxSubtasks - 1)...].joined(separator: "; then ")
            events.notice("plan: the planner gave \(subtasks.count) subtasks; the last "
                + "\(subtasks.count - maxSubtasks + 1) were merged into one (--max-subtasks \(maxSubtasks))")
            subtasks = Array(subtasks[..<(maxSubtasks - 1)]) + [merged]
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
        direct.maxTurns = budget.workerTurns(used: progress.turns, workersLeft: 1)
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

    // MARK: - Workers

    private func workerRequest(_ request: AgentRequest, _ record: SubtaskRecord, count: Int, digest: String,
                               prompts: PlanPrompts, maxTurns: Int, deadline: ContinuousClock.Instant?)
        -> AgentRequest
    {
        var worker = request
        worker.prompt = prompts.worker(subtask: record.subtask, index: record.index, count: count, digest: digest)
        worker.maxTurns = maxTurns
        worker.deadline = deadline
        return worker
    }

    private func runWorkersInTurn(_ records: inout [SubtaskRecord], _ request: AgentRequest, prompts: PlanPrompts,
                                  budget: PlanBudget, progress: inout RunProgress, events: any EventSink)
        async throws
    {
        for position in records.indices {
            let record = records[position]
            let sink = SubtaskEventSink(base: events, subtask: record.index)
            if budget.expired() {
                throw timeout(during: record, records: records, progress: progress)
            }
            let workersLeft = records.count - position
            let worker = workerRequest(
                request, record, count: records.count, digest: CombinedAnswer.digest(records[..<position]),
                prompts: prompts, maxTurns: budget.workerTurns(used: progress.turns, workersLeft: workersLeft),
                deadline: budget.workerDeadline(workersLeft: workersLeft))
            sink.notice("subtask \(record.index) of \(records.count): \(record.subtask)")
            let outcome = await runWorker(worker, budget: budget, events: sink)
            records[position].progress = outcome.progress
            progress.merge(outcome.progress)
            records[position].status = outcome.status
            if let fatal = Self.fatalOutcome(outcome.status, budget: budget) {
                if fatal == .timeout { throw timeout(during: records[position], records: records, progress: progress) }
                throw AgentError(fatal, "subtask \(record.index) of \(records.count): \(outcome.failureMessage)",
                                 partialAnswer: CombinedAnswer.render(records, summary: nil), progress: progress)
            }
            if case .failed(let failedOutcome, let message, _) = outcome.status {
                sink.notice("subtask \(record.index) failed (\(failedOutcome.subtype)): \(message); continuing")
            }
        }
    }

    /// Read-only workers at once: none can build on another, so none gets a digest; each gets an equal share of
    /// the turns and all of the time left.
    private func runWorkersAtOnce(_ records: inout [SubtaskRecord], _ request: AgentRequest, prompts: PlanPrompts,
                                  budget: PlanBudget, progress: inout RunProgress, events: any EventSink)
        async throws
    {
        let turns = budget.workerTurns(used: progress.turns, workersLeft: records.count)
        let deadline = budget.workerDeadline(workersLeft: 1)
        let requests = records.map { record in
            workerRequest(request, record, count: records.count, digest: "", prompts: prompts,
                          maxTurns: turns, deadline: deadline)
        }
        let snapshot = records
        let outcomes = await withTaskGroup(of: (Int, WorkerOutcome).self) { group in
            for (position, worker) in requests.enumerated() {
                let record = snapshot[position]
                let sink = SubtaskEventSink(base: events, subtask: record.index)
                sink.notice("subtask \(record.index) of \(snapshot.count): \(record.subtask)")
                group.addTask { (position, await self.runWorker(worker, budget: budget, events: sink)) }
            }
            var collected: [Int: WorkerOutcome] = [:]
            for await (position, outcome) in group { collected[position] = outcome }
            return collected
        }
        for position in records.indices {
            guard let outcome = outcomes[position] else { continue }
            records[position].status = outcome.status
            records[position].progress = outcome.progress
            progress.merge(outcome.progress)
        }
        for record in records {
            guard let fatal = Self.fatalOutcome(record.status, budget: budget) else { continue }
            if fatal == .timeout { throw timeout(during: record, records: records, progress: progress) }
            throw AgentError(fatal, "subtask \(record.index) of \(records.count) could not run",
                             partialAnswer: CombinedAnswer.render(records, summary: nil), progress: progress)
        }
    }

    private struct WorkerOutcome: Sendable {
        var status: SubtaskRecord.Status
        var progress: RunProgress
        var failureMessage: String {
            if case .failed(_, let message, _) = status { message } else { "" }
        }
    }

    /// Never throws: a failed worker is a record, and the caller decides whether the run goes on.
    private func runWorker(_ request: AgentRequest, budget: PlanBudget, events: any EventSink) async -> WorkerOutcome {
        do {
            let answer = try await runBounded(request, events: events)
            return WorkerOutcome(status: .done(answer: answer.text), progress: answer.progress)
        } catch {
            let failure = budget.failure(error)
            return WorkerOutcome(status: .failed(outcome: failure.outcome, message: failure.message,
                                                 partial: failure.partialAnswer),
                                 progress: failure.progress)
        }
    }

    /// A failure that ends the whole run: the run's own time is up, it was interrupted, or the backend cannot
    /// run at all (every later worker would fail the same way). Anything else is one worker's failure.
    private static func fatalOutcome(_ status: SubtaskRecord.Status, budget: PlanBudget) -> RunOutcome? {
        guard case .failed(let outcome, _, _) = status else { return nil }
        if budget.expired() { return .timeout }
        switch outcome {
        case .interrupted, .modelUnavailable, .context: return outcome
        default: return nil
        }
    }

    private func timeout(during record: SubtaskRecord, records: [SubtaskRecord], progress: RunProgress)
        -> AgentError
    {
        AgentError(.timeout, "the run timed out during subtask \(record.index) of \(records.count)",
                   partialAnswer: CombinedAnswer.render(records, summary: nil), progress: progress)
    }

    // MARK: - Summary

    /// One request without tools over the digests. A summary that fails is left out (with a notice): the
    /// subtasks' results are the answer.
    private func summarize(_ records: [SubtaskRecord], _ request: AgentRequest, prompts: PlanPrompts,
                           budget: PlanBudget, progress: inout RunProgress, events: any EventSink)
        async throws -> String?
    {
        var summaryRequest = request
        summaryRequest.prompt = prompts.summary(count: records.count, digest: CombinedAnswer.digest(records))
        summaryRequest.tools = []
        summaryRequest.maxTurns = 1
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

    // MARK: - Deadlines

    /// Runs one backend request, cancelling it when it overruns its deadline by `watchdogGrace`: backends stop
    /// by themselves at the deadline, and this makes sure a plan never waits on one that does not. When the
    /// whole run is cancelled (timeout, signal), the backend's own error is awaited: it carries the progress.
    private func runBounded(_ request: AgentRequest, events: any EventSink) async throws -> AgentAnswer {
        let backend = self.backend
        guard let deadline = request.deadline else { return try await backend.run(request, events: events) }
        let cutoff = deadline + watchdogGrace
        return try await withThrowingTaskGroup(of: Finish.self) { group in
            group.addTask { .answer(try await backend.run(request, events: events)) }
            group.addTask {
                do {
                    try await Task.sleep(until: cutoff, clock: .continuous)
                    return .overrun
                } catch {
                    return .cancelled
                }
            }
            while let finish = try await group.next() {
                switch finish {
                case .answer(let answer):
                    group.cancelAll()
                    return answer
                case .overrun:
                    group.cancelAll()
                    throw AgentError(.timeout, "no answer by the deadline")
                case .cancelled:
                    continue
                }
            }
            throw AgentError(.interrupted, "cancelled")
        }
    }

    private enum Finish: Sendable {
        case answer(AgentAnswer)
        case overrun
        case cancelled
    }
}
