import AppleCodeCore

/// The workers of a plan: each subtask as a plain backend run in a fresh window, one at a time (each with the
/// digest of the ones before) or, for read-only runs, all at once.
extension PlanRunner {
    func workerRequest(_ request: AgentRequest, _ record: SubtaskRecord, count: Int, digest: String,
                               prompts: PlanPrompts, maxTurns: Int, deadline: ContinuousClock.Instant?)
        -> AgentRequest
    {
        var worker = request
        worker.prompt = prompts.worker(subtask: record.subtask, index: record.index, count: count, digest: digest)
        worker.maxTurns = maxTurns
        worker.deadline = deadline
        // The plan checks once after its last step (`verifyPlan`), not after each worker.
        worker.verify = nil
        return worker
    }

    func runWorkersInTurn(_ records: inout [SubtaskRecord], _ request: AgentRequest, prompts: PlanPrompts,
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
                prompts: prompts, maxTurns: budget.workerTurns(used: progress.turns, workersLeft: workersLeft,
                                                             reserved: PlanBudget.summaryTurns),
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
    func runWorkersAtOnce(_ records: inout [SubtaskRecord], _ request: AgentRequest, prompts: PlanPrompts,
                                  budget: PlanBudget, progress: inout RunProgress, events: any EventSink)
        async throws
    {
        let turns = budget.workerTurns(used: progress.turns, workersLeft: records.count,
                                       reserved: PlanBudget.summaryTurns)
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

    struct WorkerOutcome: Sendable {
        var status: SubtaskRecord.Status
        var progress: RunProgress
        var failureMessage: String {
            if case .failed(_, let message, _) = status { message } else { "" }
        }
    }

    /// Never throws: a failed worker is a record, and the caller decides whether the run goes on.
    func runWorker(_ request: AgentRequest, budget: PlanBudget, events: any EventSink) async -> WorkerOutcome {
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
    static func fatalOutcome(_ status: SubtaskRecord.Status, budget: PlanBudget) -> RunOutcome? {
        guard case .failed(let outcome, _, _) = status else { return nil }
        if budget.expired() { return .timeout }
        switch outcome {
        case .interrupted, .modelUnavailable, .context: return outcome
        default: return nil
        }
    }

    func timeout(during record: SubtaskRecord, records: [SubtaskRecord], progress: RunProgress)
        -> AgentError
    {
        AgentError(.timeout, "the run timed out during subtask \(record.index) of \(records.count)",
                   partialAnswer: CombinedAnswer.render(records, summary: nil), progress: progress)
    }
}
