/// How a run ends: exit code and `result` subtype, one table for the whole program (contract: Exit codes).
public enum RunOutcome: String, Sendable, Equatable, CaseIterable {
    case success
    case backendError = "error_backend"
    case maxTurns = "error_max_turns"
    case guardrail = "error_guardrail"
    case usage = "error_usage"
    case modelUnavailable = "error_model_unavailable"
    case context = "error_context"
    /// `--verify`: the check still failed after the repair rounds.
    case verify = "error_verify"
    case timeout = "error_timeout"
    case interrupted = "error_interrupted"

    public var subtype: String { rawValue }
    public var isError: Bool { self != .success }

    public var exitCode: Int32 {
        switch self {
        case .success: 0
        case .backendError, .maxTurns, .guardrail: 1
        case .usage: 2
        case .modelUnavailable: 3
        case .context: 4
        case .verify: 5
        case .timeout: 124
        case .interrupted: 130
        }
    }
}

/// A run that could not finish. `partialAnswer` is what the model had said so far (reported on timeout).
public struct AgentError: Error, Sendable, CustomStringConvertible {
    public let outcome: RunOutcome
    public let message: String
    public var partialAnswer: String
    /// Work done before the failure still counts in the result.
    public var progress: RunProgress
    /// Set when the run could go on with another model (Apple's model stayed rate-limited): a prompt for a fresh
    /// window there, with the task and what was done (`FallbackBackend`).
    public var continuation: String?

    public init(_ outcome: RunOutcome, _ message: String, partialAnswer: String = "", progress: RunProgress = .init(),
                continuation: String? = nil) {
        self.outcome = outcome
        self.message = message
        self.partialAnswer = partialAnswer
        self.progress = progress
        self.continuation = continuation
    }

    public var description: String { "\(outcome.subtype): \(message)" }
}

public struct Usage: Sendable, Equatable {
    public var inputTokens: Int
    public var outputTokens: Int
    /// True where tokens were counted by `TokenEstimator` rather than reported by the model.
    public var estimated: Bool
    /// What every request pays before the conversation (instructions and tool definitions), in the same kind of
    /// count as the rest (`estimated`); the largest of a plan's runs. Nil where no request was made.
    public var fixedTokens: Int?

    public init(inputTokens: Int = 0, outputTokens: Int = 0, estimated: Bool = true, fixedTokens: Int? = nil) {
        self.inputTokens = inputTokens
        self.outputTokens = outputTokens
        self.estimated = estimated
        self.fixedTokens = fixedTokens
    }

    public static func + (a: Usage, b: Usage) -> Usage {
        let fixed = [a.fixedTokens, b.fixedTokens].compactMap { $0 }.max()
        return Usage(inputTokens: a.inputTokens + b.inputTokens, outputTokens: a.outputTokens + b.outputTokens,
                     estimated: a.estimated || b.estimated, fixedTokens: fixed)
    }
}

/// Counters a run accumulates; summed over plan workers.
public struct RunProgress: Sendable, Equatable {
    public var turns: Int
    public var usage: Usage
    /// Workspace-relative paths, in first-change order, without repeats.
    public private(set) var filesChanged: [String]
    public var commandsRun: Int
    /// `--verify`: where the check stands (the latest report of the run or of its plan).
    public var verify: VerifyReport?

    public init(turns: Int = 0, usage: Usage = Usage(), filesChanged: [String] = [], commandsRun: Int = 0,
                verify: VerifyReport? = nil) {
        self.turns = turns
        self.usage = usage
        self.filesChanged = []
        self.commandsRun = commandsRun
        self.verify = verify
        for file in filesChanged { noteChanged(file) }
    }

    public mutating func noteChanged(_ path: String) {
        if !filesChanged.contains(path) { filesChanged.append(path) }
    }

    public mutating func record(_ result: ToolResult) {
        for file in result.filesChanged { noteChanged(file) }
        commandsRun += result.commandsRun
    }

    public mutating func merge(_ other: RunProgress) {
        turns += other.turns
        usage = usage + other.usage
        for file in other.filesChanged { noteChanged(file) }
        commandsRun += other.commandsRun
        if let report = other.verify { verify = report }
    }
}

/// A run that reached an answer.
public struct AgentAnswer: Sendable, Equatable {
    public var text: String
    public var progress: RunProgress

    public init(text: String, progress: RunProgress) {
        self.text = text
        self.progress = progress
    }
}
