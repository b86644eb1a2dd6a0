/// The request budget (contract: `--context-tokens`). One request may take at most `contextTokens` estimated
/// tokens: instructions + tool definitions + conversation + a reserve for the answer. Every figure comes from
/// `TokenEstimator`, so the same text always costs the same.
public struct ContextBudget: Sendable, Equatable {
    public let contextTokens: Int
    /// Estimated tokens of the instructions (the system message).
    public let instructionTokens: Int
    /// Estimated tokens of all tool definitions as sent (the OpenAI `tools` array as compact JSON).
    public let toolTokens: Int

    public init(contextTokens: Int, instructions: String, tools: [ToolSpec]) {
        self.contextTokens = contextTokens
        self.instructionTokens = TokenEstimator.estimate(instructions)
        self.toolTokens = ContextBudget.toolDefinitionTokens(tools)
    }

    /// Tokens kept free for the model's answer (sent as `max_tokens`): an eighth of the window, 64 to 1024.
    public var answerReserve: Int { ContextBudget.answerReserve(contextTokens: contextTokens) }

    public static func answerReserve(contextTokens: Int) -> Int {
        min(1024, max(64, contextTokens / 8))
    }

    /// The estimate of the tool definitions as the OpenAI backend sends them (zero tools cost nothing).
    public static func toolDefinitionTokens(_ tools: [ToolSpec]) -> Int {
        tools.isEmpty ? 0 : TokenEstimator.estimate(JSONValue.array(tools.map(\.openAIDefinition)).jsonText)
    }

    /// Instructions plus tool definitions: the fixed cost of every request.
    public var fixedTokens: Int { instructionTokens + toolTokens }

    /// What the conversation (everything but tool definitions and the answer reserve) may take.
    public var conversationTokens: Int { contextTokens - toolTokens - answerReserve }

    /// Throws `error_context` (exit 4) with the figures when instructions, tool definitions, the answer
    /// reserve and the task itself cannot fit in one request.
    public func check(task: String) throws {
        let taskTokens = TokenEstimator.estimate(task)
        let need = fixedTokens + answerReserve + taskTokens
        guard need > contextTokens else { return }
        let what = fixedTokens > contextTokens
            ? "instructions plus tool definitions alone exceed it"
            : "nothing is left for the conversation"
        throw AgentError(.context, "the budget cannot be met: instructions \(instructionTokens) + tool definitions "
            + "\(toolTokens) + answer reserve \(answerReserve) + task \(taskTokens) = \(need) estimated tokens "
            + "> --context-tokens \(contextTokens) (\(what)); raise --context-tokens, shorten --system or "
            + "the prompt, or offer fewer tools (--read-only, --no-commands)")
    }
}

/// The built-in instructions (kept short: on the on-device model they share 4,096 tokens with everything else).
public enum BuiltInInstructions {
    // Short on purpose: with the seven tool definitions (551 estimated tokens as OpenAI JSON) the fixed part of
    // every request stays within 600 estimated tokens (issue 3, item 6); small models also follow short prompts
    // better. Tool errors explain themselves and the loop stops repeated calls, so neither needs a rule here.
    public static let text = """
        You are apple-code, a coding agent in one workspace. Use the tools to look before answering; readFile \
        before editFile. Then answer briefly.
        """

    /// Built-in instructions followed by the user's extra instructions (`--system`, `--system-file`).
    public static func combined(with extra: String?) -> String {
        guard let extra, extra.contains(where: { !$0.isWhitespace }) else { return text }
        return text + "\n\n" + extra
    }
}
