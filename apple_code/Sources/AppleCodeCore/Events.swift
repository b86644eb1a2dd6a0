/// The events of a run (contract: Output, stream-json). Every backend and the planner emit these; the CLI
/// renders them (one JSON line each in stream-json, the answer only in text).
public struct AgentEvent: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case start(StartInfo)
        case toolCall(id: String, name: String, arguments: JSONValue)
        case toolResult(id: String, name: String, ok: Bool, summary: String, truncated: Bool)
        case text(delta: String)
        case notice(String)
        /// `--verify`: the check ran; where it stands now.
        case verify(VerifyReport)
        case result(RunReport)
    }

    public var kind: Kind
    /// Set by the planner on events of a worker, so a caller can follow a plan run.
    public var subtask: Int?
    /// Only on `toolResult`: what a caller may show of the call beyond its summary.
    public var detail: ToolResultDetail?

    public init(_ kind: Kind, subtask: Int? = nil, detail: ToolResultDetail? = nil) {
        self.kind = kind
        self.subtask = subtask
        self.detail = detail
    }
}

/// The optional fields of a `tool_result` event (contract: stream-json): the text the model was given, cut to
/// `maxOutputBytes`; a command's exit code; a changed text file's unified diff. For a person reading the run
/// afterwards (apple-flow's web page); none of it goes back to the model.
public struct ToolResultDetail: Sendable, Equatable {
    public static let maxOutputBytes = 4096

    public var output: String?
    public var exitCode: Int?
    public var diff: String?

    public init(output: String? = nil, exitCode: Int? = nil, diff: String? = nil) {
        self.output = output
        self.exitCode = exitCode
        self.diff = diff
    }

    /// `text` within `maxOutputBytes`: its start and its end, with how much was left out between them.
    public static func bounded(_ text: String, limit: Int = maxOutputBytes) -> String {
        let size = text.utf8.count
        guard size > limit else { return text }
        let tail = TokenEstimator.suffix(text, bytes: limit / 4)
        let head = TokenEstimator.prefix(text, bytes: limit - limit / 4 - 64)
        let omitted = size - head.utf8.count - tail.utf8.count
        return head + "\n[... \(omitted) bytes not shown ...]\n" + tail
    }
}

public struct StartInfo: Sendable, Equatable {
    public var version: String
    public var backend: String
    public var model: String
    public var cwd: String
    public var contextTokens: Int
    public var tools: [String]

    public init(version: String = AppleCodeVersion.current, backend: String, model: String, cwd: String,
                contextTokens: Int, tools: [String]) {
        self.version = version
        self.backend = backend
        self.model = model
        self.cwd = cwd
        self.contextTokens = contextTokens
        self.tools = tools
    }
}

/// The final `result` event.
public struct RunReport: Sendable, Equatable {
    public var outcome: RunOutcome
    public var result: String
    public var durationMs: Int
    public var progress: RunProgress
    public var backend: String
    public var model: String

    public init(outcome: RunOutcome, result: String, durationMs: Int, progress: RunProgress,
                backend: String, model: String) {
        self.outcome = outcome
        self.result = result
        self.durationMs = durationMs
        self.progress = progress
        self.backend = backend
        self.model = model
    }
}

/// Where events go. Implementations must be safe to call from any task (tools run concurrently on FM).
public protocol EventSink: Sendable {
    func emit(_ event: AgentEvent)
}

extension EventSink {
    public func emit(_ kind: AgentEvent.Kind) { emit(AgentEvent(kind)) }
    public func notice(_ message: String) { emit(.notice(message)) }
    /// The `tool_result` event of call `id`: its status and summary, and the detail the output carries.
    public func toolResult(id: String, name: String, _ result: ToolResult) {
        emit(AgentEvent(.toolResult(id: id, name: name, ok: result.ok, summary: result.summary,
                                    truncated: result.truncated), detail: result.eventDetail))
    }
}

/// Tags every event with a subtask id before passing it on (used by the planner for workers).
public struct SubtaskEventSink: EventSink {
    public let base: any EventSink
    public let subtask: Int
    public init(base: any EventSink, subtask: Int) {
        self.base = base
        self.subtask = subtask
    }
    public func emit(_ event: AgentEvent) {
        var tagged = event
        tagged.subtask = subtask
        base.emit(tagged)
    }
}
