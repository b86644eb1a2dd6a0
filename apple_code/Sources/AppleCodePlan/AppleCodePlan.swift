import AppleCodeCore

/// Plan-and-execute (`--plan`): one planner request splits the task into subtasks, each runs as a worker in a
/// fresh context window on the same backend, and the results are combined. (Placeholder until it lands: runs
/// the task directly.)
public struct PlanRunner: Sendable {
    public let backend: any AgentBackend
    /// `--max-subtasks` (default 5, capped at 20).
    public let maxSubtasks: Int
    /// `--parallel`: workers at once; allowed only for read-only runs.
    public let parallel: Bool

    public init(backend: any AgentBackend, maxSubtasks: Int = 5, parallel: Bool = false) {
        self.backend = backend
        self.maxSubtasks = maxSubtasks
        self.parallel = parallel
    }

    /// Runs `request` as a plan. Throws `AgentError` like `AgentBackend.run`.
    public func run(_ request: AgentRequest, events: any EventSink) async throws -> AgentAnswer {
        try await backend.run(request, events: events)
    }
}
