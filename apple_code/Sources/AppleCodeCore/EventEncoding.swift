/// Events as contract JSON (Output: stream-json), and the 16 KiB line limit.
extension AgentEvent {
    public var json: JSONValue {
        var object = JSONObject()
        func put(_ key: String, _ value: JSONValue) { object[key] = value }
        switch kind {
        case .start(let info):
            put("type", "start")
            putSubtask(&object)
            put("version", .string(info.version))
            put("backend", .string(info.backend))
            put("model", .string(info.model))
            put("cwd", .string(info.cwd))
            put("context_tokens", .int(info.contextTokens))
            put("tools", .array(info.tools.map(JSONValue.string)))
        case .toolCall(let id, let name, let arguments):
            put("type", "tool_call")
            putSubtask(&object)
            put("id", .string(id))
            put("name", .string(name))
            put("arguments", arguments)
        case .toolResult(let id, let name, let ok, let summary, let truncated):
            put("type", "tool_result")
            putSubtask(&object)
            put("id", .string(id))
            put("name", .string(name))
            put("ok", .bool(ok))
            put("summary", .string(summary))
            put("truncated", .bool(truncated))
            if let output = detail?.output { put("output", .string(output)) }
            if let exitCode = detail?.exitCode { put("exit_code", .int(exitCode)) }
            if let diff = detail?.diff { put("diff", .string(diff)) }
        case .text(let delta):
            put("type", "text")
            putSubtask(&object)
            put("delta", .string(delta))
        case .notice(let message):
            put("type", "notice")
            putSubtask(&object)
            put("message", .string(message))
        case .verify(let report):
            put("type", "verify")
            putSubtask(&object)
            for entry in report.json.objectValue?.entries ?? [] { put(entry.key, entry.value) }
        case .result(let report):
            put("type", "result")
            putSubtask(&object)
            for entry in report.json.objectValue?.entries ?? [] where entry.key != "type" {
                put(entry.key, entry.value)
            }
        }
        return .object(object)
    }

    private func putSubtask(_ object: inout JSONObject) {
        if let subtask { object["subtask"] = .int(subtask) }
    }
}

extension RunReport {
    /// The `result` event / `--output-format json` object.
    public var json: JSONValue {
        var object: JSONObject = [
            "type": "result",
            "subtype": .string(outcome.subtype),
            "is_error": .bool(outcome.isError),
            "result": .string(result),
            "num_turns": .int(progress.turns),
            "duration_ms": .int(durationMs),
            "usage": usageJSON,
            "files_changed": .array(progress.filesChanged.map(JSONValue.string)),
            "commands_run": .int(progress.commandsRun),
            "backend": .string(backend),
            "model": .string(model),
        ]
        if let verify = progress.verify { object["verify"] = verify.json }
        return .object(object)
    }
}

extension VerifyReport {
    /// The result's `verify` object and the body of a `verify` event.
    public var json: JSONValue {
        var object: JSONObject = [
            "command": .string(command),
            "passed": .bool(passed),
            "rounds": .int(rounds),
            "runs": .int(runs),
        ]
        if let exitCode { object["exit_code"] = .int(exitCode) }
        object["output_tail"] = .string(outputTail)
        if before { object["before"] = true }
        return .object(object)
    }
}


extension RunReport {
    /// `fixed_tokens` (instructions and tool definitions) only where a request was budgeted.
    var usageJSON: JSONValue {
        var usage: JSONObject = [
            "input_tokens": .int(progress.usage.inputTokens),
            "output_tokens": .int(progress.usage.outputTokens),
            "estimated": .bool(progress.usage.estimated),
        ]
        if let fixed = progress.usage.fixedTokens { usage["fixed_tokens"] = .int(fixed) }
        return .object(usage)
    }
}

/// Keeps every stream-json line within a byte limit (contract: no line over 16 KiB).
public enum JSONLines {
    public static let maxLineBytes = 16 * 1024

    /// The lines (without newline) for one event: a long text delta is split into several `text` events
    /// (nothing lost); any other event has its longest strings cut, each saying so, until it fits.
    public static func lines(for event: AgentEvent, limit: Int = maxLineBytes) -> [String] {
        if case .text(let delta) = event.kind {
            let whole = event.json.jsonText
            if whole.utf8.count < limit { return [whole] }
            // Escaping can grow a byte up to six; split on characters with room to spare.
            let pieceBytes = max(1, (limit - 200) / 6)
            var lines: [String] = []
            var rest = Substring(delta)
            while !rest.isEmpty {
                let piece = TokenEstimator.prefix(String(rest), bytes: pieceBytes)
                let chunk = piece.isEmpty ? String(rest.prefix(1)) : piece
                rest = rest.dropFirst(chunk.count)
                lines.append(AgentEvent(.text(delta: chunk), subtask: event.subtask).json.jsonText)
            }
            return lines
        }
        return [fit(event.json, limit: limit)]
    }

    /// Strings this short are never cut: the marker would be longer than what it saves, and the event's own
    /// fields (`type`, `id`, `subtype`) are this short.
    static let uncutStringBytes = 256

    /// Cuts the longest string values of `value` until its compact JSON is under `limit` bytes. Where no one
    /// string is long enough (arguments made of many numbers, short strings or keys), the nested array or object
    /// that frees the most is replaced by a string of its JSON, which is then cut like any other.
    public static func fit(_ value: JSONValue, limit: Int = maxLineBytes) -> String {
        var current = value
        var text = current.jsonText
        var rounds = 0
        while text.utf8.count >= limit, rounds < 64 {
            rounds += 1
            let over = text.utf8.count - limit + 1
            let longest = current.longestString ?? ""
            // One cut of the longest string suffices, or there is nothing else to cut.
            let enough = JSONValue.string(longest).jsonText.utf8.count >= over || !current.hasNestedContainer
            if longest.utf8.count > uncutStringBytes, enough {
                // Cut the longest string by what is over plus room for the marker; escapes make the JSON longer
                // than the string, so cut by JSON length, conservatively.
                current = current.cuttingLongestString(by: over + 120)
            } else if let collapsed = current.collapsingContainer(freeing: over) {
                current = collapsed
            } else {
                break
            }
            text = current.jsonText
        }
        return text
    }
}

extension JSONValue {
    fileprivate var longestString: String? {
        switch self {
        case .string(let s): s
        case .array, .object: children.compactMap(\.longestString).max { $0.utf8.count < $1.utf8.count }
        default: nil
        }
    }

    private var isContainer: Bool {
        switch self {
        case .array, .object: true
        default: false
        }
    }

    /// The values directly inside an array or object.
    private var children: [JSONValue] {
        switch self {
        case .array(let items): items
        case .object(let object): object.entries.map(\.value)
        default: []
        }
    }

    fileprivate var hasNestedContainer: Bool { children.contains(where: \.isContainer) }

    /// Replaces one array or object below this value by a string of its JSON text: the deepest one whose JSON
    /// alone is at least `bytes` long, else the largest. Nil when there is none (this value itself is kept).
    fileprivate func collapsingContainer(freeing bytes: Int) -> JSONValue? {
        let sizes = children.enumerated().filter { $0.element.isContainer }
            .map { (index: $0.offset, size: $0.element.jsonText.utf8.count) }
        guard let largest = sizes.max(by: { $0.size < $1.size }) else { return nil }
        let child = children[largest.index]
        let replacement = child.collapsingDeeper(freeing: bytes) ?? .string(child.jsonText)
        switch self {
        case .array(var items):
            items[largest.index] = replacement
            return .array(items)
        case .object(var object):
            object[object.keys[largest.index]] = replacement
            return .object(object)
        default:
            return nil
        }
    }

    /// `collapsingContainer` inside this value when a container inside it frees enough by itself.
    private func collapsingDeeper(freeing bytes: Int) -> JSONValue? {
        let enough = children.contains { $0.isContainer && $0.jsonText.utf8.count >= bytes }
        return enough ? collapsingContainer(freeing: bytes) : nil
    }

    /// Cuts the (first) longest string by at least `bytes` of its JSON text, with a marker saying so.
    fileprivate func cuttingLongestString(by bytes: Int) -> JSONValue {
        guard let target = longestString?.utf8.count else { return self }
        var done = false
        return replacingString(ofLength: target, done: &done) { s in
            let escapedLength = JSONValue.string(s).jsonText.utf8.count
            let ratio = Double(s.utf8.count) / Double(max(1, escapedLength))
            let keepBytes = max(0, Int(Double(escapedLength - bytes) * ratio) - 1)
            let kept = TokenEstimator.prefix(s, bytes: keepBytes)
            return kept + " [... cut: \(s.utf8.count - kept.utf8.count) of \(s.utf8.count) bytes, line limit 16 KiB]"
        }
    }

    private func replacingString(ofLength length: Int, done: inout Bool,
                                 _ transform: (String) -> String) -> JSONValue {
        if done { return self }
        switch self {
        case .string(let s) where s.utf8.count == length:
            done = true
            return .string(transform(s))
        case .array(let items):
            return .array(items.map { $0.replacingString(ofLength: length, done: &done, transform) })
        case .object(let object):
            var copy = object
            for entry in object.entries {
                copy[entry.key] = entry.value.replacingString(ofLength: length, done: &done, transform)
            }
            return .object(copy)
        default:
            return self
        }
    }
}
