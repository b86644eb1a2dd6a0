import AppleCodeCore

/// How the run's `--max-turns` and `--timeout` are shared out. The planner gets a quarter of each (it only
/// looks around); each worker gets an equal share of what is left when it starts, so time and turns an early
/// worker does not use pass on to later ones.
struct PlanBudget: Sendable {
    let maxTurns: Int
    let deadline: ContinuousClock.Instant?

    var plannerTurns: Int { max(1, maxTurns / 4) }

    func plannerDeadline(now: ContinuousClock.Instant = .now) -> ContinuousClock.Instant? {
        deadline.map { now + (($0 - now) / 4) }
    }

    /// At least one turn, even when earlier parts used up the budget: a worker that cannot take a turn
    /// would only report a failure. `reserved`: turns kept for what follows the workers (the summary request),
    /// so a run whose workers use their shares stays within `--max-turns`.
    func workerTurns(used: Int, workersLeft: Int, reserved: Int = 0) -> Int {
        max(1, (maxTurns - used - reserved) / max(1, workersLeft))
    }

    /// The summary request after the workers.
    static let summaryTurns = 1

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
