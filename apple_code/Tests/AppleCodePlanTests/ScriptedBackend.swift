import AppleCodeCore
import Synchronization

/// A fake backend that answers each `run` with the next scripted step and records every request, so the tests
/// can check exactly what the planner sent to each context window.
struct ScriptedBackend: AgentBackend {
    typealias Step = @Sendable (AgentRequest, any EventSink) async throws -> AgentAnswer

    let name = "scripted"
    let model = "scripted-model"
    let contextTokens = 4096
    let steps: [Step]
    let log = RequestLog()

    init(_ steps: [Step]) { self.steps = steps }

    func availability() async -> Availability { Availability(available: true, reason: "scripted") }

    func run(_ request: AgentRequest, events: any EventSink) async throws -> AgentAnswer {
        let index = log.record(request)
        guard index < steps.count else { return AgentAnswer(text: "(script exhausted)", progress: RunProgress()) }
        return try await steps[index](request, events)
    }

    var requests: [AgentRequest] { log.requests }
}

final class RequestLog: Sendable {
    private let storage = Mutex<[AgentRequest]>([])
    func record(_ request: AgentRequest) -> Int {
        storage.withLock { requests in
            requests.append(request)
            return requests.count - 1
        }
    }
    var requests: [AgentRequest] { storage.withLock { $0 } }
}

final class EventLog: EventSink {
    private let storage = Mutex<[AgentEvent]>([])
    func emit(_ event: AgentEvent) { storage.withLock { $0.append(event) } }
    var events: [AgentEvent] { storage.withLock { $0 } }
    var notices: [String] {
        events.compactMap { if case .notice(let message) = $0.kind { message } else { nil } }
    }
    var texts: [(subtask: Int?, delta: String)] {
        events.compactMap { if case .text(let delta) = $0.kind { ($0.subtask, delta) } else { nil } }
    }
}

/// A tool that only has a name: the planner filters tools by name and never runs them itself.
struct NamedTool: AgentTool {
    let spec: ToolSpec
    init(_ name: String) { spec = ToolSpec(name: name, description: "test tool \(name)", parameters: []) }
    func run(_ arguments: ToolArguments, context: ToolContext) async -> ToolResult {
        ToolResult(text: "ok", summary: "ok")
    }
}

let allToolNames = ["readFile", "writeFile", "editFile", "listDirectory", "searchFiles", "searchContent", "runCommand"]

func makeRequest(_ prompt: String = "Fix the three modules", tools: [String] = allToolNames, maxTurns: Int = 16,
                 deadline: ContinuousClock.Instant? = nil) -> AgentRequest {
    AgentRequest(prompt: prompt, instructions: "You are a coding agent.", tools: tools.map { NamedTool($0) },
                 workspace: "/tmp/ws", maxTurns: maxTurns, contextTokens: 4096, deadline: deadline)
}

func answer(_ text: String, turns: Int = 1, files: [String] = [], commands: Int = 0,
            input: Int = 100, output: Int = 10) -> ScriptedBackend.Step {
    { _, _ in
        AgentAnswer(text: text, progress: RunProgress(turns: turns, usage: Usage(inputTokens: input, outputTokens: output),
                                                      filesChanged: files, commandsRun: commands))
    }
}

func failure(_ outcome: RunOutcome, _ message: String, partial: String = "", turns: Int = 1,
             files: [String] = []) -> ScriptedBackend.Step {
    { _, _ in
        throw AgentError(outcome, message, partialAnswer: partial,
                         progress: RunProgress(turns: turns, filesChanged: files))
    }
}
