import AppleCodeCore

/// The prompt of a fresh window after the previous one overflowed: the task, a journal of what was done, the
/// files changed, within a token limit (the newest journal entries are kept when it must be cut).
enum CondensedPrompt {
    static let overflowNote = "The context window filled up, so this continues in a new one. Do not repeat finished "
        + "steps."
    static let overflowEnding = "Continue the task from here and finish with the answer."

    static func make(task: String, journal: [JournalEntry], filesChanged: [String], partialAnswer: String,
                     maxTokens: Int, note: String = overflowNote, ending: String = overflowEnding) -> String {
        let taskText = TokenEstimator.cut(task, toTokens: max(48, maxTokens / 2)).text
        var head = "Task:\n\(taskText)\n\n"
        head += note
        var tail = ""
        if !filesChanged.isEmpty { tail += "\n\nFiles changed so far: \(filesChanged.joined(separator: ", "))" }
        if !partialAnswer.isEmpty {
            tail += "\n\nYour answer so far (cut): " + TokenEstimator.cut(partialAnswer, toTokens: 80).text
        }
        tail += "\n\n" + ending

        var lines: [String] = []
        var used = TokenEstimator.estimate(head + tail) + 8
        var omitted = 0
        for (index, entry) in journal.enumerated().reversed() {
            let line = "\(index + 1). \(entry.line)"
            let cost = TokenEstimator.estimate(line)
            if used + cost > maxTokens {
                omitted = index + 1
                break
            }
            used += cost
            lines.insert(line, at: 0)
        }
        var body = ""
        if !journal.isEmpty {
            body = "\n\nDone so far (oldest first):\n"
            if omitted > 0 { body += "(\(omitted) earlier steps omitted)\n" }
            body += lines.joined(separator: "\n")
        }
        return head + body + tail
    }
}

/// One tool call of a run, as the condensed prompt and the verbose log show it.
struct JournalEntry: Sendable, Equatable {
    let tool: String
    let arguments: String
    let summary: String
    let ok: Bool

    var line: String {
        let args = TokenEstimator.cut(arguments, toTokens: 40).text
        return "\(tool) \(args) -> \(ok ? "" : "failed: ")\(summary)"
    }
}
