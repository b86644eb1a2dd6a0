import AppleCodeCore
import Foundation
@testable import AppleCodeAgent

/// A model that replays replies and records every request it was sent.
final class ScriptedModel: ChatModel, @unchecked Sendable {
    private let lock = NSLock()
    private var replies: [ChatReply]
    private var requests: [ChatRequest] = []

    init(_ replies: [ChatReply]) { self.replies = replies }

    func complete(_ request: ChatRequest, onText: (String) -> Void) async throws -> ChatReply {
        let reply = try lock.withLock {
            requests.append(request)
            guard !replies.isEmpty else { throw AgentError(.backendError, "script exhausted") }
            return replies.removeFirst()
        }
        onText(reply.text)
        return reply
    }

    var sent: [ChatRequest] { lock.withLock { requests } }
}

func call(_ name: String, _ arguments: String, id: String = "") -> ChatReply {
    ChatReply(text: "", calls: [ModelToolCall(id: id, name: name, argumentsText: arguments)])
}

/// A tool that returns a fixed text and records the context it was given.
final class FakeTool: AgentTool, @unchecked Sendable {
    let spec: ToolSpec
    let output: String
    let changes: [String]
    private let lock = NSLock()
    private var contexts: [ToolContext] = []

    init(_ name: String, output: String, changes: [String] = []) {
        self.spec = ToolSpec(name: name, description: "Fake \(name).",
                             parameters: [ParameterSpec("path", .string, "A path.", required: false)])
        self.output = output
        self.changes = changes
    }

    func run(_ arguments: ToolArguments, context: ToolContext) async -> ToolResult {
        lock.withLock { contexts.append(context) }
        return ToolResult(text: output, summary: "\(spec.name) \(arguments.string("path") ?? "")", filesChanged: changes)
    }

    var maxTokensSeen: [Int] { lock.withLock { contexts.map(\.maxResultTokens) } }
}

final class RecordingSink: EventSink, @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [AgentEvent] = []
    func emit(_ event: AgentEvent) { lock.withLock { stored.append(event) } }
    var events: [AgentEvent] { lock.withLock { stored } }
    var notices: [String] { events.compactMap { if case .notice(let m) = $0.kind { m } else { nil } } }
    var results: [(ok: Bool, summary: String)] {
        events.compactMap { if case .toolResult(_, _, let ok, let s, _) = $0.kind { (ok, s) } else { nil } }
    }
}

func request(_ tools: [any AgentTool], context: Int = 4096, maxTurns: Int = 16, prompt: String = "Do the task.",
             deadline: ContinuousClock.Instant? = nil) -> AgentRequest {
    AgentRequest(prompt: prompt, instructions: BuiltInInstructions.text, tools: tools, workspace: "/tmp",
                 maxTurns: maxTurns, contextTokens: context, deadline: deadline)
}
