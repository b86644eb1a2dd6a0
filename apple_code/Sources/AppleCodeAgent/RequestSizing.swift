import AppleCodeCore

/// How a request's size was figured (contract: budget rule).
public enum CountKind: String, Sendable, Equatable {
    /// The server's tokenizer counted every text of the request; the server's `usage.prompt_tokens` gave what its
    /// chat template adds.
    case exact
    /// TokenEstimator's figure, corrected by what the server's `usage.prompt_tokens` showed for earlier requests.
    case calibrated
    /// TokenEstimator's figure alone: the server has reported nothing yet.
    case estimated
}

/// One request as the budget sees it: the prompt's tokens plus the answer reserve.
public struct RequestFigure: Sendable, Equatable {
    public var promptTokens: Int
    public var maxTokens: Int
    public var kind: CountKind

    public var total: Int { promptTokens + maxTokens }
}

/// What a server's own count of a prompt (`usage.prompt_tokens`) taught about our count of it, during one run.
///
/// Our count is either the server's tokenizer over the request's texts (exact, but blind to the role markers and
/// tool rendering of the server's chat template) or TokenEstimator's figure for the request. The difference to the
/// server's count (the template overhead; for the estimator also its over-count) is learned per kind of request
/// (with tools offered or not: templates render tools with text of their own), and the largest difference seen in
/// the run is used, never a smaller one: a request whose texts changed since (condensed, cut) is never figured
/// below what any earlier one proved. On top comes a stated margin, 2% of the count and at least 8 tokens, so
/// text that tokenizes a little denser than anything seen before still fits.
public struct PromptCalibration: Sendable, Equatable {
    public struct Key: Hashable, Sendable {
        public var exact: Bool
        public var withTools: Bool

        public init(exact: Bool, withTools: Bool) {
            self.exact = exact
            self.withTools = withTools
        }
    }

    public private(set) var offsets: [Key: Int] = [:]
    /// The first difference seen: on the run's first request, which holds the least besides the instructions and
    /// tools, it is the closest to what the template adds to those alone (for the fixed overhead).
    public private(set) var firstOffsets: [Key: Int] = [:]

    public init() {}

    /// A request we counted as `counted` that the server reported as `reported` prompt tokens.
    public mutating func learn(_ key: Key, counted: Int, reported: Int) {
        let offset = reported - counted
        offsets[key] = max(offsets[key] ?? offset, offset)
        if firstOffsets[key] == nil { firstOffsets[key] = offset }
    }

    /// The safety margin over a learned figure.
    public static func margin(_ counted: Int) -> Int { max(8, counted / 50) }

    /// The prompt tokens to budget for a request we count as `counted`; nil until the server has reported on a
    /// request of this kind.
    public func figure(_ key: Key, counted: Int) -> Int? {
        guard let offset = offsets[key] else { return nil }
        return max(1, counted + offset + Self.margin(counted))
    }

    /// The template overhead learned for `key` (the server's count less ours), when known.
    public func offset(_ key: Key) -> Int? { offsets[key] }
}

/// The texts of a request a chat template renders, each counted by the server's tokenizer, plus an allowance per
/// message for its role markers (the learned offset takes up the rest).
public enum RequestTexts {
    /// ChatML's `<|im_start|>role\n` and `<|im_end|>\n` are about 5 tokens; a call's `functions.NAME:\n` 3 more.
    public static let messageAllowance = 8

    /// Message contents, tool calls' names and arguments, and the tool definitions as sent (compact JSON).
    public static func pieces(_ chat: ChatRequest) -> (texts: [String], messages: Int) {
        var texts: [String] = []
        let messages = chat.messagesJSON.arrayValue ?? []
        for message in messages {
            if let content = message["content"]?.stringValue, !content.isEmpty { texts.append(content) }
            for call in message["tool_calls"]?.arrayValue ?? [] {
                if let name = call["function"]?["name"]?.stringValue { texts.append(name) }
                if let arguments = call["function"]?["arguments"]?.stringValue, !arguments.isEmpty {
                    texts.append(arguments)
                }
            }
        }
        if !chat.tools.isEmpty { texts.append(ContextBudget.toolDefinitionText(chat.tools)) }
        return (texts, messages.count)
    }

    /// The request's texts counted by `count` (nil when any of them cannot be counted).
    public static func count(_ chat: ChatRequest, with count: (String) async -> Int?) async -> Int? {
        let (texts, messages) = pieces(chat)
        var total = messages * messageAllowance
        for text in texts {
            guard let tokens = await count(text) else { return nil }
            total += tokens
        }
        return total
    }
}
