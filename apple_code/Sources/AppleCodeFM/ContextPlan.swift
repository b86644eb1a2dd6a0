import AppleCodeCore

/// The token budget of one Foundation Models window, before any request: counted by the model where it can
/// (`ModelTokens`, 26.4), estimated elsewhere. The figures and the exit-4 rule are the shared `ContextBudget`'s,
/// so both backends agree; this adds what the framework's own tool loop needs. Every new session pays
/// instructions and tools again. All figures are in the budget's kind of tokens (`budget.exact`).
struct ContextPlan: Sendable, Equatable {
    let budget: ContextBudget

    init(window: Int, instructions: String, tools: [ToolSpec]) {
        budget = ContextBudget(contextTokens: window, instructions: instructions, tools: tools)
    }

    init(budget: ContextBudget) {
        self.budget = budget
    }

    var window: Int { budget.contextTokens }
    var instructionsTokens: Int { budget.instructionTokens }
    var toolTokens: Int { budget.toolTokens }
    /// Kept free for the answer when budgeting tool results.
    var answerReserve: Int { budget.answerReserve }

    /// `maximumResponseTokens`: stops a runaway response, yet leaves room for a tool call that writes a whole
    /// file (its arguments are generated under the same limit). Working agents use about 1,500.
    var responseTokenLimit: Int { min(1500, max(answerReserve, workingTokens / 2)) }
    /// Instructions plus tool definitions: what every session costs before the prompt.
    var fixedTokens: Int { budget.fixedTokens }

    /// What is left for the prompt, tool calls and their results.
    var workingTokens: Int { window - fixedTokens - answerReserve }

    /// The most one tool result may take, so that one result never fills the window alone.
    var resultCap: Int { max(64, workingTokens / 2) }

    /// The most a prompt (the task, or a condensed history) may take, leaving room for tool results.
    var promptLimit: Int { max(64, workingTokens * 2 / 3) }

    /// Throws `AgentError(.context)` (exit 4) when instructions, tool definitions, answer reserve and the task
    /// cannot fit one window.
    func check(taskTokens: Int) throws {
        try budget.check(taskTokens: taskTokens)
    }

    /// One line of figures for `--verbose`.
    var figures: String {
        "fm budget (\(budget.countKind)): window \(window), instructions \(instructionsTokens), "
            + "tool definitions \(toolTokens), answer reserve \(answerReserve), "
            + "left for the task and tool results \(workingTokens), per result at most \(resultCap), "
            + "response limit \(responseTokenLimit)"
    }
}
