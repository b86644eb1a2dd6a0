import AppleCodeCore
import Foundation

/// Server-sent events (the body of a streamed chat completion): the `data:` payload of each event, from the bytes
/// as they arrive. Lines end in LF or CRLF; an event ends at a blank line; comment lines (`: ping`) and other
/// fields (`event:`, `id:`) are skipped; the lines of a multi-line `data` are joined with LF.
struct ServerSentEvents {
    /// Bytes of a line not ended yet (a UTF-8 character may be split between two pieces).
    private var pending = Data()
    private var data: [String] = []

    /// The payloads of the events `bytes` completes.
    mutating func feed(_ bytes: Data) -> [String] {
        pending.append(bytes)
        var payloads: [String] = []
        while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
            var line = pending[pending.startIndex..<newline]
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            pending = Data(pending[pending.index(after: newline)...])
            if let payload = take(String(decoding: line, as: UTF8.self)) { payloads.append(payload) }
        }
        return payloads
    }

    /// The payload of an event the stream ended without a blank line after.
    mutating func finish() -> [String] {
        var payloads: [String] = []
        if !pending.isEmpty, let payload = take(String(decoding: pending, as: UTF8.self)) { payloads.append(payload) }
        pending = Data()
        if let payload = take("") { payloads.append(payload) }
        return payloads
    }

    private mutating func take(_ line: String) -> String? {
        if line.isEmpty {
            guard !data.isEmpty else { return nil }
            defer { data = [] }
            return data.joined(separator: "\n")
        }
        guard line.hasPrefix("data:") else { return nil }
        var value = line.dropFirst(5)
        if value.first == " " { value = value.dropFirst() }
        data.append(String(value))
        return nil
    }
}

/// One reply built from the chunks of a streamed chat completion (OpenAI's `chat.completion.chunk`): text pieces
/// in `choices[0].delta.content`, tool calls as deltas keyed by `index` (the first with `id` and `function.name`,
/// then `function.arguments` pieces), `usage` in a last chunk when `stream_options.include_usage` asked for it,
/// and `[DONE]`. Servers that send a whole call (or a whole `message`) in one chunk are read the same way.
struct ChatStreamAssembler {
    private(set) var text = ""
    private var calls: [ModelToolCall] = []
    private var indexes: [Int] = []
    private var promptTokens: Int?
    private var completionTokens: Int?
    /// Chunks read, `[DONE]` aside: none means the server sent an empty stream.
    private(set) var chunks = 0
    private(set) var done = false

    /// Reads one event's payload; returns the text it adds, if any. A payload that is not JSON, or that carries
    /// an `error`, is a backend error naming `url`.
    mutating func add(_ payload: String, url: String) throws -> String {
        let trimmed = payload.trimmingWhitespace
        if trimmed == "[DONE]" {
            done = true
            return ""
        }
        guard let chunk = try? JSONValue.parse(trimmed) else {
            let snippet = trimmed.count > 300 ? String(trimmed.prefix(300)) + "..." : trimmed
            throw AgentError(.backendError, "the server at \(url) streamed an event that is not JSON: \(snippet)")
        }
        if let error = chunk["error"], error != .null {
            if let overflow = ContextOverflow.recognise(error) { throw overflow }
            let message = error["message"]?.stringValue ?? error.jsonText
            throw AgentError(.backendError, "the server at \(url) reported an error while streaming: \(message)")
        }
        chunks += 1
        if let usage = chunk["usage"], usage != .null {
            promptTokens = usage["prompt_tokens"]?.intValue ?? promptTokens
            completionTokens = usage["completion_tokens"]?.intValue ?? completionTokens
        }
        guard let choice = chunk["choices"]?.arrayValue?.first,
              let delta = choice["delta"] ?? choice["message"], delta.objectValue != nil else { return "" }
        for (position, raw) in (delta["tool_calls"]?.arrayValue ?? []).enumerated() {
            merge(raw, position: position)
        }
        let piece = OpenAIChatModel.contentText(delta["content"])
        text += piece
        return piece
    }

    var reply: ChatReply {
        ChatReply(text: text, calls: calls.filter { !$0.name.isEmpty }, promptTokens: promptTokens,
                  completionTokens: completionTokens)
    }

    /// A tool-call delta: by `index` when given; else a new call when it brings an id of its own, else more of
    /// the last one.
    private mutating func merge(_ raw: JSONValue, position: Int) {
        let id = raw["id"]?.stringValue ?? ""
        let index: Int
        if let given = raw["index"]?.intValue {
            index = given
        } else if !id.isEmpty, !calls.contains(where: { $0.id == id }) {
            index = (indexes.max() ?? -1) + 1
        } else {
            index = indexes.last ?? position
        }
        let slot: Int
        if let found = indexes.firstIndex(of: index) {
            slot = found
        } else {
            indexes.append(index)
            calls.append(ModelToolCall(id: "", name: "", argumentsText: ""))
            slot = calls.count - 1
        }
        if calls[slot].id.isEmpty { calls[slot].id = id }
        let function = raw["function"]
        if calls[slot].name.isEmpty, let name = function?["name"]?.stringValue { calls[slot].name = name }
        switch function?["arguments"] {
        case .string(let piece)?: calls[slot].argumentsText += piece
        case nil, .null?: break
        case let whole?: calls[slot].argumentsText = whole.jsonText  // some servers send an object
        }
    }
}
