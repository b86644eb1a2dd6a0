/// A model backend that can run a whole task with tools. The Foundation Models backend runs the framework's
/// own tool loop; the OpenAI-compatible backend runs the core agent loop. Each `run` starts a fresh context
/// window, which is what the planner relies on.
public protocol AgentBackend: Sendable {
    /// "fm" or "openai": the name in events and `--check`.
    var name: String { get }
    /// The model name reported in events.
    var model: String { get }
    /// The context window one request must fit (`--context-tokens`, else the model's window).
    var contextTokens: Int { get }

    /// Whether the backend can run now, and if not, what the user should do.
    func availability() async -> Availability

    /// Runs one task to an answer. Throws `AgentError` (timeout, max turns, guardrail, unavailable, context...).
    /// Honours task cancellation: a cancelled run stops its request and commands promptly.
    func run(_ request: AgentRequest, events: any EventSink) async throws -> AgentAnswer
}

public struct Availability: Sendable, Equatable {
    public var available: Bool
    /// Why not (and what to do), or a short description when available.
    public var reason: String

    public init(available: Bool, reason: String) {
        self.available = available
        self.reason = reason
    }

    /// The `--check` JSON: `{"backend":..,"available":bool,"reason":..}`.
    public func checkJSON(backend: String) -> JSONValue {
        .object(["backend": .string(backend), "available": .bool(available), "reason": .string(reason)])
    }
}

/// Everything one run (or one plan worker) needs.
public struct AgentRequest: Sendable {
    /// The task (the user's prompt, or a worker's subtask brief).
    public var prompt: String
    /// Built-in instructions followed by `--system` text.
    public var instructions: String
    public var tools: [any AgentTool]
    /// Absolute workspace path (`--cwd`).
    public var workspace: String
    public var maxTurns: Int
    public var contextTokens: Int
    /// Wall-clock end of the run (`--timeout`).
    public var deadline: ContinuousClock.Instant?
    public var verbose: Bool
    /// `--verify`: the check a final answer must pass (nil: the model's answer ends the run).
    public var verify: Verification?
    /// Diagnostics for `--verbose` (stderr).
    public var log: @Sendable (String) -> Void
    /// `--temperature`, `--max-tokens` (unset: the backend's own).
    public var sampling = Sampling()
    /// The files the task names that the prompt already shows (`TaskFiles`, workspace-relative): a loop need not
    /// make the model look first, and counts them as read.
    public var taskFilesShown: [String] = []

    public init(prompt: String, instructions: String, tools: [any AgentTool], workspace: String,
                maxTurns: Int = 16, contextTokens: Int = 4096, deadline: ContinuousClock.Instant? = nil,
                verbose: Bool = false, verify: Verification? = nil,
                log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.prompt = prompt
        self.instructions = instructions
        self.tools = tools
        self.workspace = workspace
        self.maxTurns = maxTurns
        self.contextTokens = contextTokens
        self.deadline = deadline
        self.verbose = verbose
        self.verify = verify
        self.log = log
    }
}
