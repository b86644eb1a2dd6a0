/// Counting tokens as the model in use does, where the backend can: Apple's `SystemLanguageModel.tokenCount(for:)`
/// (26.4 SDK, macOS 26.4 or later), a server's tokenize endpoint. Where nothing counts, `TokenEstimator` budgets
/// alone, as before.
///
/// The tools fit their results with the estimator (synchronous and deterministic), so a run that counts exactly
/// gives each tool its room converted to estimated tokens at the run's rate (`TokenRate`), counts the result, and
/// cuts it to the real room only if it is still over (`ExactFit`). The window is then spent on content instead of
/// on the estimator's margin (about a quarter on source code), and text the estimator under-counts (CJK, hex) can
/// no longer overflow it.
public protocol TokenCounter: Sendable {
    /// Where the counts come from, for `--verbose` ("SystemLanguageModel.tokenCount", "/extras/tokenize").
    var source: String { get }
    /// The tokens of `text` as the model reads it, or nil when this text cannot be counted now (the caller
    /// estimates instead).
    func count(_ text: String) async -> Int?
}

/// Real tokens per estimated token in one run, from every text counted both ways so far.
public struct TokenRate: Sendable, Equatable {
    public private(set) var counted = 0
    public private(set) var estimated = 0

    /// A budget converted for a text not yet counted is this much under the rate, so a text whose tokens run a
    /// little denser than the run's average still fits at the first try.
    public static let headroom = 0.05

    public init() {}

    public mutating func record(counted tokens: Int, text: String) {
        counted += tokens
        estimated += TokenEstimator.estimate(text)
    }

    /// 1 before any sample: the estimator as it is.
    public var ratio: Double {
        guard counted > 0, estimated > 0 else { return 1 }
        return min(4, max(0.25, Double(counted) / Double(estimated)))
    }

    /// The estimated tokens a text may take so that its real count stays within `tokens`.
    public func estimatedBudget(forCounted tokens: Int) -> Int {
        max(1, Int(Double(tokens) / (ratio * (1 + Self.headroom))))
    }
}

/// Fitting tool results to a room counted in real tokens.
public enum ExactFit {
    /// Runs `tool` so that its result takes at most `room` tokens as `count` counts them. The tool gets the room
    /// in estimated tokens at `rate`. A result still over the room is, for a tool that only reads, made again with
    /// the budget its own count implies (a readFile window then ends at a line instead of losing lines in the
    /// middle); otherwise it is cut, head and tail kept. Returns the result and its count. Without `count` (or
    /// when it cannot count this result) the room is in estimated tokens and the result is cut by the estimator,
    /// as before exact counts existed; the count is then nil.
    public static func run(_ tool: any AgentTool, raw: JSONValue, context: ToolContext, room: Int, rate: TokenRate,
                           count: ((String) async -> Int?)?) async -> (result: ToolResult, tokens: Int?) {
        var context = context
        context.maxResultTokens = count == nil ? room : rate.estimatedBudget(forCounted: room)
        var result = await tool.call(raw: raw, context: context)
        guard let count, var tokens = await count(result.text) else {
            let cut = TokenEstimator.cut(result.text, toTokens: room)
            if cut.truncated {
                result.text = cut.text
                result.truncated = true
            }
            return (result, nil)
        }
        if tokens > room, ToolSpec.readOnlyNames.contains(tool.name) {
            let ratio = Double(tokens) / Double(TokenEstimator.estimate(result.text))
            context.maxResultTokens = max(1, Int(Double(room) / (ratio * (1 + TokenRate.headroom))))
            let again = await tool.call(raw: raw, context: context)
            if let counted = await count(again.text) {
                result = again
                tokens = counted
            }
        }
        guard tokens > room else { return (result, tokens) }
        let cut = await self.cut(result.text, toTokens: room, count: count)
        result.text = cut.text
        result.truncated = true
        return (result, cut.tokens)
    }

    /// Cuts `text` (head and tail kept, with the estimator's marker) until `count` says it fits `tokens`.
    public static func cut(_ text: String, toTokens tokens: Int,
                           count: (String) async -> Int?) async -> (text: String, tokens: Int?) {
        var limit = TokenEstimator.estimate(text)
        var counted = await count(text)
        var cut = text
        for _ in 0..<6 {
            guard let now = counted else { break }
            if now <= tokens { return (cut, now) }
            // Shrink the estimated size by what the count says is over, and a little more.
            limit = min(limit - 1, Int(Double(limit) * Double(tokens) / Double(now) * 0.97))
            guard limit > 0 else { break }
            cut = TokenEstimator.cut(text, toTokens: limit).text
            counted = await count(cut)
        }
        if let now = counted, now <= tokens { return (cut, now) }
        // The counter failed or the text will not shrink: the smallest cut there is (the marker alone).
        let marker = TokenEstimator.cut(text, toTokens: 1).text
        return (marker, await count(marker))
    }
}

extension ToolSpec {
    /// The tools that only read (the planner's tools, and the only ones a `--parallel` plan may offer): running one
    /// again has no effect beyond its result.
    public static let readOnlyNames: Set<String> = ["readFile", "listDirectory", "searchFiles", "searchContent"]
}
