import AppleCodeCore
import Foundation

/// Where an OpenAI-compatible server is.
public struct OpenAIEndpoint: Sendable, Equatable {
    /// Ends in `/v1` (or whatever the server's prefix is); `/chat/completions` and `/models` are added.
    public var baseURL: String
    public var apiKey: String?

    public init(baseURL: String, apiKey: String? = nil) {
        var trimmed = baseURL
        while trimmed.hasSuffix("/") { trimmed.removeLast() }
        self.baseURL = trimmed
        self.apiKey = apiKey
    }

    var headers: [String: String] {
        var headers = ["Content-Type": "application/json", "Accept": "application/json"]
        if let apiKey, !apiKey.isEmpty { headers["Authorization"] = "Bearer \(apiKey)" }
        return headers
    }

    func url(_ path: String) throws -> URL {
        guard let url = URL(string: baseURL + path), url.scheme != nil, url.host != nil else {
            throw AgentError(.usage, "--base-url '\(baseURL)' is not a valid URL")
        }
        return url
    }

    /// The exit-3 message for a server that is not there: name the URL and how to start one.
    func unreachable(_ detail: String) -> AgentError {
        AgentError(.modelUnavailable, "cannot connect to the OpenAI-compatible server at \(baseURL) (\(detail)). "
            + "Start a local one: scripts/local-model.sh start (llama.cpp, then --base-url http://127.0.0.1:8765/v1) "
            + "or `ollama serve` (http://127.0.0.1:11434/v1); or point --base-url / APPLE_CODE_BASE_URL at yours.")
    }
}

/// What `GET {base}/models` told us.
public struct ServerProbe: Sendable, Equatable {
    public var models: [String]
    /// llama-cpp-python's server (it reports `owned_by: "me"`); its chatml-function-calling format drops
    /// `role:"tool"` messages, so results are folded into user messages there, and its templates escape HTML in
    /// what they render (which its token counts must follow).
    public var dropsToolMessages: Bool
    /// The server accepted the connection but did not answer within the probe's time (llama.cpp answers
    /// `/models` only between generations); nothing else is known then.
    public var busy = false
    /// apple-flow's local model server (`owned_by: "apple-flow"`): it takes OpenAI's `allowed_tools` tool choice
    /// with a grammar behind it, so the first request can require a look (`AgentLoop.looksFirst`).
    public var takesAllowedTools = false
}

/// One chat completion over HTTP in the OpenAI wire format, streamed: text reaches `onText` as it is generated,
/// and a cancelled or timed-out request closes its connection, which stops a streaming server's generation (an
/// abandoned non-streaming request keeps llama.cpp busy until it is done). A server that answers a streamed
/// request with one JSON body is read as such; one that answers it with an empty stream (llama-cpp-python cannot
/// stream an automatic tool choice) gets the request again without streaming, and so do later requests of the
/// same kind (with or without tools) in this run.
public struct OpenAIChatModel: ChatModel {
    public let endpoint: OpenAIEndpoint
    public let model: String
    public let deadline: ContinuousClock.Instant?
    let log: @Sendable (String) -> Void
    private let quirks = ServerQuirks()
    /// `--temperature` (0 when not given: servers sample at their own default otherwise, llama.cpp's 0.8),
    /// `--max-tokens` (lowers `max_tokens`).
    public var sampling = Sampling()

    public init(endpoint: OpenAIEndpoint, model: String, deadline: ContinuousClock.Instant?,
                log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.endpoint = endpoint
        self.model = model
        self.deadline = deadline
        self.log = log
    }

    /// The request body: always a system message, `tool_choice: "auto"` whenever tools are offered (llama.cpp's
    /// server returns tool calls only then), `max_tokens` = the answer reserve, the run's temperature (0 unless
    /// given); streamed
    /// with the usage asked for (`stream_options.include_usage`; servers that do not know it ignore it).
    public func body(_ request: ChatRequest, stream: Bool = true) -> JSONValue {
        var body: JSONObject = ["model": .string(model), "messages": request.messagesJSON]
        if !request.tools.isEmpty {
            body["tools"] = request.toolsJSON
            body["tool_choice"] = Self.toolChoice(request, refusesRequired: quirks.refusesRequired)
        }
        body["max_tokens"] = .int(sampling.responseTokens(request.maxTokens))
        body["temperature"] = .number(sampling.temperature ?? 0)
        body["stream"] = .bool(stream)
        if stream { body["stream_options"] = ["include_usage": true] }
        return .object(body)
    }

    /// `"auto"`, or a call required: `"required"` when any offered tool will do, else OpenAI's `allowed_tools`
    /// (the prompt still shows every tool, so a server's cached prompt start serves every request of the run).
    static func toolChoice(_ request: ChatRequest, refusesRequired: Bool) -> JSONValue {
        guard let names = request.mustCallOneOf, !names.isEmpty, !refusesRequired else { return "auto" }
        if Set(names) == Set(request.tools.map(\.name)) { return "required" }
        let tools: [JSONValue] = names.map { ["type": "function", "function": ["name": .string($0)]] }
        return ["type": "allowed_tools", "allowed_tools": ["mode": "required", "tools": .array(tools)]]
    }

    public func complete(_ request: ChatRequest, onText: (String) -> Void) async throws -> ChatReply {
        do {
            return try await streamingIfItCan(request, onText: onText)
        } catch is RequiredRefused {
            quirks.refuseRequired()
            log("the server refused a required tool choice (an error status); tool_choice \"auto\" is sent instead "
                + "from now on, so the model may answer without looking first")
            return try await streamingIfItCan(request, onText: onText)
        }
    }

    private func streamingIfItCan(_ request: ChatRequest, onText: (String) -> Void) async throws -> ChatReply {
        let withTools = !request.tools.isEmpty
        if quirks.contains(withTools: withTools) {
            return try await exchange(request, stream: false, onText: onText)
        }
        do {
            return try await exchange(request, stream: true, onText: onText)
        } catch is EmptyStream {
            quirks.insert(withTools: withTools)
            log("the server answered a streamed request \(withTools ? "with" : "without") tools with an empty stream "
                + "(llama-cpp-python cannot stream an automatic tool choice): sent again without streaming, as are "
                + "such requests from now on")
            return try await exchange(request, stream: false, onText: onText)
        }
    }

    /// 200 with an event-stream body and not one event in it.
    private struct EmptyStream: Error {}

    /// An error status naming `tool_choice` (not a context-length refusal) for a request that required a call: a
    /// server that does not know that tool choice (llama-cpp-python answers 500 for a shape its request model lacks).
    private struct RequiredRefused: Error {}

    private func exchange(_ request: ChatRequest, stream: Bool, onText: (String) -> Void) async throws -> ChatReply {
        let url = try endpoint.url("/chat/completions")
        let timeout = deadline.map { max(0.05, ($0 - ContinuousClock.now).seconds) } ?? 600
        var headers = endpoint.headers
        if stream { headers["Accept"] = "text/event-stream" }
        return try await mappingFailures(url: url) {
            let sent = Data(body(request, stream: stream).jsonText.utf8)
            let response = try await HTTPClient.open(url: url, method: "POST", body: sent, headers: headers,
                                                     timeout: timeout)
            defer { response.close() }
            let isEventStream = response.contentType.lowercased().hasPrefix("text/event-stream")
            guard (200..<300).contains(response.status), isEventStream else {
                // An error, or a server that does not stream: one JSON body.
                var data = Data()
                for try await piece in response.body { data.append(piece) }
                try Task.checkCancellation()
                let text = String(decoding: data, as: UTF8.self)
                if request.mustCallOneOf != nil, !quirks.refusesRequired, response.status >= 400,
                   text.contains("tool_choice"), ContextOverflow.recognise(body: text) == nil {
                    throw RequiredRefused()
                }
                let reply = try Self.parseReply(HTTPClient.Response(status: response.status, body: data),
                                                url: url.absoluteString)
                if !reply.text.isEmpty { onText(reply.text) }
                return reply
            }
            var events = ServerSentEvents()
            var assembler = ChatStreamAssembler()
            reading: for try await piece in response.body {
                for payload in events.feed(piece) {
                    let text = try assembler.add(payload, url: url.absoluteString)
                    if !text.isEmpty { onText(text) }
                    if assembler.done { break reading }
                }
            }
            try Task.checkCancellation()
            for payload in events.finish() where !assembler.done {
                let text = try assembler.add(payload, url: url.absoluteString)
                if !text.isEmpty { onText(text) }
            }
            if assembler.chunks == 0 { throw EmptyStream() }
            if !assembler.done { log("the server's stream ended without [DONE]; taking what it sent") }
            return assembler.reply
        }
    }

    /// The HTTP failures as the errors a user sees: nothing listening (exit 3), the run's time used up (exit
    /// 124), anything else a backend error naming the URL.
    private func mappingFailures<T>(url: URL, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch HTTPClient.Failure.cannotConnect(let detail) {
            throw endpoint.unreachable(detail)
        } catch HTTPClient.Failure.timedOut {
            throw AgentError(.timeout, "the server at \(endpoint.baseURL) did not answer within --timeout")
        } catch HTTPClient.Failure.other(let detail) {
            throw AgentError(.backendError, "the request to \(url.absoluteString) failed: \(detail)")
        }
    }

    static func parseReply(_ response: HTTPClient.Response, url: String) throws -> ChatReply {
        let text = String(decoding: response.body, as: UTF8.self)
        let snippet = text.count > 300 ? String(text.prefix(300)) + "..." : text
        guard (200..<300).contains(response.status) else {
            // A refusal for the context length is for the agent loop to recover from (shrink, then answer).
            if let overflow = ContextOverflow.recognise(body: text) { throw overflow }
            var hint = ""
            if response.status == 401 || response.status == 403 { hint = " (check --api-key / APPLE_CODE_API_KEY)" }
            if response.status == 404 { hint = " (check --base-url, usually ending in /v1, and --model)" }
            throw AgentError(.backendError, "the server answered HTTP \(response.status) for \(url)\(hint): \(snippet)")
        }
        guard let json = try? JSONValue.parse(text) else {
            throw AgentError(.backendError, "the server at \(url) answered with a body that is not JSON: \(snippet)")
        }
        if let error = json["error"], error != .null {
            if let overflow = ContextOverflow.recognise(error) { throw overflow }
            let message = error["message"]?.stringValue ?? error.jsonText
            throw AgentError(.backendError, "the server at \(url) reported an error: \(message)")
        }
        guard let message = json["choices"]?.arrayValue?.first?["message"], message.objectValue != nil else {
            throw AgentError(.backendError, "the server at \(url) answered JSON without choices[0].message: \(snippet)")
        }
        var calls: [ModelToolCall] = []
        for raw in message["tool_calls"]?.arrayValue ?? [] {
            let function = raw["function"]
            guard let name = function?["name"]?.stringValue else { continue }
            let arguments: String
            switch function?["arguments"] {
            case .string(let s)?: arguments = s
            case nil, .null?: arguments = ""
            case let other?: arguments = other.jsonText  // some servers send an object
            }
            calls.append(ModelToolCall(id: raw["id"]?.stringValue ?? "", name: name, argumentsText: arguments))
        }
        return ChatReply(text: contentText(message["content"]), calls: calls,
                         promptTokens: json["usage"]?["prompt_tokens"]?.intValue,
                         completionTokens: json["usage"]?["completion_tokens"]?.intValue)
    }

    /// `content` may be a string, null (beside tool calls) or a list of parts.
    static func contentText(_ content: JSONValue?) -> String {
        switch content {
        case .string(let s)?: s
        case .array(let parts)?: parts.compactMap { $0["text"]?.stringValue ?? $0.stringValue }.joined()
        default: ""
        }
    }
}

/// What a server turned out not to do, shared by the requests of one run: the kinds of request (with tools,
/// without) it answered with an empty stream, and whether it refused a required tool choice.
private final class ServerQuirks: @unchecked Sendable {
    private let lock = NSLock()
    private var kinds: Set<Bool> = []
    private var required = true

    func contains(withTools: Bool) -> Bool { lock.withLock { kinds.contains(withTools) } }
    func insert(withTools: Bool) { _ = lock.withLock { kinds.insert(withTools) } }
    /// It answered an error to a request that required a call.
    var refusesRequired: Bool { lock.withLock { !required } }
    func refuseRequired() { lock.withLock { required = false } }
}

/// Any OpenAI-compatible `/v1/chat/completions` server with tool calling, driven by the core agent loop.
public struct OpenAIBackend: AgentBackend {
    public let name = "openai"
    public let model: String
    public let contextTokens: Int
    public let endpoint: OpenAIEndpoint
    /// nil: tool messages, switching to folded results when the server turns out to drop them.
    public let style: ToolResultStyle?
    /// The server's chat template escapes HTML in the text it renders (llama-cpp-python's): counted so.
    public let escapesHTML: Bool
    /// The first request requires a call to a tool that looks (see `ServerProbe.takesAllowedTools`).
    public let looksFirst: Bool

    public static let defaultContextTokens = 4096

    public init(endpoint: OpenAIEndpoint, model: String, contextTokens: Int? = nil, style: ToolResultStyle? = nil,
                escapesHTML: Bool = false, looksFirst: Bool = false) {
        self.endpoint = endpoint
        self.model = model
        self.contextTokens = contextTokens ?? Self.defaultContextTokens
        self.style = style
        self.escapesHTML = escapesHTML
        self.looksFirst = looksFirst
    }

    /// `GET {base}/models` with a short timeout: is a server there, which models, which kind. A server that
    /// accepts the connection and does not answer in time is busy, not missing: with `waitWhileBusy` it is asked
    /// again, each time waiting twice as long, until it answers (the run's --timeout ends the wait); without,
    /// the probe says it is busy. Only a server that cannot be reached at all (refused, unknown host, the
    /// connection not accepted) is `modelUnavailable`.
    public static func probe(_ endpoint: OpenAIEndpoint, timeout: TimeInterval = 3, waitWhileBusy: Bool = false,
                             log: @Sendable (String) -> Void = { _ in }) async -> Result<ServerProbe, AgentError> {
        let url: URL
        do { url = try endpoint.url("/models") } catch let error as AgentError { return .failure(error) } catch {
            return .failure(AgentError(.usage, "\(error)"))
        }
        var wait = timeout
        while true {
            switch await models(endpoint, url: url, timeout: wait) {
            case .some(let result):
                return result
            case nil:
                guard await TCPProbe.accepts(host: url.host ?? "", port: url.port ?? (url.scheme == "https" ? 443 : 80),
                                             timeout: timeout) else {
                    return .failure(endpoint.unreachable("nothing accepted a connection within \(Int(timeout)) s"))
                }
                guard waitWhileBusy, !Task.isCancelled else {
                    return .success(ServerProbe(models: [], dropsToolMessages: false, busy: true))
                }
                wait *= 2
                log("the server at \(endpoint.baseURL) is busy (it accepts connections but did not answer /models "
                    + "within \(Int(wait / 2)) s); waiting up to \(Int(wait)) s more for it")
            }
        }
    }

    /// One `GET /models`: its outcome, or nil when it did not answer within `timeout`.
    private static func models(_ endpoint: OpenAIEndpoint, url: URL,
                               timeout: TimeInterval) async -> Result<ServerProbe, AgentError>? {
        do {
            let response = try await HTTPClient.send(url: url, method: "GET", body: nil, headers: endpoint.headers,
                                                     timeout: timeout)
            guard (200..<300).contains(response.status) else {
                return .failure(AgentError(.modelUnavailable,
                                           "the server at \(endpoint.baseURL) answered HTTP \(response.status) for /models"))
            }
            guard let json = try? JSONValue.parse(String(decoding: response.body, as: UTF8.self)) else {
                return .failure(AgentError(.modelUnavailable,
                                           "the server at \(endpoint.baseURL) answered /models with a body that is not JSON"))
            }
            let data = json["data"]?.arrayValue ?? json["models"]?.arrayValue ?? []
            let models = data.compactMap { $0["id"]?.stringValue ?? $0["name"]?.stringValue }
            let llamaCppPython = data.contains { $0["owned_by"]?.stringValue == "me" }
            let appleFlow = data.contains { $0["owned_by"]?.stringValue == "apple-flow" }
            return .success(ServerProbe(models: models, dropsToolMessages: llamaCppPython,
                                        takesAllowedTools: appleFlow))
        } catch HTTPClient.Failure.cannotConnect(let detail) {
            return .failure(endpoint.unreachable(detail))
        } catch HTTPClient.Failure.timedOut {
            return nil
        } catch {
            return .failure(AgentError(.modelUnavailable, "cannot reach \(endpoint.baseURL): \(error)"))
        }
    }

    public func availability() async -> Availability {
        switch await Self.probe(endpoint) {
        case .success(let probe) where probe.busy:
            return Availability(available: true, reason: "OpenAI-compatible server at \(endpoint.baseURL) accepts "
                + "connections but is busy (it did not answer /models within 3 s)")
        case .success(let probe):
            let names = probe.models.isEmpty ? "no models listed" : "models: " + probe.models.prefix(5).joined(separator: ", ")
            return Availability(available: true, reason: "OpenAI-compatible server at \(endpoint.baseURL) answers (\(names))")
        case .failure(let error):
            return Availability(available: false, reason: error.message)
        }
    }

    public func run(_ request: AgentRequest, events: any EventSink) async throws -> AgentAnswer {
        var chat = OpenAIChatModel(endpoint: endpoint, model: model, deadline: request.deadline, log: request.log)
        chat.sampling = request.sampling
        let tokenizer = ServerTokenizer(endpoint: endpoint, deadline: request.deadline, escapesHTML: escapesHTML,
                                        log: request.log)
        let loop = AgentLoop(model: chat, style: style ?? .toolMessages, detectDroppedToolMessages: style == nil,
                             counter: tokenizer, looksFirst: looksFirst)
        return try await loop.run(request, events: events)
    }
}
