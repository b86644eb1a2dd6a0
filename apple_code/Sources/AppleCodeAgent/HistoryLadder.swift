import AppleCodeCore

/// The history-condensation ladder (contract: budget rule): what the agent loop cuts from a conversation that does
/// not fit, one rung at a time, least useful first. A pure function of the history and how far over it is, so
/// each rung is testable alone; the loop measures the request after each rung and stops when it fits.
///
/// The rungs, in order: an older tool result condensed to its one-line summary (oldest first); the long string
/// arguments of a call that has run cut to a placeholder (oldest message first: a 20 KB `writeFile` content is on
/// disk, and its result says so); the oldest whole exchange (a call message and its results) dropped; the newest
/// results cut by what is over (or condensed, when cutting does not shorten them); the newest call message's
/// arguments and long text cut to a placeholder; the newest exchange dropped. The task (the first entry) and user
/// messages after it are never touched.
enum HistoryLadder {
    enum Rung: Sendable, Equatable {
        case condensedOlderResult(at: Int)
        case cutArgumentsThatRan(at: Int)
        case droppedOlderExchange(Range<Int>)
        case cutNewestResult(at: Int)
        case condensedNewestResult(at: Int)
        case cutNewestCall(at: Int)
        case droppedNewestExchange(Range<Int>)

        /// How the loop's notice counts it: results condensed, call messages cut, exchanges dropped.
        var tally: (condensed: Int, shortened: Int, dropped: Int) {
            switch self {
            case .condensedOlderResult, .condensedNewestResult: (1, 0, 0)
            case .cutArgumentsThatRan, .cutNewestCall: (0, 1, 0)
            case .droppedOlderExchange, .droppedNewestExchange: (0, 0, 1)
            case .cutNewestResult: (0, 0, 0)
            }
        }
    }

    /// `entries` one rung down, and which rung it was; nil when nothing is left to cut. `over`: by how many tokens
    /// the request is over its limit (how much the newest result is cut by).
    static func step(_ entries: [ChatEntry], over: Int) -> (entries: [ChatEntry], rung: Rung)? {
        var entries = entries
        let lastAssistant = lastAssistantIndex(entries)
        if let index = entries.indices.first(where: { $0 < lastAssistant && entries[$0].isWholeResult }) {
            entries[index] = entries[index].condensed
            return (entries, .condensedOlderResult(at: index))
        }
        if let index = entries.indices.first(where: { hasLongArgumentsThatRan(entries, at: $0) }) {
            entries[index] = entries[index].withLongArgumentsCut
            return (entries, .cutArgumentsThatRan(at: index))
        }
        if let range = oldestExchange(entries, before: lastAssistant) {
            entries.removeSubrange(range)
            return (entries, .droppedOlderExchange(range))
        }
        if let index = largestNewestResult(entries, after: lastAssistant),
           case .toolResult(let id, let name, let text, let summary, _) = entries[index] {
            let current = TokenEstimator.estimate(JSONValue.string(text).jsonText)
            let cut = cutForWire(text, tokens: max(8, current - over - 8))
            if cut.text == text {
                entries[index] = entries[index].condensed
                return (entries, .condensedNewestResult(at: index))
            }
            entries[index] = .toolResult(id: id, name: name, text: cut.text, summary: summary, condensed: false)
            return (entries, .cutNewestResult(at: index))
        }
        if lastAssistant > 0, entries[lastAssistant].withEverythingCut != entries[lastAssistant] {
            entries[lastAssistant] = entries[lastAssistant].withEverythingCut
            return (entries, .cutNewestCall(at: lastAssistant))
        }
        if let range = oldestExchange(entries, before: entries.count) {
            entries.removeSubrange(range)
            return (entries, .droppedNewestExchange(range))
        }
        return nil
    }

    /// The history as the ladder will have it once the newest calls have run and their results are older: every
    /// result before the newest call message condensed, every call's long arguments cut. What a tool's room is
    /// reckoned on.
    static func lean(_ entries: [ChatEntry]) -> [ChatEntry] {
        let lastAssistant = lastAssistantIndex(entries)
        return entries.enumerated().map { index, entry in
            (index < lastAssistant ? entry.condensed : entry).withLongArgumentsCut
        }
    }

    /// Cuts `text` so that its JSON-escaped form (as sent) fits `tokens`.
    static func cutForWire(_ text: String, tokens: Int) -> (text: String, truncated: Bool) {
        var limit = tokens
        var cut = (text: text, truncated: false)
        for _ in 0..<6 {
            cut = TokenEstimator.cut(text, toTokens: limit)
            let sent = TokenEstimator.estimate(JSONValue.string(cut.text).jsonText)
            if sent <= tokens { return cut }
            limit -= max(8, sent - tokens)
            if limit < 8 { break }
        }
        return TokenEstimator.cut(text, toTokens: max(1, limit / 2))
    }

    /// The newest assistant message (0 when there is none: the task's index, which no rung touches).
    static func lastAssistantIndex(_ entries: [ChatEntry]) -> Int {
        entries.lastIndex { if case .assistant = $0 { true } else { false } } ?? 0
    }

    /// An assistant message and the results after it, the first before `limit` (never the task at 0).
    static func oldestExchange(_ entries: [ChatEntry], before limit: Int) -> Range<Int>? {
        guard let start = entries.indices.first(where: { index in
            guard index > 0, index < limit, case .assistant = entries[index] else { return false }
            return true
        }) else { return nil }
        var end = start + 1
        while end < entries.count, case .toolResult = entries[end] { end += 1 }
        return start..<end
    }

    /// An assistant message whose calls all have their results recorded and carry an argument worth cutting.
    static func hasLongArgumentsThatRan(_ entries: [ChatEntry], at index: Int) -> Bool {
        guard case .assistant(_, let calls) = entries[index], calls.contains(where: \.hasLongArguments) else {
            return false
        }
        let answered = Set(entries[(index + 1)...].compactMap { entry -> String? in
            if case .toolResult(let id, _, _, _, _) = entry { id } else { nil }
        })
        return calls.allSatisfy { answered.contains($0.id) }
    }

    static func largestNewestResult(_ entries: [ChatEntry], after index: Int) -> Int? {
        entries.indices.filter { $0 > index && entries[$0].isWholeResult }
            .max { entries[$0].resultLength < entries[$1].resultLength }
    }
}

extension ChatEntry {
    var isWholeResult: Bool {
        if case .toolResult(_, _, _, _, let condensed) = self { !condensed } else { false }
    }

    var resultLength: Int {
        if case .toolResult(_, _, let text, _, _) = self { text.utf8.count } else { 0 }
    }

    /// An assistant message with each call's long string arguments replaced by a placeholder (`ModelToolCall`).
    var withLongArgumentsCut: ChatEntry {
        guard case .assistant(let text, let calls) = self else { return self }
        return .assistant(text: text, calls: calls.map(\.withLongArgumentsCut))
    }

    /// An assistant message as small as it can be while its calls keep their ids and names: every call's
    /// arguments and a long text become a placeholder.
    var withEverythingCut: ChatEntry {
        guard case .assistant(let text, let calls) = self else { return self }
        let shortText = text.utf8.count > ModelToolCall.longArgumentBytes
            ? ModelToolCall.placeholder(text, what: "text") : text
        return .assistant(text: shortText, calls: calls.map(\.withArgumentsCut))
    }

    var condensed: ChatEntry {
        if case .toolResult(let id, let name, let text, let summary, _) = self {
            return .toolResult(id: id, name: name, text: text, summary: summary, condensed: true)
        }
        return self
    }
}
