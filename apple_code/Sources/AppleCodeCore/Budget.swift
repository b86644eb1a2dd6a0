/// The request budget (contract: `--context-tokens`). One request may take at most `contextTokens` tokens:
/// instructions + tool definitions + conversation + a reserve for the answer. The figures come from
/// `TokenEstimator`, so the same text always costs the same, unless the backend counted them with the model's own
/// tokenizer (`countedBy`, see TokenCounting.swift).
public struct ContextBudget: Sendable, Equatable {
    public let contextTokens: Int
    /// Tokens of the instructions (the system message).
    public let instructionTokens: Int
    /// Tokens of all tool definitions as sent (estimated: the OpenAI `tools` array as compact JSON).
    public let toolTokens: Int
    /// What counted the figures (`TokenCounter.source`); nil: `TokenEstimator`.
    public let countedBy: String?

    public init(contextTokens: Int, instructions: String, tools: [ToolSpec]) {
        self.init(contextTokens: contextTokens, instructionTokens: TokenEstimator.estimate(instructions),
                  toolTokens: ContextBudget.toolDefinitionTokens(tools), countedBy: nil)
    }

    public init(contextTokens: Int, instructionTokens: Int, toolTokens: Int, countedBy: String?) {
        self.contextTokens = contextTokens
        self.instructionTokens = instructionTokens
        self.toolTokens = toolTokens
        self.countedBy = countedBy
    }

    /// True when the figures are the model's own counts.
    public var exact: Bool { countedBy != nil }

    /// How the figures were counted, for `--verbose`: "estimated tokens" or "exact tokens, <counter>".
    public var countKind: String { countedBy.map { "exact tokens, \($0)" } ?? "estimated tokens" }

    /// Tokens kept free for the model's answer (sent as `max_tokens`): an eighth of the window, 64 to 1024.
    public var answerReserve: Int { ContextBudget.answerReserve(contextTokens: contextTokens) }

    public static func answerReserve(contextTokens: Int) -> Int {
        min(1024, max(64, contextTokens / 8))
    }

    /// The estimate of the tool definitions as the OpenAI backend sends them (zero tools cost nothing).
    public static func toolDefinitionTokens(_ tools: [ToolSpec]) -> Int {
        tools.isEmpty ? 0 : TokenEstimator.estimate(toolDefinitionText(tools))
    }

    /// The tool definitions as the OpenAI backend sends them (the `tools` array as compact JSON).
    public static func toolDefinitionText(_ tools: [ToolSpec]) -> String {
        JSONValue.array(tools.map(\.openAIDefinition)).jsonText
    }

    /// Instructions plus tool definitions: the fixed cost of every request.
    public var fixedTokens: Int { instructionTokens + toolTokens }

    /// What the conversation (everything but tool definitions and the answer reserve) may take.
    public var conversationTokens: Int { contextTokens - toolTokens - answerReserve }

    /// Throws `error_context` (exit 4) with the figures when instructions, tool definitions, the answer
    /// reserve and the task itself cannot fit in one request.
    public func check(task: String) throws {
        try check(taskTokens: TokenEstimator.estimate(task))
    }

    /// `check(task:)` for a task already counted (in the same kind of tokens as the budget).
    public func check(taskTokens: Int) throws {
        let need = fixedTokens + answerReserve + taskTokens
        guard need > contextTokens else { return }
        let what = fixedTokens > contextTokens
            ? "instructions plus tool definitions alone exceed it"
            : "nothing is left for the conversation"
        let unit = exact ? "tokens" : "estimated tokens"
        throw AgentError(.context, "the budget cannot be met: instructions \(instructionTokens) + tool definitions "
            + "\(toolTokens) + answer reserve \(answerReserve) + task \(taskTokens) = \(need) \(unit) "
            + "> --context-tokens \(contextTokens) (\(what)); raise --context-tokens, shorten --system or "
            + "the prompt, or offer fewer tools (--read-only, --no-commands)")
    }
}

/// The built-in instructions (kept short: on the on-device model they share 4,096 tokens with everything else).
public enum BuiltInInstructions {
    // Short on purpose: with the seven tool definitions (551 estimated tokens as OpenAI JSON) the fixed part of
    // every request stays within 600 estimated tokens; small models also follow short prompts
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
