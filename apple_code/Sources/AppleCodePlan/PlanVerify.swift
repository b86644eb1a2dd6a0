import AppleCodeCore

/// `--verify` with `--plan`: the check runs once the last subtask is done. A failure becomes one more worker (a
/// fresh window with the task, the digest and the end of the check's output) and the check runs again after it,
/// for at most `--verify-rounds` such repairs, each paid for from the turns the summary does not need.
extension PlanRunner {
    func verifyPlan(_ start: Verification, _ records: inout [SubtaskRecord], _ request: AgentRequest,
                    prompts: PlanPrompts, budget: PlanBudget, progress: inout RunProgress,
                    events: any EventSink) async throws
    {
        var verification = start
        while true {
            // A repair worker needs two turns: one with tools, one to answer.
            let turnsLeft = budget.turnsLeft(used: progress.turns + PlanBudget.summaryTurns)
            let verdict = await verification.verify(
                deadline: request.deadline, events: events, feedbackTokens: max(64, request.contextTokens / 4),
                cannotRepair: turnsLeft < 2 ? "--max-turns \(budget.maxTurns) leaves no turns for another" : nil)
            progress.verify = verification.report
            if budget.expired() {
                throw AgentError(.timeout, "the run timed out while checking its work",
                                 partialAnswer: CombinedAnswer.render(records, summary: nil), progress: progress)
            }
            switch verdict {
            case .passed:
                return
            case .failed(let message):
                throw AgentError(.verify, message, partialAnswer: CombinedAnswer.render(records, summary: nil),
                                 progress: progress)
            case .repair(let feedback):
                let record = SubtaskRecord(index: records.count + 1,
                                           subtask: "make the check `\(verification.check.command)` pass "
                                               + "(repair round \(verification.report.rounds))")
                records.append(record)
                let sink = SubtaskEventSink(base: events, subtask: record.index)
                sink.notice("subtask \(record.index): \(record.subtask)")
                let worker = workerRequest(
                    request, SubtaskRecord(index: record.index, subtask: feedback), count: records.count,
                    digest: CombinedAnswer.digest(records.dropLast()), prompts: prompts,
                    maxTurns: max(2, turnsLeft / (verification.check.rounds - verification.report.rounds + 1)),
                    deadline: budget.workerDeadline(workersLeft: 1))
                let outcome = await runWorker(worker, budget: budget, events: sink)
                records[records.count - 1].progress = outcome.progress
                records[records.count - 1].status = outcome.status
                progress.merge(outcome.progress)
                progress.verify = verification.report
                if let fatal = Self.fatalOutcome(outcome.status, budget: budget) {
                    if fatal == .timeout { throw timeout(during: record, records: records, progress: progress) }
                    throw AgentError(fatal, "subtask \(record.index): \(outcome.failureMessage)",
                                     partialAnswer: CombinedAnswer.render(records, summary: nil), progress: progress)
                }
            }
        }
    }
}
