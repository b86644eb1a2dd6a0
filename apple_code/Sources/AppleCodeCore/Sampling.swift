/// `--temperature` and `--max-tokens`: how the model samples its answers, when the caller says so (apple-flow's
/// plain answers for other agents). Unset, each backend keeps its own choice (fm: 0.2; openai: the server's) and the
/// budget's answer reserve bounds a response.
public struct Sampling: Sendable, Equatable {
    public var temperature: Double?
    public var maxTokens: Int?

    public init(temperature: Double? = nil, maxTokens: Int? = nil) {
        self.temperature = temperature
        self.maxTokens = maxTokens
    }

    /// A response's token limit: the budget's `limit`, lowered to `maxTokens` when that is smaller.
    public func responseTokens(_ limit: Int) -> Int { min(limit, maxTokens ?? limit) }
}
