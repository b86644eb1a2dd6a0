import AppleCodeCore

/// A tool that works inside the workspace. Its `run` resolves the workspace, turns any failure into an
/// `Error:` result (never a throw), and cuts the result to the budget the context allows; so each tool only
/// writes `perform`.
public protocol WorkspaceTool: AgentTool {
    func perform(_ arguments: ToolArguments, in workspace: Workspace, context: ToolContext) async throws -> ToolResult
}

extension WorkspaceTool {
    public func run(_ arguments: ToolArguments, context: ToolContext) async -> ToolResult {
        let result: ToolResult
        do {
            let workspace = try Workspace(context.workspace)
            result = try await perform(arguments, in: workspace, context: context)
        } catch let failure as ToolFailure {
            result = .failure("Error: \(spec.name): \(failure.message)")
        } catch {
            result = .failure("Error: \(spec.name) failed: \(error)")
        }
        return result.fitted(toTokens: context.maxResultTokens)
    }
}

extension ToolResult {
    /// Cuts the text to `tokens` with a marker (head and tail kept) and sets `truncated`. An `Error:` text
    /// stays recognisable as one: it keeps its `Error:` start.
    public func fitted(toTokens tokens: Int) -> ToolResult {
        let (text, cut) = TokenEstimator.cut(self.text, toTokens: max(tokens, 1))
        guard cut else { return self }
        var copy = self
        copy.truncated = true
        copy.text = text
        if self.text.hasPrefix("Error:"), !text.hasPrefix("Error:") {
            // Only a budget under ~32 tokens leaves no room for the head: keep the start of the error itself.
            copy.text = TokenEstimator.prefix(self.text, bytes: TokenEstimator.bytes(forTokens: max(tokens, 1)))
        }
        return copy
    }
}

/// Collects lines of a result until the token budget is spent, keeping room for a closing note.
struct BudgetedLines {
    private(set) var lines: [String] = []
    private var bytes = 0
    private let limit: Int
    /// Set once a line did not fit.
    private(set) var full = false

    /// `tokens`: what the whole result may take; `reserve`: bytes kept for the note under the lines.
    init(tokens: Int, reserveBytes: Int = 200) {
        limit = max(0, TokenEstimator.bytes(forTokens: tokens) - reserveBytes)
    }

    /// Adds the line if it fits; returns false (and stays full) when it does not.
    mutating func add(_ line: String) -> Bool {
        guard !full else { return false }
        let size = line.utf8.count + 1
        guard bytes + size <= limit else { full = true; return false }
        bytes += size
        lines.append(line)
        return true
    }

    /// Adds as much of the line as still fits, ending in `marker`; false when not even that fits.
    mutating func addCut(_ line: String, marker: String) -> Bool {
        let room = limit - bytes - marker.utf8.count - 1
        full = true
        guard room > 0 else { return false }
        let cut = TokenEstimator.prefix(line, bytes: room) + marker
        bytes += cut.utf8.count + 1
        lines.append(cut)
        return true
    }

    var count: Int { lines.count }
    var text: String { lines.joined(separator: "\n") }
}

/// The lines of a listing or search: at most `cap` of them and what the budget allows, with every offered
/// line counted, so the closing note can say how many were left out.
struct CappedLines {
    private var lines: BudgetedLines
    let cap: Int
    private(set) var total = 0

    init(cap: Int, tokens: Int) {
        self.cap = cap
        lines = BudgetedLines(tokens: tokens)
    }

    mutating func offer(_ line: @autoclosure () -> String) {
        total += 1
        if lines.count < cap { _ = lines.add(line()) }
    }

    var shown: Int { lines.count }

    /// The lines, then `[headline; N shown, M left out; notes...]`; truncated when anything was left out.
    func result(headline: String, notes: [String], incomplete: Bool = false, summary: String) -> ToolResult {
        var parts = [headline]
        if shown < total { parts.append("\(shown) shown, \(total - shown) left out") }
        parts += notes
        let body = shown > 0 ? lines.text + "\n" : ""
        return ToolResult(text: body + "[" + parts.joined(separator: "; ") + "]", summary: summary,
                          truncated: shown < total || incomplete)
    }
}

/// "1 entry", "3 entries": counts in result notes read naturally.
func counted(_ count: Int, _ singular: String, _ plural: String) -> String {
    "\(count) \(count == 1 ? singular : plural)"
}
