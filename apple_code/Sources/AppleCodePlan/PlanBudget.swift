import AppleCodeCore

/// How the run's `--max-turns` and `--timeout` are shared out. The planner gets a quarter of each (it only
/// looks around); each worker gets an equal share of what is left when it starts, so time and turns an early
/// worker does not use pass on to later ones. A small slice of the time is kept for the summary request.
struct PlanBudget: Sendable {
    let maxTurns: Int
    let deadline: ContinuousClock.Instant?

    var plannerTurns: Int { max(1, maxTurns / 4) }

    func plannerDeadline(now: ContinuousClock.Instant = .now) -> ContinuousClock.Instant? {
        deadline.map { now + (($0 - now) / 4) }
    }

    /// At least one turn, even when earlier parts used up the budget: a worker that cannot take a turn
    /// would only report a failure.
    func workerTurns(used: Int, workersLeft: Int) -> Int {
        max(1, (maxTurns - used) / max(1, workersLeft))
    }

    /// Kept back from the workers for the summary request: a tenth of the time left, at most 20 seconds.
    func summaryReserve(now: ContinuousClock.Instant = .now) -> Duration {
        guard let deadline else { return .zero }
        return min(max(.zero, deadline - now) * 0.1, .seconds(20))
    }

    func workerDeadline(workersLeft: Int, reserve: Duration, now: ContinuousClock.Instant = .now)
        -> ContinuousClock.Instant?
    {
        deadline.map { end in
            let available = max(.zero, (end - reserve) - now)
            return now + available / max(1, workersLeft)
        }
    }

    func expired(now: ContinuousClock.Instant = .now) -> Bool {
        deadline.map { now >= $0 } ?? false
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
