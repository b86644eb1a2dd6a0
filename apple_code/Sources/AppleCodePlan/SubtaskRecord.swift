import AppleCodeCore

/// What became of one subtask. Workers learn about earlier ones only through `digestLine` (never transcripts);
/// the user gets `answerSection`.
struct SubtaskRecord: Sendable, Equatable {
    enum Status: Sendable, Equatable {
        case notStarted
        case done(answer: String)
        case failed(outcome: RunOutcome, message: String, partial: String)
    }

    /// 1-based, as in the `subtask` field of events.
    let index: Int
    let subtask: String
    var status: Status = .notStarted
    var progress = RunProgress()

    var succeeded: Bool { if case .done = status { true } else { false } }
    var isFailure: Bool { if case .failed = status { true } else { false } }

    /// At most this many characters of a result go into a digest line.
    static let digestResultCharacters = 160
    static let digestSubtaskCharacters = 100

    /// "2. Fix b.py: renamed foo to bar (changed: b.py)": what a later worker and the summary see.
    var digestLine: String {
        let result: String
        switch status {
        case .notStarted: result = "not started"
        case .done(let answer): result = Self.clip(PlanParser.oneLine(answer), Self.digestResultCharacters)
        case .failed(let outcome, let message, _):
            result = "FAILED (\(outcome.subtype)): " + Self.clip(PlanParser.oneLine(message), Self.digestResultCharacters)
        }
        var line = "\(index). \(Self.clip(subtask, Self.digestSubtaskCharacters)): \(result)"
        if !progress.filesChanged.isEmpty {
            line += " (changed: \(progress.filesChanged.joined(separator: ", ")))"
        }
        return line
    }

    /// The subtask and its whole result, for the combined answer.
    var answerSection: String {
        let body: String
        switch status {
        case .notStarted: body = "(not started)"
        case .done(let answer): body = answer.trimmed.isEmpty ? "(no answer)" : answer.trimmed
        case .failed(let outcome, let message, let partial):
            body = "FAILED (\(outcome.subtype)): \(message)" + (partial.trimmed.isEmpty ? "" : "\nPartial: \(partial.trimmed)")
        }
        return "\(index). \(subtask)\n\(body)"
    }

    static func clip(_ text: String, _ characters: Int) -> String {
        text.count <= characters ? text : String(text.prefix(characters - 1)) + "…"
    }
}

/// The combined answer: the subtasks in order with their results, then the overall summary.
enum CombinedAnswer {
    static func render(_ records: [SubtaskRecord], summary: String?) -> String {
        var sections = ["Plan: \(records.count) subtask\(records.count == 1 ? "" : "s")."]
        sections += records.map(\.answerSection)
        if let summary, !summary.trimmed.isEmpty { sections.append("Summary: \(summary.trimmed)") }
        return sections.joined(separator: "\n\n")
    }

    /// The digest lines of the given records, one a line.
    static func digest(_ records: some Sequence<SubtaskRecord>) -> String {
        records.map(\.digestLine).joined(separator: "\n")
    }
}
