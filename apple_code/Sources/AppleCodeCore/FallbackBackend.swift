/// `--fallback-openai`: a run on Apple's model that stays rate-limited past its retries (command-line processes
/// without a window are reported to be rate-limited by the framework) goes on with the configured OpenAI-compatible
/// server, from the prompt the failed run left (`AgentError.continuation`: the task and what was done), with the
/// turns it left. A `notice` says so; the result counts both runs' work.
public struct FallbackBackend: AgentBackend {
    public let primary: any AgentBackend
    /// Makes the fallback backend when it is needed (it probes the server then); throws when it cannot be reached.
    public let fallback: @Sendable () async throws -> any AgentBackend
    /// Told when the run moves, so the result names the backend that answered.
    public let onSwitch: @Sendable (_ backend: String, _ model: String) -> Void

    public init(primary: any AgentBackend, fallback: @escaping @Sendable () async throws -> any AgentBackend,
                onSwitch: @escaping @Sendable (String, String) -> Void = { _, _ in }) {
        self.primary = primary
        self.fallback = fallback
        self.onSwitch = onSwitch
    }

    public var name: String { primary.name }
    public var model: String { primary.model }
    public var contextTokens: Int { primary.contextTokens }

    public func availability() async -> Availability { await primary.availability() }

    public func run(_ request: AgentRequest, events: any EventSink) async throws -> AgentAnswer {
        do {
            return try await primary.run(request, events: events)
        } catch let stuck as AgentError where stuck.continuation != nil && !Task.isCancelled {
            guard let prompt = stuck.continuation else { throw stuck }
            let backend: any AgentBackend
            do {
                backend = try await fallback()
            } catch {
                let why = (error as? AgentError)?.message ?? "\(error)"
                request.log("fallback: the OpenAI-compatible server cannot be used: \(why)")
                throw AgentError(stuck.outcome, "\(stuck.message); the fallback server could not be used either "
                    + "(\(why))", partialAnswer: stuck.partialAnswer, progress: stuck.progress)
            }
            let done = stuck.progress
            events.notice("\(stuck.message); the run goes on with the OpenAI-compatible server (\(backend.model)), "
                + "from what was done so far")
            request.log("fallback: \(primary.name) stayed rate-limited; continuing on \(backend.name) "
                + "(\(backend.model)) after \(done.turns) turns")
            onSwitch(backend.name, backend.model)
            var moved = request
            moved.prompt = prompt
            moved.contextTokens = backend.contextTokens
            moved.maxTurns = max(1, request.maxTurns - done.turns)
            do {
                var answer = try await backend.run(moved, events: events)
                var total = done
                total.merge(answer.progress)
                answer.progress = total
                return answer
            } catch var failure as AgentError {
                var total = done
                total.merge(failure.progress)
                failure.progress = total
                throw failure
            }
        }
    }
}
