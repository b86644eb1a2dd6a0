import AppleCodeCore

/// A run's token accounting (contract: budget rule, "Learning the real count"): how big each request is for the
/// budget, what each reply adds to the run's usage, and what the server's own counts taught about ours. One value
/// per run, owned by the agent loop; it talks to nothing but the server's tokenizer (`counter`).
struct RequestAccounting: Sendable {
    let budget: ContextBudget
    /// The server's tokenizer, where it has one (exact figures once the server has reported a count).
    let counter: (any TokenCounter)?
    /// What the server's usage taught about our counts (exact and estimated).
    private(set) var calibration = PromptCalibration()
    /// The run's real tokens per estimated token, for the tools (which cut with the estimator).
    private(set) var rate = TokenRate()
    /// The kind of count the last request was figured with (for `--verbose` when it changes).
    private var lastKind: CountKind = .estimated
    /// Whether a figure of the usage so far came from the estimator: a turn's tokens, the fixed overhead.
    private var turnsEstimated = false
    private var fixedEstimated = false

    init(budget: ContextBudget, counter: (any TokenCounter)?) {
        self.budget = budget
        self.counter = counter
    }

    /// How big `chat` is for the budget: exact where the server counts and has reported once on a request of this
    /// kind, else the estimate corrected by its reports, else the estimate.
    func figure(_ chat: ChatRequest) async -> RequestFigure {
        let withTools = !chat.tools.isEmpty
        let estimate = chat.estimatedTokens - chat.maxTokens
        if calibration.offset(.init(exact: true, withTools: withTools)) != nil, let counted = await exactCount(chat),
           let tokens = calibration.figure(.init(exact: true, withTools: withTools), counted: counted) {
            return RequestFigure(promptTokens: tokens, maxTokens: chat.maxTokens, kind: .exact)
        }
        if let tokens = calibration.figure(.init(exact: false, withTools: withTools), counted: estimate) {
            return RequestFigure(promptTokens: tokens, maxTokens: chat.maxTokens, kind: .calibrated)
        }
        return RequestFigure(promptTokens: estimate, maxTokens: chat.maxTokens, kind: .estimated)
    }

    /// The reply's tokens into `usage`: the server's figures where it reported them, else our exact count (the
    /// server's tokenizer) where there is one, else the estimate. A reported prompt count also calibrates the
    /// counts of later requests. `turn` names the request in `--verbose` lines.
    mutating func account(_ chat: ChatRequest, _ figure: RequestFigure, _ reply: ChatReply, turn: Int,
                          usage: inout Usage, log: (String) -> Void) async {
        let withTools = !chat.tools.isEmpty
        if let reported = reply.promptTokens, reported > 0 {
            log("reply \(turn): the server counted \(reported) prompt tokens (figured \(figure.promptTokens), "
                + "\(figure.kind.rawValue))")
            calibration.learn(.init(exact: false, withTools: withTools), counted: chat.estimatedTokens - chat.maxTokens,
                              reported: reported)
            if let counted = await exactCount(chat) {
                calibration.learn(.init(exact: true, withTools: withTools), counted: counted, reported: reported)
            }
        }
        let callText = reply.calls.map { $0.name + $0.argumentsText }.joined()
        let input = reply.promptTokens ?? (figure.kind == .exact ? figure.promptTokens : nil)
        var output = reply.completionTokens
        if output == nil, figure.kind == .exact, let counter {
            output = await counter.count(reply.text + callText)
        }
        usage.inputTokens += input ?? (chat.estimatedTokens - chat.maxTokens)
        usage.outputTokens += output ?? TokenEstimator.estimate(reply.text + callText)
        turnsEstimated = turnsEstimated || input == nil || output == nil
        if withTools {
            let fixed = await fixedTokens(figure.kind, chat)
            usage.fixedTokens = fixed.tokens
            fixedEstimated = !fixed.exact
        }
        usage.estimated = turnsEstimated || fixedEstimated
    }

    /// A tool result the server's tokenizer counted: it teaches the run's rate.
    mutating func recordRate(counted: Int, text: String) {
        rate.record(counted: counted, text: text)
    }

    /// What every request with tools pays before the conversation (instructions and tool definitions), counted as
    /// `kind` says: exact (the server's tokenizer plus the learned template overhead), or estimated.
    func fixedTokens(_ kind: CountKind, _ chat: ChatRequest) async -> (tokens: Int, exact: Bool) {
        let bare = ChatRequest(system: chat.system, entries: [], tools: chat.tools, maxTokens: 0, style: chat.style)
        if kind == .exact, let counted = await exactCount(bare),
           let offset = calibration.firstOffsets[.init(exact: true, withTools: true)] {
            return (counted + offset, true)
        }
        return (budget.fixedTokens, false)
    }

    /// The request's texts counted by the server's tokenizer; nil without one, or when it cannot count now.
    func exactCount(_ chat: ChatRequest) async -> Int? {
        guard let counter else { return nil }
        return await RequestTexts.count(chat) { await counter.count($0) }
    }

    /// `--verbose`: how requests are counted, each time that changes (`turn`: the request about to be sent).
    mutating func noteKind(_ figure: RequestFigure, _ chat: ChatRequest, turn: Int, log: (String) -> Void) async {
        guard figure.kind != lastKind else { return }
        lastKind = figure.kind
        let withTools = !chat.tools.isEmpty
        switch figure.kind {
        case .exact:
            let offset = calibration.offset(.init(exact: true, withTools: withTools)) ?? 0
            log("budget: exact tokens from request \(turn) on (every text counted by "
                + "\(counter?.source ?? "a tokenizer"); the server's usage.prompt_tokens differs from that by "
                + "\(offset) tokens\(withTools ? "" : " without tools"), its chat template's own share; margin 2%, at "
                + "least 8): fixed overhead \(await fixedTokens(.exact, chat).tokens) tokens")
        case .calibrated:
            let offset = calibration.offset(.init(exact: false, withTools: withTools)) ?? 0
            log("budget: estimated tokens corrected by \(offset) from request \(turn) on (the server's "
                + "usage.prompt_tokens; margin 2%, at least 8)")
        case .estimated:
            log("budget: estimated tokens from request \(turn) on (the server has not reported on such a request)")
        }
    }
}
