import AppleCodeCore

/// The token budget of one Foundation Models window, estimated before any request (the 26.0-26.3 SDKs have no
/// token counter). Instructions and tool definitions are paid again by every new session.
struct ContextPlan: Sendable, Equatable {
    /// Below this, a window holds no useful task and answer: refuse up front (exit 4) instead of overflowing.
    static let minimumRoom = 256

    let window: Int
    let instructionsTokens: Int
    let toolTokens: Int
    /// Kept free for the answer; also the `maximumResponseTokens` of each response.
    let answerReserve: Int

    init(window: Int, instructions: String, tools: [ToolSpec]) {
        self.window = window
        instructionsTokens = TokenEstimator.estimate(instructions)
        toolTokens = tools.reduce(0) { $0 + TokenEstimator.estimate($1.openAIDefinition.jsonText) }
        answerReserve = min(1024, max(64, window / 5))
    }

    /// Instructions plus tool definitions: what every session costs before the prompt.
    var fixedTokens: Int { instructionsTokens + toolTokens }

    /// What is left for the prompt, tool calls and their results.
    var workingTokens: Int { window - fixedTokens - answerReserve }

    /// The most one tool result may take, so that one result never fills the window alone.
    var resultCap: Int { max(64, workingTokens / 2) }

    /// The most a prompt (the task, or a condensed history) may take, leaving room for tool results.
    var promptLimit: Int { max(64, workingTokens * 2 / 3) }

    /// Throws `AgentError(.context)` (exit 4) when instructions and tool definitions leave no room.
    func check() throws {
        if fixedTokens + Self.minimumRoom > window {
            throw AgentError(.context, """
                instructions (\(instructionsTokens) tokens) and tool definitions (\(toolTokens) tokens) leave less \
                than \(Self.minimumRoom) tokens of the \(window)-token context window for the task and the answer; \
                shorten --system, offer fewer tools (--read-only, --no-commands) or raise --context-tokens
                """)
        }
    }

    /// One line of figures for `--verbose`.
    var figures: String {
        "fm budget (estimated tokens): window \(window), instructions \(instructionsTokens), "
            + "tool definitions \(toolTokens), answer reserve \(answerReserve), "
            + "left for the task and tool results \(workingTokens), per result at most \(resultCap)"
    }
}
