import AppleCodeCore

extension PlanRunner {
    /// Runs one backend request, cancelling it when it overruns its deadline by `watchdogGrace`: backends stop
    /// by themselves at the deadline, and this makes sure a plan never waits on one that does not. When the
    /// whole run is cancelled (timeout, signal), the backend's own error is awaited: it carries the progress.
    func runBounded(_ request: AgentRequest, events: any EventSink) async throws -> AgentAnswer {
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
