import AppleCodeCore

/// A tool call as the model sent it: arguments are raw text, because small models send malformed JSON.
public struct ModelToolCall: Sendable, Equatable {
    public var id: String
    public var name: String
    public var argumentsText: String

    public init(id: String, name: String, argumentsText: String) {
        self.id = id
        self.name = name
        self.argumentsText = argumentsText
    }
}

/// One message of the conversation after the system message.
public enum ChatEntry: Sendable, Equatable {
    case user(String)
    case assistant(text: String, calls: [ModelToolCall])
    /// A tool's result; `condensed` results are sent as their one-line `summary`.
    case toolResult(id: String, name: String, text: String, summary: String, condensed: Bool)
}

/// How tool results travel: as `role:"tool"` messages (the standard), or folded into a user message for servers
/// whose chat template drops tool messages (llama.cpp's chatml-function-calling).
public enum ToolResultStyle: String, Sendable, Equatable {
    case toolMessages = "tool"
    case userMessages = "user"
}

/// What one request carries. `estimatedTokens` is the figure the budget is kept on (see `ChatWire`).
public struct ChatRequest: Sendable, Equatable {
    public var system: String
    public var entries: [ChatEntry]
    public var tools: [ToolSpec]
    public var maxTokens: Int
    public var style: ToolResultStyle
    /// Send the history without tool-call structure: calls left out, results folded into user messages. For
    /// requests that offer no tools: chat templates render earlier calls as text (llama.cpp's
    /// `functions.NAME:`), which small models then imitate instead of answering.
    public var plainHistory: Bool
    /// The reply must be a call to one of these tools (nil: the model may also answer in words). The first request
    /// of a task must look (read, list, search or run) before anything else: small models otherwise answer from
    /// memory, or edit text they imagine.
    public var mustCallOneOf: [String]?

    public init(system: String, entries: [ChatEntry], tools: [ToolSpec], maxTokens: Int, style: ToolResultStyle,
                plainHistory: Bool = false, mustCallOneOf: [String]? = nil) {
        self.system = system
        self.entries = entries
        self.tools = tools
        self.maxTokens = maxTokens
        self.style = style
        self.plainHistory = plainHistory
        self.mustCallOneOf = mustCallOneOf
    }

    public var messagesJSON: JSONValue {
        ChatWire.messages(system: system, entries: entries, style: style, plainHistory: plainHistory)
    }
    public var toolsJSON: JSONValue { .array(tools.map(\.openAIDefinition)) }

    /// The documented request estimate: estimate(compact JSON of `messages`) + estimate(compact JSON of
    /// `tools`, 0 without tools) + `max_tokens`. Integration tests recompute it from recorded request bodies.
    public var estimatedTokens: Int {
        TokenEstimator.estimate(messagesJSON.jsonText) + ContextBudget.toolDefinitionTokens(tools) + maxTokens
    }
}

/// The reply to one request.
public struct ChatReply: Sendable, Equatable {
    public var text: String
    public var calls: [ModelToolCall]
    /// Tokens as the server counted them, when it said.
    public var promptTokens: Int?
    public var completionTokens: Int?

    public init(text: String, calls: [ModelToolCall] = [], promptTokens: Int? = nil, completionTokens: Int? = nil) {
        self.text = text
        self.calls = calls
        self.promptTokens = promptTokens
        self.completionTokens = completionTokens
    }
}

/// The OpenAI chat wire format of the conversation.
public enum ChatWire {
    public static func messages(system: String, entries: [ChatEntry], style: ToolResultStyle,
                                plainHistory: Bool = false) -> JSONValue {
        var messages: [JSONValue] = [["role": "system", "content": .string(system)]]
        var folded: [String] = []
        func flushFolded() {
            guard !folded.isEmpty else { return }
            messages.append(["role": "user", "content": .string(folded.joined(separator: "\n\n"))])
            folded = []
        }
        for entry in entries {
            switch entry {
            case .user(let text):
                flushFolded()
                messages.append(["role": "user", "content": .string(text)])
            case .assistant(let text, let calls):
                if plainHistory {
                    // Only what the model said; its calls show through their folded results.
                    guard !text.isEmpty else { continue }
                    flushFolded()
                    messages.append(["role": "assistant", "content": .string(text)])
                    continue
                }
                flushFolded()
                var message: JSONObject = ["role": "assistant", "content": .string(text)]
                if !calls.isEmpty {
                    // Content "" rather than null beside tool calls: some chat templates crash on null.
                    message["tool_calls"] = .array(calls.map { call in
                        [
                            "id": .string(call.id),
                            "type": "function",
                            "function": ["name": .string(call.name), "arguments": .string(call.argumentsText)],
                        ]
                    })
                }
                messages.append(.object(message))
            case .toolResult(let id, let name, let text, let summary, let condensed):
                let content = condensed ? "[condensed to save context] \(summary)" : text
                switch plainHistory ? .userMessages : style {
                case .toolMessages:
                    messages.append([
                        "role": "tool", "tool_call_id": .string(id), "name": .string(name),
                        "content": .string(content),
                    ])
                case .userMessages:
                    // No call id: the model does not see calls' ids (llama.cpp's template leaves them out), and
                    // an id like `call__0_writeFile_cmpl-f9...` reads as a name SmolLM2 echoed in its answer.
                    // Asking for the answer, a result is headed by what it holds ("calc.py lines 1-6 of 6"):
                    // small models answered "The result of readFile is ..." to a "Result of readFile" heading.
                    let heading = plainHistory && !condensed
                        ? Self.plainHeading(summary, name: name) : "Result of \(name)"
                    folded.append("\(heading):\n\(content)")
                }
            }
        }
        flushFolded()
        return .array(messages)
    }
}

extension ChatWire {
    /// A result's summary without the tool's name before it (`readFile: calc.py lines 1-6 of 6`), or "Result of
    /// NAME" when it has none.
    static func plainHeading(_ summary: String, name: String) -> String {
        let own = summary.hasPrefix(name + ": ") ? String(summary.dropFirst(name.count + 2)) : summary
        return own.isEmpty ? "Result of \(name)" : own
    }
}

/// Cutting a call's arguments from the history once it has run: the id and name stay (its result must still follow
/// it), and the arguments stay a valid JSON object whose long strings say what was there.
extension ModelToolCall {
    /// Strings longer than this (UTF-8 bytes) are cut; the placeholder itself is shorter, so cutting ends.
    static let longArgumentBytes = 160

    var hasLongArguments: Bool { withLongArgumentsCut.argumentsText != argumentsText }

    var withLongArgumentsCut: ModelToolCall {
        var call = self
        let trimmed = argumentsText.trimmingWhitespace
        if let value = try? JSONValue.parse(trimmed) {
            let cut = Self.cutLongStrings(value)
            if cut != value { call.argumentsText = cut.jsonText }
            // Many short values (a 40,000-key object) stay long: one placeholder for the whole.
            if call.argumentsText.utf8.count > Self.longArgumentsBytes {
                call.argumentsText = JSONValue.object(["arguments": .string(Self.placeholder(argumentsText,
                                                                                            what: "arguments"))]).jsonText
            }
        } else if argumentsText.utf8.count > Self.longArgumentBytes {
            // Malformed arguments (the call got an error result): a valid object that says what was there.
            let placeholder = Self.placeholder(argumentsText, what: "malformed JSON")
            call.argumentsText = JSONValue.object(["arguments": .string(placeholder)]).jsonText
        }
        return call
    }

    private static func cutLongStrings(_ value: JSONValue) -> JSONValue {
        switch value {
        case .string(let text) where text.utf8.count > longArgumentBytes:
            // A double-encoded object (see `parseArguments`) is cut inside, not replaced whole.
            if let inner = try? JSONValue.parse(text), inner.objectValue != nil { return cutLongStrings(inner) }
            return .string(placeholder(text, what: "text"))
        case .array(let items): return .array(items.map(cutLongStrings))
        case .object(let object):
            var cut = JSONObject()
            for (key, item) in object.entries { cut[key] = cutLongStrings(item) }
            return .object(cut)
        default: return value
        }
    }

    /// `[4,812 bytes of text, starting "import Foundation…"; cut from the history]`, well under
    /// `longArgumentBytes` whatever the text (its start is at most 32 bytes), so it is never cut again.
    static func placeholder(_ text: String, what: String) -> String {
        var start = ""
        for character in text {
            let shown = character.isNewline ? " " : String(character)
            guard start.utf8.count + shown.utf8.count <= 32 else { break }
            start += shown
        }
        return "[\(grouped(text.utf8.count)) bytes of \(what), starting \"\(start)…\"; cut from the history]"
    }

    static func grouped(_ number: Int) -> String {
        var digits = String(number)
        var groups: [String] = []
        while digits.count > 3 {
            groups.insert(String(digits.suffix(3)), at: 0)
            digits = String(digits.dropLast(3))
        }
        groups.insert(digits, at: 0)
        return groups.joined(separator: ",")
    }
}

/// Bounding what the model sent before it goes back into the history: a tool name no tool has (10,000
/// characters of it) is kept short, and arguments that stay long once their long strings are cut (many short
/// values) become a placeholder as a whole.
extension ModelToolCall {
    /// Names longer than this (UTF-8 bytes) are cut: no tool has such a name.
    static let longNameBytes = 64
    /// Arguments still longer than this once their long strings are cut become one placeholder.
    static let longArgumentsBytes = 1024

    var withBoundedName: ModelToolCall {
        guard name.utf8.count > Self.longNameBytes else { return self }
        var call = self
        var start = ""
        for character in name {
            guard start.utf8.count + String(character).utf8.count <= 40 else { break }
            start.append(character)
        }
        call.name = "\(start)...(\(Self.grouped(name.utf8.count)) bytes)"
        return call
    }

    /// Every argument cut: arguments longer than a placeholder become one.
    var withArgumentsCut: ModelToolCall {
        guard argumentsText.utf8.count > Self.longArgumentBytes else { return self }
        var call = self
        call.argumentsText = JSONValue.object(["arguments": .string(Self.placeholder(argumentsText, what: "arguments"))]).jsonText
        return call
    }
}
