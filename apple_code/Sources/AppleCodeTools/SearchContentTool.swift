#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import AppleCodeCore
import Foundation

/// `searchContent(pattern, path=".", filePattern="*")`: `file:line:text` for lines matching a regular
/// expression (or, when the pattern is not a valid one, the literal text); at most 100 matches, fewer when the
/// budget is short. Binary files, symlinks and very large files are not searched.
public struct SearchContentTool: WorkspaceTool {
    public static let maxMatches = 100
    /// Files above this size are skipped (and counted), to bound the time one search takes.
    public static let maxFileBytes = 20 << 20
    /// A matching line is shown up to this many characters.
    static let maxShownCharacters = 200
    /// The longest one search may take (bounded also by the run's deadline).
    public let maxSearchTime: Duration

    public let spec = ToolSpec(
        name: "searchContent",
        description: "Search files for a regex.",
        parameters: [
            ParameterSpec("pattern", .string, ""),
            ParameterSpec("path", .string, "", required: false),
            ParameterSpec("filePattern", .string, "", required: false),
        ])

    public init(maxSearchTime: Duration = .seconds(10)) {
        self.maxSearchTime = maxSearchTime
    }

    public func perform(_ arguments: ToolArguments, in workspace: Workspace, context: ToolContext) async throws
        -> ToolResult {
        let pattern = arguments.string("pattern") ?? ""
        if pattern.isEmpty { throw ToolFailure("the pattern is empty") }
        let matcher = LineMatcher(pattern)
        let files = Glob(arguments.string("filePattern") ?? "*")
        let folder = try workspace.resolve(arguments.string("path") ?? ".")
        let walker = TreeWalker(workspace: workspace, recursive: true)
        var lines = CappedLines(cap: Self.maxMatches, tokens: context.maxResultTokens)
        var largeFiles = 0

        // A backtracking pattern such as (a+)+b can take forever on one line: the search gives up at this time.
        let giveUp = min(context.deadline ?? .now + maxSearchTime, .now + maxSearchTime)
        var stopped = false

        func search(_ absolute: String, shown: String) {
            guard !stopped, let fd = try? FileIO.openForReading(absolute, shown: shown) else { return }
            defer { close(fd) }
            guard !FileIO.looksBinary(fd: fd) else { return }
            _ = try? FileIO.scanLines(fd: fd, countAll: false) { number, text, _ in
                // A stopped run (--timeout, a signal) stops a long search between lines too.
                if Task.isCancelled { stopped = true }
                switch stopped ? false : matcher.matches(text, giveUpAt: giveUp) {
                case true?: lines.offer("\(shown):\(number):\(Self.shorten(text))")
                case false?: break
                case nil: stopped = true
                }
                return !stopped
            }
        }

        var stats = TreeWalker.Stats()
        switch folder.kind {
        case .file:
            search(folder.absolute, shown: folder.relative)
        case .directory:
            let prefix = folder.absolute == "/" ? "/" : folder.absolute + "/"
            stats = walker.walk(folder.absolute) { entry in
                guard entry.kind == .file,
                      files.matches(name: entry.name, pathBelowRoot: String(entry.absolute.dropFirst(prefix.count)))
                else { return true }
                if Workspace.fileSize(entry.absolute) > Self.maxFileBytes {
                    largeFiles += 1
                    return true
                }
                search(entry.absolute, shown: entry.relative)
                return !stopped
            }
        default:
            try folder.requireDirectory()
        }

        if stopped {
            if Task.isCancelled || context.deadline.map({ .now >= $0 }) == true {
                throw ToolFailure("the search was stopped: the run is out of time")
            }
            let limit = maxSearchTime.seconds
            let shown = limit == limit.rounded() ? "\(Int(limit))" : "\(limit)"
            throw ToolFailure("the pattern took over \(shown) s to search "
                + "(nested repetition such as (a+)+ backtracks without end); use a simpler pattern")
        }
        var notes = stats.notes(namingSkipped: false)
        if largeFiles > 0 { notes.append("\(largeFiles) files over \(Self.maxFileBytes >> 20) MB not searched") }
        if matcher.literal { notes.append("searched as plain text (not a valid regex)") }
        return lines.result(headline: counted(lines.total, "match", "matches") + " in \(folder.relative)", notes: notes,
                            incomplete: stats.capped, summary: counted(lines.total, "match", "matches") + " for \(pattern)")
    }

    /// A matching line as shown: without its indentation, at most `maxShownCharacters`.
    static func shorten(_ line: String) -> String {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        guard trimmed.count > maxShownCharacters else { return trimmed }
        return String(trimmed.prefix(maxShownCharacters)) + " [...]"
    }
}

/// A line test: a regular expression, or the literal text when the pattern does not compile. Lower-case
/// patterns match any case (as ripgrep's smart case), which helps small models that guess the case wrong.
struct LineMatcher {
    let regex: NSRegularExpression?
    let text: String
    let ignoreCase: Bool
    var literal: Bool { regex == nil }

    init(_ pattern: String) {
        text = pattern
        ignoreCase = pattern == pattern.lowercased()
        regex = try? NSRegularExpression(pattern: pattern, options: ignoreCase ? [.caseInsensitive] : [])
    }

    /// Whether the line matches; nil when matching was still going at `giveUpAt` or the task was cancelled
    /// (ICU reports progress during a long match, which is where it can be stopped).
    func matches(_ line: String, giveUpAt: ContinuousClock.Instant) -> Bool? {
        guard let regex else { return line.range(of: text, options: ignoreCase ? [.caseInsensitive] : []) != nil }
        var found = false
        var gaveUp = false
        regex.enumerateMatches(in: line, options: [.reportProgress], range: NSRange(line.startIndex..., in: line)) {
            result, _, stop in
            if result != nil {
                found = true
                stop.pointee = true
            } else if ContinuousClock.now >= giveUpAt || Task.isCancelled {
                gaveUp = true
                stop.pointee = true
            }
        }
        return gaveUp && !found ? nil : found
    }
}
