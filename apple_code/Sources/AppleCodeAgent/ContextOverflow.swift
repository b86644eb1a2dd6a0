import AppleCodeCore
import Foundation

/// A server's refusal of a request for its context length, recognised in the shapes the servers answer with:
///
/// - OpenAI and llama-cpp-python: `{"error":{"code":"context_length_exceeded","message":"This model's maximum
///   context length is 4096 tokens. However, you requested 4608 tokens (4096 in the messages, 512 in the
///   completion)..."}}`
/// - llama.cpp's server: `{"error":{"type":"exceed_context_size_error","message":"request (5000 tokens) exceeds the
///   available context size (4096 tokens), try increasing it","n_prompt_tokens":5000,"n_ctx":4096}}`
/// - Ollama: `the input length exceeds the context length` (as `error.message`, or as `error` itself)
///
/// The agent loop treats it as the on-device model's overflow: shrink and retry, then ask for a plain answer.
public struct ContextOverflow: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server's own words.
    public var message: String
    /// What the server counted for the request and its window, where it said.
    public var requestedTokens: Int?
    public var windowTokens: Int?

    public var description: String { message }

    /// Words that mark a context-length refusal in an error message, lower-cased.
    static let marks = ["context_length_exceeded", "exceed_context_size", "maximum context length",
                        "exceeds the available context size", "input length exceeds the context length",
                        "exceed context window", "context length exceeded"]

    /// The overflow an `error` value (an object, or a string) describes; nil for any other error.
    public static func recognise(_ error: JSONValue) -> ContextOverflow? {
        let message = error.stringValue ?? error["message"]?.stringValue ?? error.jsonText
        let fields = [error["code"]?.stringValue, error["type"]?.stringValue, message].compactMap { $0?.lowercased() }
        guard fields.contains(where: { field in marks.contains { field.contains($0) } }) else { return nil }
        var overflow = ContextOverflow(message: message)
        overflow.requestedTokens = error["n_prompt_tokens"]?.intValue
            ?? number(in: message, after: "you requested ") ?? number(in: message, after: "resulted in ")
            ?? number(in: message, after: "request (")
        overflow.windowTokens = error["n_ctx"]?.intValue
            ?? number(in: message, after: "maximum context length is ")
            ?? number(in: message, after: "available context size (")
        return overflow
    }

    /// The overflow a whole error body describes (`{"error": ...}`), if it is one.
    public static func recognise(body: String) -> ContextOverflow? {
        guard let json = try? JSONValue.parse(body) else {
            let lowered = body.lowercased()
            return marks.contains(where: lowered.contains) ? ContextOverflow(message: body) : nil
        }
        guard let error = json["error"], error != .null else { return nil }
        return recognise(error)
    }

    /// The whole number right after `marker` in `text`.
    private static func number(in text: String, after marker: String) -> Int? {
        guard let range = text.range(of: marker, options: .caseInsensitive) else { return nil }
        let digits = text[range.upperBound...].prefix { $0.isNumber || $0 == "," }.filter(\.isNumber)
        return Int(String(digits))
    }
}

/// What the agent loop does about a server's context-length refusals (contract: treated as the fm backend's
/// overflow): each lowers the limit requests are fitted to, to three quarters of the refused request's figure (and
/// of the limit before it, never under `floor`). A request with tools is sent again once; refused again, the answer
/// is asked for without tools (which honours `max_tokens`); that one is sent again twice; a third refusal of it
/// ends the run.
struct OverflowRecovery: Sendable, Equatable {
    enum Next: Sendable, Equatable { case retry, askForAnswer, giveUp }

    private(set) var limit: Int
    let floor: Int
    private(set) var toolRefusals = 0
    private(set) var answerRefusals = 0

    init(limit: Int, floor: Int) {
        self.limit = limit
        self.floor = floor
    }

    /// A request of `figure` tokens was refused; `asking`: it was an answer request (no tools).
    mutating func refused(figure: Int, asking: Bool) -> Next {
        if asking { answerRefusals += 1 } else { toolRefusals += 1 }
        if answerRefusals >= 3 { return .giveUp }
        limit = max(floor, min(limit, figure) * 3 / 4)
        return !asking && toolRefusals >= 2 ? .askForAnswer : .retry
    }
}
