import AppleCodeCore

/// How the run's `--max-turns` and `--timeout` are shared out. The planner gets a quarter of each (it only
/// looks around); each worker gets an equal share of what is left when it starts, so time and turns an early
/// worker does not use pass on to later ones.
///
/// The turn rule (a turn is one model request; `--max-turns` bounds them all): the planner needs one turn
/// (it gets a quarter, at least one), the summary one, and every worker at least one. So a plan needs
/// `minimumTurns` (3), below that the task runs directly; the plan is capped to `workerSlots` subtasks (extras are
/// merged into the last one); and no part is ever given more turns than are left. Planner + workers + summary
/// therefore never exceed `--max-turns`.
struct PlanBudget: Sendable {
    let maxTurns: Int
    let deadline: ContinuousClock.Instant?

    /// The planner, one worker and the summary.
    static let minimumTurns = 3
    /// The summary request after the workers.
    static let summaryTurns = 1

    var allowsPlan: Bool { maxTurns >= Self.minimumTurns }

    var plannerTurns: Int { max(1, maxTurns / 4) }

    /// How many workers the turns pay for, one turn each, after the planner's share and the summary's turn.
    var workerSlots: Int { max(1, maxTurns - plannerTurns - Self.summaryTurns) }

    func turnsLeft(used: Int) -> Int { max(0, maxTurns - used) }

    func plannerDeadline(now: ContinuousClock.Instant = .now) -> ContinuousClock.Instant? {
        deadline.map { now + (($0 - now) / 4) }
    }

    /// An equal share of the turns left after `reserved` (kept for the summary). With the plan capped to
    /// `workerSlots` every worker gets at least one; never more than is left, so a worker cannot push the run
    /// past `--max-turns` (a share of 0 makes the backend stop before its first request).
    func workerTurns(used: Int, workersLeft: Int, reserved: Int = 0) -> Int {
        turnsLeft(used: used + reserved) / max(1, workersLeft)
    }

    /// The last worker may use all the time left: when it runs out, the run has timed out (exit 124) and the
    /// summary is not written.
    func workerDeadline(workersLeft: Int, now: ContinuousClock.Instant = .now) -> ContinuousClock.Instant? {
        deadline.map { now + max(.zero, $0 - now) / max(1, workersLeft) }
    }

    func expired(now: ContinuousClock.Instant = .now) -> Bool {
        deadline.map { now >= $0 } ?? false
    }

    /// Any error of a backend run as an `AgentError`. A run cancelled once its time is up was cancelled by the
    /// `--timeout` watch, so that is a timeout, not an interruption.
    func failure(_ error: any Error) -> AgentError {
        let failure = AgentError.from(error)
        guard failure.outcome == .interrupted, expired() else { return failure }
        return AgentError(.timeout, "the run timed out", partialAnswer: failure.partialAnswer,
                          progress: failure.progress)
    }
}

/// Passes events on except text deltas: the planner's reply and the summary are not part of the answer's
/// stream (the combined answer is emitted once at the end).
struct TextDroppingSink: EventSink {
    let base: any EventSink
    func emit(_ event: AgentEvent) {
        if case .text = event.kind { return }
        base.emit(event)
    }
}

extension AgentError {
    /// Any error of a backend run as an `AgentError`: cancellation becomes `.interrupted`, anything unexpected
    /// a backend error.
    static func from(_ error: any Error) -> AgentError {
        if let agentError = error as? AgentError { return agentError }
        if error is CancellationError { return AgentError(.interrupted, "cancelled") }
        return AgentError(.backendError, String(describing: error))
    }
}
