import AppleCodeCore

/// The calls a run has made and their results, so that a call made again (same tool, same arguments, nothing
/// changed since) gets its earlier result instead of running again, and one made a third time ends the tool
/// rounds. Small models loop on the same call; re-running it costs time and tells them nothing new. A call that
/// changed something (a file written, a command run) makes every earlier result stale: they are forgotten.
struct CallMemory {
    private var results: [String: ToolResult] = [:]
    private var counts: [String: Int] = [:]

    /// The tool name and the arguments as canonical JSON (key order and spacing do not matter); the raw text
    /// when the arguments are not JSON.
    static func key(name: String, arguments: JSONValue?, raw: String) -> String {
        name + "\u{0}" + (arguments?.canonicalText ?? raw)
    }

    /// Notes one more call with `key`; returns how many times it has been made since the last change.
    mutating func count(_ key: String) -> Int {
        counts[key, default: 0] += 1
        return counts[key] ?? 1
    }

    func earlier(_ key: String) -> ToolResult? { results[key] }

    mutating func remember(_ key: String, _ result: ToolResult) {
        if !result.filesChanged.isEmpty || result.commandsRun > 0 {
            let count = counts[key] ?? 1
            results = [:]
            counts = [key: count]
        }
        results[key] = result
    }
}

extension JSONValue {
    /// Compact JSON with object keys sorted: equal arguments compare equal whatever their key order.
    var canonicalText: String { canonical.jsonText }

    private var canonical: JSONValue {
        switch self {
        case .object(let object):
            var sorted = JSONObject()
            for key in object.keys.sorted() { sorted[key] = object[key]?.canonical }
            return .object(sorted)
        case .array(let items): return .array(items.map(\.canonical))
        default: return self
        }
    }
}
