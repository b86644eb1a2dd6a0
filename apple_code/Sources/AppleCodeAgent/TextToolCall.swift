import AppleCodeCore

/// Recognises a tool call that a model wrote as its reply text instead of a structured `tool_calls` entry.
/// Small models do this whenever the server does not parse their format: llama.cpp's chatml-function-calling
/// format renders earlier calls as `functions.NAME:` followed by the arguments, and models imitate it; Qwen and
/// Hermes-style models write `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`; others the bare
/// OpenAI-style object, often in a code fence, sometimes after a sentence of prose. A whole reply in one of these
/// shapes counts; inside prose, a `<tool_call>` block, or a JSON object with only `name` and `arguments` naming
/// one of `tools`, counts too (the first one); anything else stays text.
enum TextToolCall {
    /// The call the text holds (with an empty id), or nil when the text is an answer. With `unknownNames`, a
    /// whole reply that is one `{"name": ..., "arguments": {...}}` object is a call even when it names no tool
    /// (the loop answers it with the list of tools): small models, offered tools, "answered" a change request
    /// with a call of a tool they made up (`setPort`, `is_palindrome`), which is no answer to show the user.
    static func parse(_ text: String, tools: [String], unknownNames: Bool = false) -> ModelToolCall? {
        let body = unfenced(untagged(text.trimmed(of: whitespace)))
        return prefixed(body, tools: tools) ?? bareObject(body, tools: tools) ?? embedded(text, tools: tools)
            ?? (unknownNames ? madeUpCall(body) : nil)
    }

    /// `{"name": NAME, "arguments": {...}}` and nothing else, whatever NAME is.
    private static func madeUpCall(_ text: String) -> ModelToolCall? {
        guard text.hasPrefix("{"), let object = (try? JSONValue.parseModelWritten(text))?.objectValue,
              let name = object["name"]?.stringValue, !name.isEmpty, object.count == 2,
              case .object(let arguments)? = object["arguments"] else { return nil }
        return ModelToolCall(id: "", name: name, argumentsText: JSONValue.object(arguments).jsonText)
    }

    static let openTag = "<tool_call>"
    static let closeTag = "</tool_call>"

    private static let whitespace = " \n\r\t"

    /// Whether text that has begun as `start` may still turn out to be a call `parse` takes (so a streamed reply
    /// holds it back rather than showing it as the answer): nothing yet, the start of `functions.`, an object, or
    /// a code fence whose inside may still be one of these.
    static func mayBeCall(_ start: String) -> Bool {
        var text = Substring(start)
        while let first = text.first, whitespace.contains(first) { text = text.dropFirst() }
        if text.hasPrefix("```") {
            let afterTicks = text.dropFirst(3)
            guard let newline = afterTicks.firstIndex(of: "\n") else {
                return afterTicks.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "\r" }
            }
            return mayBeCall(String(afterTicks[afterTicks.index(after: newline)...]))
        }
        let prefix = "functions."
        let shown = text.prefix(prefix.count).lowercased()
        return text.isEmpty || text.hasPrefix("{") || "``".hasPrefix(shown) || prefix.hasPrefix(shown)
            || text.hasPrefix(openTag) || openTag.hasPrefix(text)
    }

    /// The inside of a `<tool_call>` tag around the whole text (the closing tag may be missing: cut by the
    /// answer reserve, or left out), else the text itself.
    private static func untagged(_ text: String) -> String {
        guard text.hasPrefix(openTag) else { return text }
        var inner = text.dropFirst(openTag.count)
        if inner.hasSuffix(closeTag) { inner = inner.dropLast(closeTag.count) }
        return String(inner).trimmed(of: whitespace)
    }

    /// The first call inside prose: a `<tool_call>` block, else a JSON object that starts with `"name"` and is a
    /// call to one of `tools` (fenced or not).
    private static func embedded(_ text: String, tools: [String]) -> ModelToolCall? {
        var rest = Substring(text)
        while let open = rest.range(of: openTag) {
            let after = rest[open.upperBound...]
            let inner = after.range(of: closeTag).map { after[..<$0.lowerBound] } ?? after
            if let call = bareObject(unfenced(String(inner).trimmed(of: whitespace)), tools: tools) { return call }
            rest = after
        }
        var index = text.startIndex
        while let brace = text[index...].firstIndex(of: "{") {
            let afterBrace = text[text.index(after: brace)...].drop { whitespace.contains($0) }
            if afterBrace.hasPrefix("\"name\""), let object = balancedObject(text[brace...]),
               let call = bareObject(String(object), tools: tools) {
                return call
            }
            index = text.index(after: brace)
        }
        return nil
    }

    /// The JSON object that starts at `text`'s first character, up to its matching brace (strings and escapes
    /// respected), or nil when it does not close.
    private static func balancedObject(_ text: Substring) -> Substring? {
        var depth = 0
        var inString = false
        var escaped = false
        for index in text.indices {
            let character = text[index]
            if inString {
                if escaped { escaped = false } else if character == "\\" { escaped = true } else if character == "\"" {
                    inString = false
                }
                continue
            }
            switch character {
            case "\"": inString = true
            case "{": depth += 1
            case "}":
                depth -= 1
                if depth == 0 { return text[...index] }
            default: break
            }
        }
        return nil
    }

    /// The inside of one Markdown code fence around the whole text (any language tag), else the text itself.
    private static func unfenced(_ text: String) -> String {
        guard text.hasPrefix("```"), text.hasSuffix("```"), text.count >= 6 else { return text }
        var inner = text.dropFirst(3).dropLast(3)
        guard let newline = inner.firstIndex(of: "\n") else { return text }
        let tag = inner[..<newline]
        guard tag.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else { return text }
        inner = inner[inner.index(after: newline)...]
        return String(inner).trimmed(of: whitespace)
    }

    /// `functions.NAME:` (any case: models capitalise the reply's first word) then nothing or a JSON object
    /// (kept as raw text: malformed arguments get the loop's usual `Error:` result, as for a structured call).
    private static func prefixed(_ text: String, tools: [String]) -> ModelToolCall? {
        let prefix = "functions."
        guard text.prefix(prefix.count).lowercased() == prefix, let colon = text.firstIndex(of: ":") else { return nil }
        let name = String(text[text.index(text.startIndex, offsetBy: prefix.count)..<colon])
        guard tools.contains(name) else { return nil }
        let arguments = String(text[text.index(after: colon)...]).trimmed(of: whitespace)
        guard arguments.isEmpty || (arguments.hasPrefix("{") && arguments.hasSuffix("}")) else { return nil }
        return ModelToolCall(id: "", name: name, argumentsText: arguments)
    }

    /// `{"name": NAME, "arguments": {...}}` (or `"parameters"`, or arguments as a JSON string), no other keys.
    private static func bareObject(_ text: String, tools: [String]) -> ModelToolCall? {
        guard text.hasPrefix("{"), let object = (try? JSONValue.parseModelWritten(text))?.objectValue,
              let name = object["name"]?.stringValue, tools.contains(name),
              Set(object.keys).isSubset(of: ["name", "arguments", "parameters"]) else { return nil }
        switch object["arguments"] ?? object["parameters"] {
        case nil, .null?: return ModelToolCall(id: "", name: name, argumentsText: "")
        case .string(let raw)?: return ModelToolCall(id: "", name: name, argumentsText: raw)
        case .object(let arguments)?: return ModelToolCall(id: "", name: name, argumentsText: JSONValue.object(arguments).jsonText)
        default: return nil
        }
    }
}

/// Passes a streamed reply's text on as it comes, except while it may still turn out to be a tool call written as
/// text (`TextToolCall`), which is not an answer to show: that start is held until it is clearly text, or until
/// the reply is complete and `release()` is called for a reply that was not taken as a call.
struct TextRelay {
    private var held = ""
    private var passing = false

    mutating func pass(_ piece: String) -> String {
        if passing { return piece }
        held += piece
        guard !TextToolCall.mayBeCall(held) else { return "" }
        passing = true
        return release()
    }

    mutating func release() -> String {
        defer { held = "" }
        return held
    }
}
