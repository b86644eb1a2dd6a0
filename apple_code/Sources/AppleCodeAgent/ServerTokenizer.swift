import AppleCodeCore
import Foundation

/// Counts text with the server's own tokenizer, where the server has an endpoint for it, at its root (the base URL
/// without its `/v1`): llama-cpp-python's `POST /extras/tokenize/count` (`{"input": text}` → `{"count": n}`) or
/// llama.cpp's `POST /tokenize` (`{"content": text}` → `{"tokens": [...]}`). The first that answers is used for the
/// rest of the run; a server with neither (or one that fails) counts nothing from then on, and the caller
/// estimates. Counts are kept per text: a run sends the same texts (instructions, tool definitions, earlier
/// results) again with every request. A server whose chat template escapes HTML in what it renders
/// (llama-cpp-python's Jinja templates autoescape: a `"` reaches the model as `&#34;`, several tokens) gets each
/// text escaped the same way before it is counted.
public actor ServerTokenizer: TokenCounter {
    public enum Endpoint: String, Sendable, CaseIterable {
        case llamaCppPython = "/extras/tokenize/count"
        case llamaCpp = "/tokenize"
    }

    nonisolated public let source: String
    private let root: String
    private let headers: [String: String]
    private let deadline: ContinuousClock.Instant?
    private let log: @Sendable (String) -> Void
    private let escapesHTML: Bool
    /// nil until the first count; then the endpoint that answered, or none.
    private var found: Endpoint??
    private var counts: [String: Int] = [:]

    /// Requests to the tokenizer: each is quick (no generation); a server that takes longer is not counting.
    static let timeout: TimeInterval = 10

    public init(endpoint: OpenAIEndpoint, deadline: ContinuousClock.Instant?, escapesHTML: Bool = false,
                log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.escapesHTML = escapesHTML
        var root = endpoint.baseURL
        if root.hasSuffix("/v1") { root.removeLast(3) }
        self.root = root
        self.headers = endpoint.headers
        self.deadline = deadline
        self.log = log
        self.source = escapesHTML ? "the server's tokenizer, over the text HTML-escaped as its template renders it"
            : "the server's tokenizer"
    }

    /// The endpoint in use, once known (nil: not asked yet, or the server has none).
    public var endpoint: Endpoint? { found ?? nil }

    public func count(_ text: String) async -> Int? {
        if let known = counts[text] { return known }
        if case .some(.none) = found { return nil }
        let candidates = found.map { $0.map { [$0] } ?? [] } ?? Endpoint.allCases
        let rendered = escapesHTML ? Self.escapedHTML(text) : text
        for candidate in candidates {
            if let counted = await ask(candidate, rendered) {
                if found == nil {
                    found = .some(candidate)
                    log("token counts: the server's tokenizer at \(root)\(candidate.rawValue)")
                }
                counts[text] = counted
                return counted
            }
            if found != nil { break }
        }
        if found == nil {
            log("token counts: the server has no tokenizer endpoint that answers ("
                + Endpoint.allCases.map(\.rawValue).joined(separator: ", ") + ")")
        } else {
            log("token counts: the server's tokenizer stopped answering; estimated from now on")
        }
        found = .some(.none)
        return nil
    }

    /// What Jinja's autoescape (markupsafe) makes of `text`.
    public static func escapedHTML(_ text: String) -> String {
        guard text.contains(where: { "&<>\"'".contains($0) }) else { return text }
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count + 16)
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&#34;"
            case "'": escaped += "&#39;"
            default: escaped.append(character)
            }
        }
        return escaped
    }

    private func ask(_ endpoint: Endpoint, _ text: String) async -> Int? {
        guard let url = URL(string: root + endpoint.rawValue) else { return nil }
        let body: JSONValue = switch endpoint {
        case .llamaCppPython: ["input": .string(text)]
        case .llamaCpp: ["content": .string(text), "add_special": false]
        }
        let left = deadline.map { ($0 - ContinuousClock.now).seconds } ?? Self.timeout
        guard left > 0.05 else { return nil }
        guard let response = try? await HTTPClient.send(url: url, method: "POST", body: Data(body.jsonText.utf8),
                                                        headers: headers, timeout: min(Self.timeout, left)),
              (200..<300).contains(response.status),
              let json = try? JSONValue.parse(String(decoding: response.body, as: UTF8.self)) else { return nil }
        switch endpoint {
        case .llamaCppPython: return json["count"]?.intValue
        case .llamaCpp: return json["tokens"]?.arrayValue?.count
        }
    }
}
